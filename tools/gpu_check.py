"""Check the cuda backend on a real GPU: bits against the cpu backend, then throughput.

Run on a machine with a CUDA GPU and numba-cuda (``pip install 'cbrtgrad[cuda]'``)::

    NUMBA_ENABLE_CUDASIM=0 python tools/gpu_check.py --json gpu_check.json

1. Bit for bit, float32 and float64: the case table's special values and
   ``--random`` (default 10^8) random inputs (random bit patterns and scaled
   normals), for the forward, backward and fused kernels, against the cpu
   formula (computed by the ``parallel`` backend: same formula, same bits).
   Also a float16 device array and an object that only exposes
   ``__cuda_array_interface__`` (as CuPy and PyTorch tensors do).
2. Throughput at ``2**--log2-size`` elements (default 2^28): forward, backward
   and fused against a device-to-device copy of the same number of bytes,
   timed with CUDA events (best of ``--repeat``). Goal on an H200: at least
   90 % of copy bandwidth.

Prints a table and writes JSON; exits 1 on any bit mismatch. Takes well under
3 minutes on an H200 (the host reference dominates). ``--random 10000
--log2-size 12`` runs it in seconds under the simulator, as a smoke test.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import numpy as np


def _cases(dtype: type, n: int, seed: int) -> np.ndarray:
    info = np.finfo(dtype)
    special = np.array(
        [0.0, -0.0, np.inf, -np.inf, np.nan, info.smallest_subnormal, -info.smallest_subnormal,
         info.smallest_normal, info.max, -info.max, info.eps, 1.0, -1.0, 8.0, -27.0],
        dtype=dtype,
    )  # fmt: skip
    rng = np.random.default_rng(seed)
    itype = {2: np.int16, 4: np.int32, 8: np.int64}[np.dtype(dtype).itemsize]
    half = n // 2
    bits = rng.integers(np.iinfo(itype).min, np.iinfo(itype).max, half, dtype=itype).view(dtype)
    normal = (rng.standard_normal(n - half) * 10.0 ** rng.integers(-30, 30, n - half)).astype(dtype)
    return np.concatenate([special, bits, normal])


def _mismatches(a: np.ndarray, b: np.ndarray) -> int:
    return int(
        np.count_nonzero(
            a.view(np.uint8).reshape(a.size, -1) != b.view(np.uint8).reshape(b.size, -1)
        )
        if a.size
        else 0
    )  # noqa: E501


class _Foreign:
    """Only ``__cuda_array_interface__``, like a CuPy array or a PyTorch tensor."""

    def __init__(self, device_array) -> None:  # type: ignore[no-untyped-def]
        self._keep = device_array
        self.__cuda_array_interface__ = device_array.__cuda_array_interface__


def check_bits(n_random: int, chunk: int) -> list[dict]:
    from numba import cuda

    from cbrtgrad.backends import get_backend

    gpu, ref = get_backend("cuda"), get_backend("parallel")
    rows = []
    for dtype in (np.float32, np.float64):
        bad = {"forward": 0, "backward": 0, "fused": 0}
        total = 0
        x_all = _cases(dtype, n_random, seed=1)
        g_all = _cases(dtype, n_random, seed=2)
        for start in range(0, x_all.size, chunk):
            x, g = x_all[start : start + chunk], g_all[start : start + chunk]
            with np.errstate(all="ignore"):
                y_ref = ref.cube_root(x)
                dx_ref = ref.cube_root_grad(g, y_ref)
            xd, gd, yd = cuda.to_device(x), cuda.to_device(g), cuda.to_device(y_ref)
            bad["forward"] += _mismatches(gpu.cube_root(xd).copy_to_host(), y_ref)
            bad["backward"] += _mismatches(gpu.cube_root_grad(gd, yd).copy_to_host(), dx_ref)
            yf, dxf = gpu.cube_root_and_grad(xd, gd)
            bad["fused"] += _mismatches(yf.copy_to_host(), y_ref) + _mismatches(
                dxf.copy_to_host(), dx_ref
            )
            total += x.size
        rows.append({"dtype": np.dtype(dtype).name, "elements": total, "mismatches": bad})
    h = _cases(np.float16, 100_000, seed=3)
    with np.errstate(all="ignore"):
        h_ref = ref.cube_root(h)
    rows.append({
        "dtype": "float16 (computed in float32)",
        "elements": h.size,
        "mismatches": {"forward": _mismatches(gpu.cube_root(cuda.to_device(h)).copy_to_host(),
                                              h_ref)},
    })  # fmt: skip
    if not hasattr(cuda.device_array(1), "__cuda_array_interface__"):
        return rows  # the simulator's arrays have no interface to wrap
    x = _cases(np.float32, 100_000, seed=4)
    with np.errstate(all="ignore"):
        x_ref = ref.cube_root(x)
    foreign = gpu.cube_root(_Foreign(cuda.to_device(x))).copy_to_host()
    rows.append({
        "dtype": "float32 via __cuda_array_interface__",
        "elements": x.size,
        "mismatches": {"forward": _mismatches(foreign, x_ref)},
    })  # fmt: skip
    return rows


def _best_ms(run, repeat: int) -> float:  # type: ignore[no-untyped-def]
    from numba import cuda

    run()  # compile and warm up
    cuda.synchronize()
    best = float("inf")
    for _ in range(repeat):
        start, stop = cuda.event(), cuda.event()
        start.record()
        run()
        stop.record()
        stop.synchronize()
        best = min(best, start.elapsed_time(stop))
    return best


def measure(log2_size: int, repeat: int) -> list[dict]:
    from numba import cuda

    from cbrtgrad.backends import get_backend

    gpu = get_backend("cuda")
    n = 2**log2_size
    rows = []
    for dtype in (np.float32, np.float64):
        item = np.dtype(dtype).itemsize
        x = cuda.to_device(np.linspace(-1e6, 1e6, n, dtype=dtype))
        g = cuda.to_device(np.ones(n, dtype))
        y = cuda.device_array(n, dtype)
        dx = cuda.device_array(n, dtype)
        copy_src = cuda.device_array(2 * n, dtype)
        copy_dst = cuda.device_array(2 * n, dtype)
        work = {
            # name: (run, bytes moved, bytes of the equivalent copy)
            # NOTE: the lambdas run inside this iteration, on this dtype's arrays.
            "forward": (lambda: gpu.cube_root(x, out=y), 2 * n * item),  # noqa: B023
            "backward": (lambda: gpu.cube_root_grad(g, y, out=dx), 3 * n * item),  # noqa: B023
            "fused": (lambda: gpu.cube_root_and_grad(x, g, out=(y, dx)), 4 * n * item),  # noqa: B023, E501
        }
        for name, (run, moved) in work.items():
            # A copy reads and writes; it moves the same bytes as the kernel
            # with moved/2 elements read and written.
            m = moved // (2 * item)
            src, dst = copy_src[:m], copy_dst[:m]
            copy_ms = _best_ms(lambda: dst.copy_to_device(src), repeat)  # noqa: B023
            kernel_ms = _best_ms(run, repeat)
            rows.append({
                "dtype": np.dtype(dtype).name,
                "kernel": name,
                "elements": n,
                "bytes": moved,
                "kernel_ms": kernel_ms,
                "copy_ms": copy_ms,
                "kernel_GBps": moved / kernel_ms / 1e6,
                "copy_GBps": moved / copy_ms / 1e6,
                "fraction_of_copy": copy_ms / kernel_ms,
            })  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--random", type=int, default=10**8, help="random inputs per dtype")
    parser.add_argument("--chunk", type=int, default=2**24, help="elements per bit-check batch")
    parser.add_argument("--log2-size", type=int, default=28, help="log2 of the timed size")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--json", default="gpu_check.json", help="where to write the results")
    args = parser.parse_args(argv)

    from numba import cuda

    from cbrtgrad.backends import get_backend

    status = get_backend("cuda").availability()
    simulated = bool(getattr(cuda, "simulator", None) and "simulator" in status.reason)
    print(f"cuda backend: {status.reason}")
    began = time.perf_counter()
    bits = check_bits(args.random, args.chunk)
    bits_s = time.perf_counter() - began
    print(f"\nbit-for-bit against the cpu formula ({bits_s:.1f} s)")
    print(f"{'dtype':40} {'elements':>12}  mismatches")
    for row in bits:
        print(f"{row['dtype']:40} {row['elements']:>12,}  {row['mismatches']}")
    speed = measure(args.log2_size, args.repeat)
    print(f"\nthroughput at 2^{args.log2_size} elements (best of {args.repeat})")
    print(f"{'dtype':8} {'kernel':9} {'ms':>9} {'GB/s':>8} {'copy GB/s':>10} {'of copy':>8}")
    for r in speed:
        print(
            f"{r['dtype']:8} {r['kernel']:9} {r['kernel_ms']:9.3f} {r['kernel_GBps']:8.1f} "
            f"{r['copy_GBps']:10.1f} {r['fraction_of_copy']:8.1%}"
        )
    total_s = time.perf_counter() - began
    print(f"\ntotal {total_s:.1f} s")
    ok = all(sum(r["mismatches"].values()) == 0 for r in bits)
    with open(args.json, "w") as fh:
        json.dump(
            {
                "device": status.reason,
                "simulated": simulated,
                "python": platform.python_version(),
                "numpy": np.__version__,
                "bits": bits,
                "throughput": speed,
                "bit_check_seconds": bits_s,
                "total_seconds": total_s,
                "all_bits_equal": ok,
            },
            fh,
            indent=2,
        )
    print(f"wrote {args.json}; bits {'all equal' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
