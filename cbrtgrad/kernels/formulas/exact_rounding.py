"""Exact float64 rounding decisions for the cube root, in 64-bit integer arithmetic.

The float64 kernel's fast path (:mod:`cbrtgrad.kernels.formulas.scalar`) knows the
cube root to about 2^-80 relative; for the rare input whose root lies that
close to a midpoint between two doubles it cannot tell which way to round.
This module decides it exactly: with ``lower < upper`` two adjacent positive
doubles and ``m = (lower + upper) / 2`` their midpoint, ``x > m^3`` is a
comparison of integers of up to 166 bits, done here on 64-bit limbs that never
overflow (so the same source runs compiled, on CUDA, and in the CUDA
simulator, whose numpy scalars would warn on a wrapping add).

Why it is exact and never ties: on the grid of the finer of the two spacings,
``lower = L 2^e`` and ``upper = U 2^e`` with ``U = L + 1`` integers, so
``m = M 2^(e-1)`` with ``M = L + U`` odd and below 2^55; ``m^3 = M^3 2^(3e-3)``
with ``M^3`` odd and at least 2^159. ``x = X 2^k`` with ``X`` below 2^53, so
``x = m^3`` would need ``X 2^(k - 3e + 3) = M^3``: an odd number of 160 or more
bits equal to 53 bits shifted, impossible. The shift ``s = k - 3e + 3`` is
between 109 and 113 whenever ``m^3`` is within a factor 2 of ``x`` (the
caller's case); :func:`make_exact_rounding` asserts nothing at run time, so
the limbs are built for any ``s`` from 65 to 127.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np

_LOW32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)
_SIGNIFICAND = np.int64((1 << 52) - 1)
_HIDDEN = np.int64(1 << 52)
_EXPONENT_BIAS = np.int64(1075)  # 1023 + 52: value = significand 2^(E - 1075)


def make_exact_rounding(prims: Any, jit: Callable[[Callable[..., Any]], Any]) -> SimpleNamespace:
    """Compile the exact midpoint test against one target's primitives.

    Parameters
    ----------
    prims : namespace
        ``f64_as_i64`` (the other primitives are not needed).
    jit : callable
        The scalar (device) function decorator of the target.

    Returns
    -------
    types.SimpleNamespace
        ``above_midpoint_cubed(x, lower, upper)``: whether ``x > ((lower +
        upper) / 2)^3`` exactly, for positive normal float64 ``x`` and
        adjacent positive normal float64 ``lower < upper``; and
        ``above_midpoint_times_square(g, lower, upper, y)``: whether
        ``g > 3 m y^2`` exactly for that midpoint ``m`` and positive normal
        ``g`` and ``y``, with ``3 m y^2`` within a factor 2 of ``g``.

    Examples
    --------
    >>> import numba
    >>> from cbrtgrad.kernels.formulas.primitives import CPU_PRIMITIVES
    >>> exact = make_exact_rounding(CPU_PRIMITIVES, numba.njit)
    >>> lower = 2.0; upper = 2.0 + 2.0**-51   # m^3 = 8 + 3 * 2^-50 + ...
    >>> bool(exact.above_midpoint_cubed(8.0 + 2.0**-49, lower, upper))
    False
    >>> bool(exact.above_midpoint_cubed(8.0 + 2.0**-48, lower, upper))
    True
    """
    f64_as_i64 = prims.f64_as_i64

    @jit
    def mul_wide(a, b):  # type: ignore[no-untyped-def]
        # a * b as (high, low) 64-bit halves, from four 32 x 32 -> 64 products
        # whose partial sums stay below 2^64.
        a0 = a & _LOW32
        a1 = a >> _SHIFT32
        b0 = b & _LOW32
        b1 = b >> _SHIFT32
        p00 = a0 * b0
        p01 = a0 * b1
        p10 = a1 * b0
        p11 = a1 * b1
        middle = (p00 >> _SHIFT32) + (p01 & _LOW32) + (p10 & _LOW32)
        low = (p00 & _LOW32) | ((middle & _LOW32) << _SHIFT32)
        high = p11 + (p01 >> _SHIFT32) + (p10 >> _SHIFT32) + (middle >> _SHIFT32)
        return high, low

    @jit
    def add_carry(a, b):  # type: ignore[no-untyped-def]
        # a + b as (sum mod 2^64, carry), without a wrapping add.
        low = (a & _LOW32) + (b & _LOW32)
        high = (a >> _SHIFT32) + (b >> _SHIFT32) + (low >> _SHIFT32)
        return ((high & _LOW32) << _SHIFT32) | (low & _LOW32), high >> _SHIFT32

    @jit
    def significand_exponent(v):  # type: ignore[no-untyped-def]
        bits = f64_as_i64(v)
        significand = (bits & _SIGNIFICAND) | _HIDDEN
        return np.uint64(significand), (bits >> np.int64(52)) - _EXPONENT_BIAS

    @jit
    def midpoint_integer(lower, upper):  # type: ignore[no-untyped-def]
        # (M, e): the midpoint of adjacent lower < upper is M 2^(e - 1), M odd
        # and below 2^55. Both on the finer grid: across a binade edge the
        # upper one has twice the spacing.
        low_int, low_exp = significand_exponent(lower)
        up_int, up_exp = significand_exponent(upper)
        exponent = min(low_exp, up_exp)
        low_int = low_int << np.uint64(low_exp - exponent)
        up_int = up_int << np.uint64(up_exp - exponent)
        return low_int + up_int, exponent

    @jit
    def times_two_limbs(a, s1, s0):  # type: ignore[no-untyped-def]
        # a (below 2^64) times (s1, s0) on three limbs (c2, c1, c0); the
        # caller keeps the product below 2^192.
        q1, q0 = mul_wide(s0, a)
        r1, r0 = mul_wide(s1, a)
        c1, carry = add_carry(q1, r0)
        return r1 + carry, c1, q0

    @jit
    def shifted_above(v, shift, c2, c1):  # type: ignore[no-untyped-def]
        # Whether the significand v << shift (64 <= shift < 128: limbs 1 and
        # 2, limb 0 zero) exceeds (c2, c1, c0), for a c0 that is not zero
        # or a tie that cannot happen: top limb first.
        up_shift = shift - np.uint64(64)
        keep = (np.uint64(1) << (np.uint64(64) - up_shift)) - np.uint64(1)
        v1 = (v & keep) << up_shift
        v2 = v >> (np.uint64(64) - up_shift)
        return (v2 > c2) | ((v2 == c2) & (v1 > c1))

    @jit
    def above_midpoint_cubed(x, lower, upper):  # type: ignore[no-untyped-def]
        m, exponent = midpoint_integer(lower, upper)
        # m^3 on three limbs: m^2 = (s1, s0) < 2^110, times m; limb 0 of m^3
        # is odd, so a tie on limbs 2 and 1 leaves x below m^3.
        s1, s0 = mul_wide(m, m)
        c2, c1, _ = times_two_limbs(m, s1, s0)
        # x = X 2^k against m^3 = M^3 2^(3 exponent - 3).
        x_int, x_exp = significand_exponent(x)
        return shifted_above(x_int, np.uint64(x_exp - 3 * exponent + 3), c2, c1)

    @jit
    def above_midpoint_times_square(g, lower, upper, y):  # type: ignore[no-untyped-def]
        # Whether g > 3 m y^2 exactly, m the midpoint of lower and upper (for
        # the float64 gradient g / (3 y^2)). With m = M 2^(e - 1) as above and
        # y = Y 2^k: 3 m y^2 = (3 M) Y^2 2^(e - 1 + 2k), on three limbs: 3M
        # is below 2^57, Y^2 below 2^106, their product below 2^163. No ties:
        # the odd part of 3 M Y^2 is at least 3M > 2^54, more bits than g has.
        # The caller keeps 3 m y^2 within a factor 2 of g, so the shift of g's
        # significand is between 104 and 112 (the limbs take 64 to 127).
        m, exponent = midpoint_integer(lower, upper)
        y_int, y_exp = significand_exponent(y)
        s1, s0 = mul_wide(y_int, y_int)
        c2, c1, _ = times_two_limbs(m * np.uint64(3), s1, s0)
        g_int, g_exp = significand_exponent(g)
        shift = np.uint64(g_exp - (exponent - np.int64(1) + np.int64(2) * y_exp))
        return shifted_above(g_int, shift, c2, c1)

    return SimpleNamespace(
        above_midpoint_cubed=above_midpoint_cubed,
        above_midpoint_times_square=above_midpoint_times_square,
    )
