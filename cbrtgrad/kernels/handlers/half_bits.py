"""float16 and bfloat16 by their bits in numba: the MLX loops' half precision, as the api rounds it.

numba's CPU target has no float16 (/work/shared/REFERENCE.md), so the loops
of :mod:`cbrtgrad.kernels.handlers.buffer_loops` read half-precision elements as their 16
bits, widen them exactly (the cube root to float32, the gradient to float64:
the dtypes the api computes them in), run the ufuncs' block entries (linked
by name, :mod:`cbrtgrad.kernels.handlers.linked_entries`: the MLX loops link the
compute dtype's before they are compiled or loaded), and
round the result back to half precision once: to nearest even, except where
the kernel's result is exactly the midpoint ``m`` of two half values, where
the exact value's side of ``m`` decides (:mod:`cbrtgrad.arrays.half`, whose
comparisons are exact in float64 for half-precision operands: ``|x|`` with
``m^3``, ``|g|`` with ``3 m y^2``). A nan becomes what numpy's float16 cast
(its top payload bits) or ml_dtypes' bfloat16 cast (the quiet nan) makes of
it, with the result's sign: the bits of ``cbrtgrad.cbrt(x, out=half)``.
"""

from __future__ import annotations

import numba
import numpy as np

from ...build import compile as _compile
from ..cpu.ufuncs import run_forward_entry, run_grad_entry
from ..formulas.primitives import f32_as_i32, f64_as_i64, i32_as_f32, mul32
from .linked_entries import flags_now, forward_entry_of, grad_entry_of

#: Elements widened per step.
BUFFER = 1024

# float16's exponent bias to float32's, and bfloat16's subnormal scale (2^(127 + 7 - 1)).
_F16_TO_F32_BIAS = np.int64((127 - 15) << 23)
_BF16_SUBNORMAL_SCALE = 2.0**133
_F16_SUBNORMAL_SCALE = 2.0**24


@numba.njit(**_compile.SCALAR_OPTIONS)
def _half_to_f32(bits, brain):  # type: ignore[no-untyped-def]
    # The float32 of a float16 (brain False) or bfloat16 (True) bit pattern,
    # exactly (a nan keeps its payload, as numpy and ml_dtypes widen it).
    b = np.int64(bits) & np.int64(0xFFFF)
    if brain:
        return i32_as_f32(np.int32(b << np.int64(16)))
    sign = (b & np.int64(0x8000)) << np.int64(16)
    exponent = (b >> np.int64(10)) & np.int64(0x1F)
    significand = b & np.int64(0x3FF)
    if exponent == 0x1F:
        pattern = sign | np.int64(0x7F800000) | (significand << np.int64(13))
    elif exponent == 0:
        # A subnormal (or zero): its significand times 2^-24, exact and normal in float32.
        tiny = mul32(np.float32(significand), np.float32(2.0**-24))
        pattern = sign | np.int64(f32_as_i32(tiny))
    else:
        pattern = (
            sign | ((exponent << np.int64(23)) + _F16_TO_F32_BIAS) | (significand << np.int64(13))
        )
    return i32_as_f32(np.int32(pattern))


@numba.njit(**_compile.SCALAR_OPTIONS)
def _nearest_half(mag, brain):  # type: ignore[no-untyped-def]
    # ``mag`` (a non-negative float64, not nan) rounded to the half format to
    # nearest even, as numpy's (ml_dtypes') cast from float64 rounds it: the
    # bits, the bits of the half value below, and whether ``mag`` is exactly
    # the midpoint of those two (above the largest value: the overflow
    # threshold, whose upper neighbour is inf's pattern).
    significand_bits = np.int64(7) if brain else np.int64(10)
    bias = np.int64(127) if brain else np.int64(15)
    inf_bits = np.int64(0x7F80) if brain else np.int64(0x7C00)
    d = f64_as_i64(mag)
    if (d >> np.int64(52)) - np.int64(1023) < np.int64(1) - bias:
        # Below the least normal: in units of the least subnormal (exact).
        scaled = mag * (_BF16_SUBNORMAL_SCALE if brain else _F16_SUBNORMAL_SCALE)
        low = np.int64(scaled)
        rest = scaled - np.float64(low)
        mid = rest == 0.5
        up = rest > 0.5 or (mid and (low & np.int64(1)) == 1)
    else:
        shift = np.int64(52) - significand_bits
        rest_bits = d & ((np.int64(1) << shift) - np.int64(1))
        low = (d >> shift) - ((np.int64(1023) - bias) << significand_bits)
        if low >= inf_bits:  # 2^(emax + 1) and above, inf itself
            return inf_bits, inf_bits, False
        halfway = np.int64(1) << (shift - np.int64(1))
        mid = rest_bits == halfway
        up = rest_bits > halfway or (mid and (low & np.int64(1)) == 1)
    return low + (np.int64(1) if up else np.int64(0)), low, mid


@numba.njit(**_compile.SCALAR_OPTIONS)
def _half_nan(nan64, brain):  # type: ignore[no-untyped-def]
    # numpy's float16 of a float64 nan (the top payload bits, kept a nan);
    # ml_dtypes' bfloat16 of one is the quiet nan 0x7FC0. The sign is added by the caller.
    if brain:
        return np.int64(0x7FC0)
    h = np.int64(0x7C00) + ((f64_as_i64(nan64) & np.int64((1 << 52) - 1)) >> np.int64(42))
    return h + np.int64(1) if h == 0x7C00 else h


@numba.njit(**_compile.SCALAR_OPTIONS)
def _side(a, b):  # type: ignore[no-untyped-def]
    return np.int64(1) if a > b else (np.int64(-1) if a < b else np.int64(0))


@numba.njit(**_compile.SCALAR_OPTIONS)
def _rounded_half(q, side_of_mid, a, b, brain):  # type: ignore[no-untyped-def]
    # _half._round for one element: q (float64, within a rounding of the exact
    # t) to the half format; where |q| is a midpoint m, t's side of it decides:
    # side_of_mid(m, a, b) is the sign of t - m, exactly.
    sign = np.int64(0x8000) if f64_as_i64(q) < 0 else np.int64(0)
    if q != q:
        return np.uint16(_half_nan(q, brain) | sign)
    mag = abs(q)
    bits, low, mid = _nearest_half(mag, brain)
    if mid:
        side = side_of_mid(mag, a, b)
        if side > 0:
            bits = low + np.int64(1)
        elif side < 0:
            bits = low
    return np.uint16(bits | sign)


@numba.njit(**_compile.SCALAR_OPTIONS)
def _root_side(m, x, unused):  # type: ignore[no-untyped-def]
    # cbrt|x| against m: |x| against m^3, exact (m has at most 12 significant bits).
    return _side(abs(x), m * m * m)


@numba.njit(**_compile.SCALAR_OPTIONS)
def _grad_side(m, g, y):  # type: ignore[no-untyped-def]
    # |g| / (3 y^2) against m: |g| against 3 m y^2, exact for half-precision g
    # and y (at most 2 + 12 + 22 significant bits, inside float64's exponent range).
    return _side(abs(g), ((m * y) * y) * 3.0)


@numba.njit(**_compile.BLOCK_OPTIONS)
def forward_half(x, y, brain):  # type: ignore[no-untyped-def]
    # y = cbrt(x) for uint16 arrays of float16 (brain False) or bfloat16 bits.
    n = x.shape[0]
    wide = np.empty(min(n, BUFFER), np.float32)
    root = np.empty(min(n, BUFFER), np.float32)
    for start in range(0, n, BUFFER):
        count = min(BUFFER, n - start)
        for i in range(count):
            wide[i] = _half_to_f32(x[start + i], brain)
        run_forward_entry(forward_entry_of(wide), wide[:count], root[:count])
        for i in range(count):
            y[start + i] = _rounded_half(
                np.float64(root[i]), _root_side, np.float64(wide[i]), 0.0, brain
            )


@numba.njit(**_compile.BLOCK_OPTIONS)
def grad_half(g, g_constant, y, dx, brain):  # type: ignore[no-untyped-def]
    # dx = g / (3 y^2) for uint16 arrays of half bits (g of one element if g_constant).
    n = y.shape[0]
    gs = np.empty(min(n, BUFFER), np.float64)
    ys = np.empty(min(n, BUFFER), np.float64)
    qs = np.empty(min(n, BUFFER), np.float64)
    for start in range(0, n, BUFFER):
        count = min(BUFFER, n - start)
        for i in range(count):
            gs[i] = np.float64(_half_to_f32(g[0 if g_constant else start + i], brain))
            ys[i] = np.float64(_half_to_f32(y[start + i], brain))
        run_grad_entry(grad_entry_of(ys), gs[:count], ys[:count], qs[:count], flags_now())
        for i in range(count):
            dx[start + i] = _rounded_half(qs[i], _grad_side, gs[i], ys[i], brain)
