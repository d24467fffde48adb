"""Measure the route cbrtgrad.mlx did not take: the float32 cube root in MLX's own element-wise ops.

Issue 39 names two routes to a cube root MLX can trace (``mx.vmap``,
``mx.compile``): an MLX C++ primitive that calls cbrtgrad's numba kernels
(kept: ``cbrtgrad/mlx/_primitive.cpp``), or the algorithm written in MLX ops,
``mx.view`` for the bit tricks and float64 on the CPU. This script writes the
second for the float32 forward only (the formulas of
``cbrtgrad/kernels/formulas/f32.py``; MLX has no element-wise fma, so the
float32 Newton step and the polynomial round twice where the kernel fuses,
and the exact sign of ``x - m^3`` comes from a Dekker split of ``m*m``
instead of one fma), and reports, against ``cbrtgrad.cbrt``:

* the bits, eagerly and under ``mx.compile``, on random bit patterns and the
  specials;
* the time of ``mx.eval`` of each, and of the kept primitive, in one run.

It is a measurement, not a second implementation: float64 (whose hard lanes
need exact integer arithmetic), the gradient and half precision are not
written this way (docs/mlx.md says why).

Run: ``python tools/mlx_ops_route.py [-n N] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import time

import mlx.core as mx
import numpy as np

import cbrtgrad
import cbrtgrad.mlx as cm
from cbrtgrad.kernels.formulas import f32

F32, F64, I32, I64 = mx.float32, mx.float64, mx.int32, mx.int64


def _i32(value: int) -> mx.array:
    return mx.array(np.int32(value), I32)


def _i64(value: int) -> mx.array:
    return mx.array(np.int64(value), I64)


def cbrt_ops(x: mx.array) -> mx.array:
    """cbrtgrad's float32 cube root in MLX ops (float64 arithmetic on the CPU), no fma."""
    cpu = mx.cpu
    bits = x.view(I32)
    sign = bits & _i32(-0x80000000)
    iax = bits & _i32(0x7FFFFFFF)
    special = (iax == _i32(0)) | (iax >= _i32(0x7F800000))
    subnormal = (iax < _i32(0x00800000)) & ~special
    ax = iax.view(F32)
    # A subnormal scaled by 2^48 (exact), its root by 2^-16 at the end; specials computed on 1.
    xs = mx.where(special, mx.array(1.0, F32), mx.where(subnormal, ax * (2.0**48), ax))
    # Step 1, float32: the bit trick and one Newton step (two roundings, no fma32).
    third = mx.array(np.float32(1.0 / 3.0), F32)
    guess = _i32(int(f32._INV_CBRT_MAGIC32)) - (xs.view(I32).astype(F32) * third).astype(I32)
    r = guess.view(F32)
    minus_third = mx.array(np.float32(-1.0 / 3.0), F32)
    four_thirds = mx.array(np.float32(4.0 / 3.0), F32)
    r = r * (((xs * r) * (r * r)) * minus_third + four_thirds)
    # Step 2, float64 (CPU only): y1 = y0 P(u).
    ax64 = xs.astype(F64, stream=cpu)
    rd = r.astype(F64, stream=cpu)
    y0 = ax64 * (rd * rd)
    u = y0 * rd
    y1 = y0 * ((u * f32._P2 + f32._P1) * u + f32._P0)
    # Step 3: t or t + ulp by the exact sign of x - m^3 (m*m exact; split into
    # 26 + 24 bits so that each product with m is exact; x - hi m is exact by
    # Sterbenz's lemma, so the one rounding of the last difference keeps its sign).
    t = y1.view(I64) & _i64(int(f32._FLOAT32_PRECISION_MASK))
    m = (t | _i64(int(f32._HALF_ULP32_AS_I64))).view(F64)
    mm = m * m
    c = mm * float(2**27 + 1)
    hi = c - (c - mm)
    lo = mm - hi
    above = ((ax64 - hi * m) - lo * m) >= 0.0
    t = mx.where(above, t + _i64(int(f32._ULP32_AS_I64)), t)
    y = t.view(F64).astype(F32)
    y = mx.where(subnormal, y * (2.0**-16), y)
    quiet = mx.where(iax > _i32(0x7F800000), _i32(1 << 22), _i32(0))
    out = mx.where(special, bits | quiet, y.view(I32) | sign)
    return out.view(F32)


def _mismatches(got: mx.array, expected: np.ndarray) -> int:
    return int(np.count_nonzero(np.array(got).view(np.uint32) != expected.view(np.uint32)))


def _best(f, repeat: int) -> float:  # type: ignore[no-untyped-def]
    f()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("-n", type=int, default=10**6, help="random bit patterns checked")
    parser.add_argument("--repeat", type=int, default=20, help="timed calls, best kept")
    parser.add_argument("--size", type=int, default=10**6, help="elements of the timed calls")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 2**32, args.n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    sub = np.arange(1, 1 << 23, 4099, dtype=np.uint32).view(np.float32)
    specials = np.float32([0.0, np.inf, np.nan, 1e-45, 3.4e38, 8.0, 27.0])
    x = np.concatenate([x, sub, specials, -sub, -specials])
    expected = cbrtgrad.cbrt(x)
    xm = mx.array(x)
    compiled = mx.compile(cbrt_ops)
    print(f"{x.size:,} float32 inputs (random bit patterns, subnormals, specials)")
    print(f"  MLX ops, eager:    {_mismatches(cbrt_ops(xm), expected):,} results differ")
    print(f"  MLX ops, compiled: {_mismatches(compiled(xm), expected):,} results differ")
    print(f"  primitive:         {_mismatches(cm.cbrt(xm), expected):,} results differ")
    y = mx.array(rng.standard_normal(args.size).astype(np.float32))
    mx.eval(y)
    view = np.asarray(y)
    rows = {
        "MLX ops, eager": lambda: mx.eval(cbrt_ops(y)),
        "MLX ops, compiled": lambda: mx.eval(compiled(y)),
        "primitive (cbrtgrad.mlx.cbrt)": lambda: mx.eval(cm.cbrt(y)),
        "cbrtgrad.cbrt on the numpy view": lambda: cbrtgrad.cbrt(view),
    }
    print(f"{args.size:,} float32, best of {args.repeat}:")
    for name, call in rows.items():
        print(f"  {name:34s} {_best(call, args.repeat) * 1e3:7.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
