"""The cuda backend measured on a GPU: throughput against a copy and the GPU peers.

``python tools/measure.py cuda`` and ``tools/gpu_check.py`` print these
rows. They need a CUDA GPU, numba-cuda and CuPy (the arrays are CuPy's; the
copy anchor is ``cupy.copyto``); JAX and PyTorch are measured where they are
installed. Times are the best of ``repeat`` runs, taken with CUDA events
(JAX's with the host clock around ``block_until_ready``, which it needs).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from cbrtgrad.cli.bench.anchors import BenchRow


def events_ms(run: Any, repeat: int) -> float:
    import cupy

    run()
    run()
    cupy.cuda.Device().synchronize()
    best = float("inf")
    for _ in range(repeat):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        run()
        stop.record()
        stop.synchronize()
        best = min(best, cupy.cuda.get_elapsed_time(start, stop))
    return best


def _wall_ms(run: Any, repeat: int) -> float:
    run()
    run()
    best = float("inf")
    for _ in range(repeat):
        began = time.perf_counter()
        run()
        best = min(best, (time.perf_counter() - began) * 1e3)
    return best


def measure(log2_size: int, repeat: int) -> list[dict[str, Any]]:
    import cupy

    rows = []
    for dtype in (np.float32, np.float64):
        rows += _measure_dtype(np.dtype(dtype), 2**log2_size, repeat)
        cupy.get_default_memory_pool().free_all_blocks()
    return rows


def _measure_dtype(dtype: np.dtype, n: int, repeat: int) -> list[dict[str, Any]]:
    import cupy

    import cbrtgrad
    from cbrtgrad.backends import get_backend

    gpu = get_backend("cuda")
    rng = cupy.random.default_rng(7)
    x = (rng.standard_normal(n, dtype=np.float64) * 1e3).astype(dtype)
    g = rng.standard_normal(n, dtype=np.float64).astype(dtype)
    y, dx = cupy.empty_like(x), cupy.empty_like(x)
    work: dict[str, tuple[Any, int, Any]] = {
        # name: (run, bytes moved per element, timer)
        "copy (cupy.copyto)": (lambda: cupy.copyto(y, x), 2, events_ms),
        "cbrtgrad forward, out=": (lambda: gpu.cube_root(x, out=y), 2, events_ms),
        "cbrtgrad.cbrt(x) (allocates)": (lambda: cbrtgrad.cbrt(x), 2, events_ms),
        "cbrtgrad gradient, out=": (lambda: gpu.cube_root_grad(g, y, out=dx), 3, events_ms),
        "cbrtgrad fused, out=": (
            lambda: gpu.cube_root_and_grad(x, g, out=(y, dx)), 4, events_ms),
        "cupy.cbrt (libdevice)": (lambda: cupy.cbrt(x, out=y), 2, events_ms),
    }  # fmt: skip
    try:
        import jax
        import jax.numpy as jnp

        jax.config.update("jax_enable_x64", True)
        xj = jnp.asarray(cupy.asnumpy(x))
        f = jax.jit(jnp.cbrt)
        work["jax.jit(jnp.cbrt)"] = (lambda: f(xj).block_until_ready(), 2, _wall_ms)
    except Exception as exc:  # an optional peer
        print(f"  (jax not measured: {type(exc).__name__}: {exc})")
    try:
        import torch

        t = torch.as_tensor(x, device="cuda")
        work["torch sign(t)*t.abs().pow(1/3)"] = (
            lambda: torch.sign(t) * t.abs().pow(1.0 / 3.0), 2, _torch_ms)  # fmt: skip
    except Exception as exc:
        print(f"  (torch not measured: {type(exc).__name__}: {exc})")
    rows = []
    copy_gbps = None
    for name, (run, traffic, timer) in work.items():
        ms = timer(run, repeat)
        gbps = traffic * n * dtype.itemsize / ms / 1e6
        copy_gbps = copy_gbps or gbps  # the copy is measured first
        rows.append({"dtype": dtype.name, "kernel": name, "elements": n, "traffic": traffic,
                     "us": ms * 1e3, "GBps": gbps, "of_copy": gbps / copy_gbps})  # fmt: skip
    return rows


def engine_step(log2_size: int, repeat: int) -> list[dict[str, Any]]:
    """One training-style step, ``cbrt(x).sum().backward()``, on CuPy float32 (issue 22).

    Beside it: the fused kernel alone (the work the step cannot avoid) and
    PyTorch's ``sign(t) * t.abs().pow(1/3)`` forward and backward on the same
    device; ``bits equal`` says whether the engine's gradient is the gradient
    kernel's, bit for bit.
    """
    import cupy

    import cbrtgrad as cg
    from cbrtgrad.backends import get_backend

    gpu = get_backend("cuda")
    n = 2**log2_size
    rng = cupy.random.default_rng(11)
    x = (rng.standard_normal(n, dtype=np.float64) * 1e3).astype(np.float32)
    ones = cupy.ones_like(x)
    y, dx = cupy.empty_like(x), cupy.empty_like(x)
    leaf = cg.Tensor(x, requires_grad=True)

    def step() -> None:
        leaf.grad = None
        cg.cbrt(leaf).sum().backward()

    step()
    gpu.cube_root_and_grad(x, ones, out=(y, dx))
    equal = bool(cupy.array_equal(leaf.grad, dx))
    rows: list[dict[str, Any]] = [
        {"step": "fused kernel alone, out=", "us": events_ms(
            lambda: gpu.cube_root_and_grad(x, ones, out=(y, dx)), repeat) * 1e3},
        {"step": "cbrt(x).sum().backward()", "us": events_ms(step, repeat) * 1e3},
    ]  # fmt: skip
    try:
        import torch

        t = torch.as_tensor(x, device="cuda").requires_grad_(True)

        def torch_step() -> None:
            t.grad = None
            (torch.sign(t) * t.abs().pow(1.0 / 3.0)).sum().backward()

        rows.append(
            {"step": "torch sign*abs.pow, backward", "us": _torch_ms(torch_step, repeat) * 1e3}
        )
    except Exception as exc:  # an optional peer
        print(f"  (torch not measured: {type(exc).__name__}: {exc})")
    fused = float(rows[0]["us"])
    for row in rows:
        row.update(elements=n, of_fused=float(row["us"]) / fused, bits_equal=equal)
    return rows


def _torch_ms(run: Any, repeat: int) -> float:
    import torch

    run()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(repeat):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        stop.record()
        stop.synchronize()
        best = min(best, start.elapsed_time(stop))
    return best


def _per_call_us(run: Any, calls: int = 2000, rounds: int = 7) -> float:
    import cupy

    run()
    cupy.cuda.Device().synchronize()
    best = float("inf")
    for _ in range(rounds):
        began = time.perf_counter()
        for _ in range(calls):
            run()
        cupy.cuda.Device().synchronize()
        best = min(best, (time.perf_counter() - began) / calls * 1e6)
    return best


def call_cost() -> list[dict[str, Any]]:
    import cupy
    from numba import cuda

    import cbrtgrad
    from cbrtgrad.backends import get_backend

    gpu = get_backend("cuda")
    rows = []
    for n in (1000, 2**20):
        x = cupy.linspace(-8, 8, n, dtype=cupy.float32)
        y = cupy.empty_like(x)
        xn = cuda.as_cuda_array(x)
        cases: dict[str, Any] = {
            "cupy.cbrt(x)": lambda: cupy.cbrt(x),  # noqa: B023
            "cbrtgrad.cbrt(cupy x)": lambda: cbrtgrad.cbrt(x),  # noqa: B023
            "cuda backend, out=": lambda: gpu.cube_root(x, out=y),  # noqa: B023
            "cbrtgrad.cbrt(numba x)": lambda: cbrtgrad.cbrt(xn),  # noqa: B023
        }
        try:
            import torch

            t = torch.as_tensor(x, device="cuda")
            cases["cbrtgrad.cbrt(torch t)"] = lambda: cbrtgrad.cbrt(t)  # noqa: B023
            cases["torch sign*abs.pow"] = lambda: torch.sign(t) * t.abs().pow(1 / 3)  # noqa: B023
        except ImportError:
            pass
        for name, run in cases.items():
            rows.append({"elements": n, "call": name, "us": _per_call_us(run)})
    _profile_one_call(cupy.linspace(-8, 8, 1000, dtype=cupy.float32))
    return rows


def _profile_one_call(x: Any) -> None:
    """Where the time of ``cbrtgrad.cbrt(cupy array)`` goes (the ten costliest functions)."""
    import cProfile
    import io
    import pstats

    import cbrtgrad

    profile = cProfile.Profile()
    profile.enable()
    for _ in range(2000):
        cbrtgrad.cbrt(x)
    profile.disable()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(10)
    print("\n".join(line for line in text.getvalue().splitlines() if line.strip())[-2500:])


def bench_rows(sizes: tuple[int, ...], repeat: int) -> list[BenchRow]:
    """The bench table's rows of the cuda backend (``python tools/measure.py cuda``).

    Parameters
    ----------
    sizes : tuple of int
        Array sizes.
    repeat : int
        Timed runs per case (the best is kept).

    Returns
    -------
    list of BenchRow
        Forward against a copy, ``cupy.cbrt``, ``jax.jit(jnp.cbrt)`` and
        PyTorch's ``sign(t) * t.abs().pow(1/3)``; the gradient and the fused
        kernel against a copy of the same bytes.
    """
    import cupy

    rows = []
    for n in sizes:
        for dtype in (np.float32, np.float64):
            measured = {r["kernel"]: r for r in _measure_dtype(np.dtype(dtype), n, repeat)}
            copy = measured.pop("copy (cupy.copyto)")
            for name, r in measured.items():
                kernel, anchors = _BENCH_ANCHORS.get(name, (None, ()))
                if kernel is None:
                    continue
                for anchor in anchors:
                    if anchor == "copy same bytes":
                        # A copy moves 2 bytes per element and byte of dtype;
                        # the kernel moves traffic/2 times as many.
                        theirs = copy["us"] * r["traffic"] / 2
                    elif anchor in measured:
                        theirs = measured[anchor]["us"]
                    else:
                        continue
                    rows.append(BenchRow(kernel, "cuda", np.dtype(dtype).name, n,
                                         r["us"] * 1e3 / n, anchor, theirs * 1e3 / n,
                                         theirs / r["us"]))  # fmt: skip
            cupy.get_default_memory_pool().free_all_blocks()
    return rows


#: Which measured case is which bench kernel, and the anchors it is shown against.
_BENCH_ANCHORS = {
    "cbrtgrad forward, out=": (
        "cbrt",
        (
            "copy same bytes",
            "cupy.cbrt (libdevice)",
            "jax.jit(jnp.cbrt)",
            "torch sign(t)*t.abs().pow(1/3)",
        ),
    ),  # fmt: skip
    "cbrtgrad gradient, out=": ("cbrt_grad", ("copy same bytes",)),
    "cbrtgrad fused, out=": ("cbrt_and_grad", ("copy same bytes",)),
}
