"""Check the cuda backend on a real GPU: bits against the CPU, interop, speed, call cost.

Run on a machine with a CUDA GPU, numba-cuda and CuPy (PyTorch and JAX are
measured where installed)::

    NUMBA_ENABLE_CUDASIM=0 python tools/gpu_check.py --json gpu_check.json

1. Bit for bit against the ``parallel`` backend (the same formulas on the
   CPU): all 2^32 float32 inputs and ``--f64`` (default 10^8) float64 inputs
   (random bit patterns, [1, 8), exact cubes and their neighbours,
   subnormals) through the forward kernel; the gradient and the fused kernel
   on ``--pairs`` (default 2^25) pairs per dtype, and on about 10^6 pairs per
   dtype with special operands and subnormal or overflowing results; float16
   inputs; and an array
   of 2^31 + 4099 elements, checked whole (64-bit indexing).
2. Interop: CuPy, PyTorch, numba and bare ``__cuda_array_interface__`` inputs
   give results of their own kind, equal to the CPU's, on the library's
   current stream; every result goes back into every function.
3. Throughput at ``2**--log2-size`` elements (default 2^28), best of
   ``--repeat`` timed with CUDA events: forward, gradient and fused against a
   device-to-device copy (``cupy.copyto``), ``cupy.cbrt``, ``jax.jit(jnp.cbrt)``
   and PyTorch's ``sign(t) * t.abs().pow(1/3)``.
4. Per-call cost on 1000 and 2^20 float32 elements against ``cupy.cbrt``.

Prints the tables with the GPU, driver and library versions, writes JSON,
exits 1 on any mismatch. Takes about two minutes on an H200. ``--sweep`` also
times the kernels' other shapes (elements per thread, register cap) and, at
the default shape, the select-based formulas the kernels' own replaced
(``kernels.cuda.FORMS``), about a minute more.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from typing import Any

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX: leave memory to CuPy

import numpy as np  # noqa: E402

# The repository's root: tools.measuring (not shipped) and this tree's cbrtgrad.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tools.measuring.gpu import call_cost, engine_step, events_ms, measure  # noqa: E402

BITS = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def _same(a: np.ndarray, b: np.ndarray) -> int:
    """How many elements differ in their bits."""
    kind = BITS[a.dtype.itemsize]
    return int(np.count_nonzero(a.view(kind) != b.view(kind)))


def _host_forward(x: np.ndarray) -> np.ndarray:
    # Through the public function, which computes float16 in float32 as the
    # GPU does (the parallel backend itself takes float32 and float64 only).
    import cbrtgrad

    with np.errstate(all="ignore"):
        return np.asarray(cbrtgrad.cbrt(x, backend="parallel"))


def _host_grad(g: np.ndarray, y: np.ndarray) -> np.ndarray:
    import cbrtgrad

    with np.errstate(all="ignore"):
        return np.asarray(cbrtgrad.cbrt_grad(g, y, backend="parallel"))


def _grad_edges(dtype: np.dtype, rng: Any) -> tuple[np.ndarray, np.ndarray]:
    """(g, y) where the gradient kernels leave their common path.

    Every pair of special values (zeros, subnormals, infs, nans, the extremes),
    and quotients from below the smallest subnormal to past the overflow
    threshold, where the float32 kernel's common path hands over to the full
    formula. The nan results are bit for bit too (docs/accuracy.md, "nan
    results"): a GPU's own nans would not be the CPU's.
    """
    from cbrtgrad.verification import cases

    specials = cases.special_values(dtype)
    g = np.repeat(specials, specials.size)
    y = np.tile(specials, specials.size)
    n = 2**20
    ys = _host_forward(cases.random_inputs(dtype, n))
    log2_quotient = (-160, 135) if dtype == np.float32 else (-1090, 1030)
    gs, ys = cases.gradient_pairs(ys, rng, log2_quotient)
    return np.concatenate([g, gs]), np.concatenate([y, ys])


def _f64_inputs(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    quarter = n // 4
    bits = rng.integers(0, 2**64, quarter, dtype=np.uint64).view(np.float64)
    unit = rng.uniform(1.0, 8.0, quarter)
    k = rng.integers(1, 2**17, quarter // 3).astype(np.float64)
    cubes = k**3
    near = np.concatenate([cubes, np.nextafter(cubes, 0.0), np.nextafter(cubes, np.inf)])
    sub = rng.integers(1, 2**52, n - 2 * quarter - near.size, dtype=np.uint64).view(np.float64)
    signs = np.where(rng.integers(0, 2, n) == 1, -1.0, 1.0)
    with np.errstate(invalid="ignore"):  # nan patterns times a sign
        return np.concatenate([bits, unit, near, sub]) * signs


def check_bits(f64_count: int, pairs: int) -> list[dict[str, Any]]:
    import cupy

    import cbrtgrad

    rows: list[dict[str, Any]] = []

    def row(what: str, n: int, bad: int, seconds: float) -> None:
        rows.append({"check": what, "elements": n, "mismatches": bad, "seconds": seconds})
        print(f"  {what:58} {n:>14,} {bad:>10} {seconds:7.1f} s", flush=True)

    began = time.perf_counter()
    chunk, bad = 2**28, 0
    for start in range(0, 2**32, chunk):
        host = np.arange(start, start + chunk, dtype=np.uint64).astype(np.uint32).view(np.float32)
        dev = cupy.arange(start, start + chunk, dtype=cupy.uint64).astype(cupy.uint32)
        bad += _same(cbrtgrad.cbrt(dev.view(cupy.float32)).get(), _host_forward(host))
    row("float32 forward, all 2^32 inputs", 2**32, bad, time.perf_counter() - began)

    began = time.perf_counter()
    bad = 0
    x = _f64_inputs(f64_count, 1)
    for start in range(0, x.size, 2**24):
        part = x[start : start + 2**24]
        bad += _same(cbrtgrad.cbrt(cupy.asarray(part)).get(), _host_forward(part))
    row("float64 forward, bits/[1,8)/cubes+-1ulp/subnormals", x.size, bad,
        time.perf_counter() - began)  # fmt: skip

    rng = np.random.default_rng(2)
    for dtype in (np.float32, np.float64):
        began = time.perf_counter()
        xs = (rng.standard_normal(pairs) * 10.0 ** rng.integers(-20, 20, pairs)).astype(dtype)
        g = (rng.standard_normal(pairs) * 10.0 ** rng.integers(-20, 20, pairs)).astype(dtype)
        y = _host_forward(xs)
        dx = _host_grad(g, y)
        gd, yd = cupy.asarray(g), cupy.asarray(y)
        bad_grad = _same(cbrtgrad.cbrt_grad(gd, yd).get(), dx)
        yf, dxf = cbrtgrad.cbrt_and_grad(cupy.asarray(xs), gd)
        bad_fused = _same(yf.get(), y) + _same(dxf.get(), dx)
        name = np.dtype(dtype).name
        row(f"{name} gradient g/(3y^2)", pairs, bad_grad, time.perf_counter() - began)
        row(f"{name} fused (y and dx)", pairs, bad_fused, 0.0)

    for dtype in (np.float32, np.float64):
        began = time.perf_counter()
        g, y = _grad_edges(np.dtype(dtype), rng)
        dx = _host_grad(g, y)
        bad = _same(cbrtgrad.cbrt_grad(cupy.asarray(g), cupy.asarray(y)).get(), dx)
        row(f"{np.dtype(dtype).name} gradient: specials, subnormal and overflowing results",
            g.size, bad, time.perf_counter() - began)  # fmt: skip

    h = np.arange(2**16, dtype=np.uint16).view(np.float16)
    began = time.perf_counter()
    got = cbrtgrad.cbrt(cupy.asarray(h))
    bad = _same(got.get(), _host_forward(h)) + int(got.dtype != np.float32)
    row("float16 forward, all 2^16 inputs (float32 results)", h.size, bad,
        time.perf_counter() - began)  # fmt: skip

    began = time.perf_counter()
    n = 2**31 + 4099
    big = cupy.arange(n, dtype=cupy.uint32).view(cupy.float32)
    y_big = cbrtgrad.cbrt(big)
    del big
    bad = 0
    for start in range(0, n, chunk):
        stop = min(start + chunk, n)
        host = np.arange(start, stop, dtype=np.uint32).view(np.float32)
        bad += _same(y_big[start:stop].get(), _host_forward(host))
    del y_big
    row("float32 forward, one array of 2^31 + 4099 elements", n, bad,
        time.perf_counter() - began)  # fmt: skip
    cupy.get_default_memory_pool().free_all_blocks()
    return rows


class _Interface:
    """Only ``__cuda_array_interface__``, as another library's array exposes it."""

    def __init__(self, array: Any) -> None:
        self._keep = array
        self.__cuda_array_interface__ = array.__cuda_array_interface__


def check_interop() -> list[dict[str, Any]]:
    import cupy
    from numba import cuda

    import cbrtgrad

    x = np.linspace(-30.0, 30.0, 1001).astype(np.float32).reshape(7, 143)
    g = np.cos(x)
    y_ref = _host_forward(x)
    dx_ref = _host_grad(g, y_ref)
    makers: dict[str, Any] = {"cupy": cupy.asarray, "numba": cuda.to_device}
    kinds: dict[str, Any] = {"cupy": cupy.ndarray, "numba": type(cuda.device_array(1))}
    to_host: dict[str, Any] = {"cupy": cupy.asnumpy, "numba": lambda a: a.copy_to_host()}
    try:
        import torch

        makers["torch"] = lambda a: torch.as_tensor(a, device="cuda")
        kinds["torch"] = torch.Tensor
        to_host["torch"] = lambda t: t.cpu().numpy()
    except ImportError:
        pass
    makers["interface"] = lambda a: _Interface(cupy.asarray(a))
    kinds["interface"] = kinds["numba"]
    to_host["interface"] = to_host["numba"]
    rows = []
    for name, make in makers.items():
        xd, gd = make(x), make(g)
        y = cbrtgrad.cbrt(xd)
        dx = cbrtgrad.cbrt_grad(gd, y)  # a result passed back in
        yf, dxf = cbrtgrad.cbrt_and_grad(xd, gd)
        again = cbrtgrad.cbrt(cbrtgrad.cbrt_grad(dxf, yf))  # results in every function
        back = to_host[name]
        ok = (
            all(isinstance(r, kinds[name]) for r in (y, dx, yf, dxf, again))
            and _same(back(y), y_ref) == 0
            and _same(back(dx), dx_ref) == 0
            and _same(back(yf), y_ref) == 0
            and _same(back(dxf), dx_ref) == 0
            and back(y).shape == x.shape
        )
        rows.append({"library": name, "same kind and bits": bool(ok)})
        print(f"  {name:10} in -> {type(y).__module__}.{type(y).__name__} out: "
              f"{'ok' if ok else 'WRONG'}")  # fmt: skip
    # The library's current stream: a CuPy stream that is not the default.
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        xd = cupy.asarray(x)
        y = cbrtgrad.cbrt(xd)
        stream.synchronize()
    ok = _same(cupy.asnumpy(y), y_ref) == 0
    rows.append({"library": "cupy on a non-default stream", "same kind and bits": ok})
    print(f"  cupy on its current (non-default) stream: {'ok' if ok else 'WRONG'}")
    return rows


def sweep(log2_size: int, repeat: int) -> list[dict[str, Any]]:
    """Time the kernels' other shapes at one size (bits checked against the default)."""
    import cupy

    rows = []
    for dtype in (np.float32, np.float64):
        for name in ("forward", "grad", "fused"):
            rows += _sweep_kernel(name, np.dtype(dtype), 2**log2_size, repeat)
        cupy.get_default_memory_pool().free_all_blocks()
    return rows


def _sweep_kernel(name: str, dt: np.dtype, n: int, repeat: int) -> list[dict[str, Any]]:
    import cupy
    from cuda.core import Stream

    from cbrtgrad.kernels.cuda import elementwise as kernels

    rng = cupy.random.default_rng(3)
    x = (rng.standard_normal(n, dtype=np.float64) * 1e3).astype(dt)
    g = rng.standard_normal(n, dtype=np.float64).astype(dt)
    ins = [x] if name == "forward" else [x, g]
    outs = [cupy.empty_like(x) for _ in range(2 if name == "fused" else 1)]
    stream = Stream.from_handle(0)
    default = kernels.shape_of(name, dt)
    rows, reference = [], None
    # Every shape with the kernels' own formulas, and the default shape with
    # the select-based ones they replaced (kernels.FORMS: the same bits).
    shapes = [default, *sorted({(4, None), (8, 96), (4, 64)} - {default}, key=str)]
    for (per_thread, registers), form in [*((s, "branching") for s in shapes), (default, "select")]:
        shape = () if (per_thread, registers) == default else (per_thread, registers)
        dispatcher = kernels.kernel(name, dt, (dt,) * len(ins), *shape, form=form)
        compiled = next(iter(dispatcher.overloads.values()))
        threads = kernels.threads_per_block()  # what every kernel is compiled for
        blocks = -(-n // (threads * per_thread))
        args = [a.data.ptr for a in ins] + [o.data.ptr for o in outs] + [n]

        def run(
            compiled: Any = compiled, blocks: int = blocks, threads: int = threads, args: Any = args
        ) -> None:
            compiled.launch(args, (blocks, 1, 1), (threads, 1, 1), stream, 0)

        ms = events_ms(run, repeat)
        got = [o.get() for o in outs]
        reference = reference or got
        same = all(_same(a, b) == 0 for a, b in zip(got, reference, strict=True))
        regs = getattr(compiled, "regs_per_thread", None)
        rows.append({"dtype": dt.name, "kernel": name, "form": form, "per_thread": per_thread,
                     "max_registers": registers, "registers": regs, "us": ms * 1e3,
                     "same_bits": same})  # fmt: skip
        print(f"  {dt.name:8} {name:8} {form:9} per_thread={per_thread} "
              f"max_registers={registers!s:5} regs={regs!s:4} {ms * 1e3:9.1f} us  "
              f"bits {'same' if same else 'DIFFER'}", flush=True)  # fmt: skip
    return rows


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(0)
    found = {
        "gpu": props["name"].decode(),
        "driver": str(cupy.cuda.runtime.driverGetVersion()),
        "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(),
    }
    for package in ("numpy", "numba", "numba-cuda", "cupy-cuda13x", "cupy-cuda12x", "jax",
                    "torch", "cuda-bindings"):  # fmt: skip
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            pass
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--f64", type=int, default=10**8, help="float64 forward inputs")
    parser.add_argument("--pairs", type=int, default=2**25, help="gradient pairs per dtype")
    parser.add_argument("--log2-size", type=int, default=28, help="log2 of the timed size")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--sweep", action="store_true", help="also time other kernel shapes")
    parser.add_argument("--json", default="gpu_check.json", help="where to write the results")
    args = parser.parse_args(argv)
    for name in ("f64", "pairs", "log2_size", "repeat"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")

    from cbrtgrad.backends import get_backend

    status = get_backend("cuda").availability()
    try:
        import cupy  # noqa: F401 (the arrays, the copy anchor and the device's name are CuPy's)
    except ImportError:
        print("no CuPy: this tool measures a real GPU with CuPy arrays (pip install cupy-cuda13x)")
        return 2
    versions = _versions()
    print("  ".join(f"{k} {v}" for k, v in versions.items()))
    print(f"cuda backend: {status.reason}")
    if not status.available or "simulator" in status.reason:
        print("no GPU to check: this tool measures a real one (NUMBA_ENABLE_CUDASIM=0)")
        return 2
    began = time.perf_counter()
    print("\nbit for bit against the CPU (parallel backend)")
    bits = check_bits(args.f64, args.pairs)
    print("\ninterop: each library's arrays in and out")
    interop = check_interop()
    print(f"\nthroughput at 2^{args.log2_size} elements (best of {args.repeat})")
    speed = measure(args.log2_size, args.repeat)
    print(f"{'dtype':8} {'kernel':34} {'us':>9} {'GB/s':>8} {'of copy':>8}")
    for r in speed:
        print(f"{r['dtype']:8} {r['kernel']:34} {r['us']:9.1f} {r['GBps']:8.0f} "
              f"{r['of_copy']:8.2f}")  # fmt: skip
    log2_step = args.log2_size - 2  # issue 22 names 2^26 beside the kernels' 2^28
    print(f"\nthe engine: one step at 2^{log2_step} float32 elements (best of {args.repeat})")
    engine = engine_step(log2_step, args.repeat)
    for r in engine:
        print(f"  {r['step']:34} {r['us']:9.1f} us  {r['of_fused']:5.2f}x fused")
    print(f"  engine gradient = the fused kernel's, bit for bit: {engine[0]['bits_equal']}")
    print("\nper-call cost (host wall clock, 2000 calls, best of 7)")
    calls = call_cost()
    for r in calls:
        print(f"  {r['elements']:>8} {r['call']:28} {r['us']:8.1f} us")
    swept = sweep(args.log2_size, args.repeat) if args.sweep else []
    total = time.perf_counter() - began
    ok = all(r["mismatches"] == 0 for r in bits) and all(r["same kind and bits"] for r in interop)
    ok = ok and engine[0]["bits_equal"]
    with open(args.json, "w") as fh:
        found = {"versions": versions, "device": status.reason, "bits": bits, "interop": interop,
                 "throughput": speed, "engine": engine, "call_cost": calls, "sweep": swept,
                 "seconds": total, "all_bits_equal": ok}  # fmt: skip
        json.dump(found, fh, indent=2)
    verdict = "all equal" if ok else "MISMATCH"
    print(f"\ntotal {total:.0f} s; wrote {args.json}; bits {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
