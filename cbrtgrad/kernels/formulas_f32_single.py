"""The float32 cube root in float32 arithmetic only: the form for GPUs without float64.

Part of the one formula source (:mod:`cbrtgrad.kernels.formulas` gathers it
beside :mod:`cbrtgrad.kernels.formulas_f32`). ``cube_root_f32_single`` gives
``cube_root_f32``'s bits for every one of the 2^32 inputs (checked by
``tests/test_metal_source.py``, exhaustively under ``-m slow``) using only
float32 multiplies and ``fma``, 32- and 64-bit unsigned integer operations,
comparisons and selects: no float64, no division, no float comparison. Apple
GPUs (Metal) have no float64, and :mod:`cbrtgrad.kernels.metal_source`
translates these functions, not a copy of them, into a Metal kernel body.

The argument for correct rounding, for a finite nonzero ``x``:

1. Reduction, in integers: ``|x| = 2^(3k) w`` with ``w`` in [1, 8), exactly.
   A subnormal's bit pattern is its significand as an integer; converting it
   to float32 (exact below 2^24) normalises it with no float arithmetic on a
   subnormal, so a GPU that flushes subnormals changes nothing. Then
   ``cbrt(x) = 2^k cbrt(w)`` with ``c = cbrt(w)`` in [1, 2), and the result is
   never subnormal (2^-49.7 at least), so rounding ``c`` correctly and adding
   ``k`` to its exponent field rounds ``cbrt(|x|)`` correctly.
2. Approximation, in float32 (``cube_root_f32_single_near``): the bit trick
   and two Newton steps give ``r ~ w^(-1/3)`` (relative error about 3e-5),
   ``y = w r^2``, and one Newton step on ``y`` with the residual ``w - y^3``
   from ``fma`` (``y^2`` split exactly as ``y2 + y2e``) gives the float32
   ``y`` within 0.516 ulp of ``c`` (the tests measure it over all 3 * 2^23
   values of ``w``): the step's error is second order (about 0.01 ulp) and
   its last ``fma`` rounds once. Step 3 needs less than one ulp, a margin
   for another rounding of a product (another order, a contraction): even
   with ``y2e`` folded to 0, which fast math could do, ``y`` stayed within
   0.746 ulp (measured once on a copy). Correct rounding is checked, and
   claimed, for the steps as written.
3. Decision, exact, in integers: with ``y`` clamped to [1, 2] (which only
   brings it nearer to ``c``), the correctly rounded ``c`` is ``y`` or one of
   its neighbours, since ``|y - c|`` is below the spacing on either side (at
   ``y = 1`` the finer spacing below does not matter: ``c >= 1``). Which one
   is decided by the signs of ``w - m^3`` at the two midpoints ``m`` around
   ``y``. In units of 2^-25, ``m = M`` with ``M < 2^26`` an integer, and
   ``w = W 2^-23`` with ``W < 2^26``, so ``w > m^3`` iff ``W 2^52 > M^3``.
   Both sides exceed 2^64, but their difference is at most 2^-18 (from
   ``|m - c| <= 2^-22``) times 2^75, far below 2^63, so the difference
   computed modulo 2^64 in unsigned 64-bit integers, read as signed, is
   exact: its sign bit is the answer. It is never zero (no cube root of a
   float32 is a midpoint).

Zeros, infinities and nans return ``x`` itself (a nan quieted, its sign and
payload kept), as ``cube_root_f32``: selected on the bit pattern at the end.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

_SIGN = np.uint32(0x80000000)
_SIGNIFICAND = np.uint32(0x007FFFFF)
_HIDDEN = np.uint32(0x00800000)
_QUIET = np.uint32(0x00400000)
_INF = np.uint32(0x7F800000)
# |x|'s bits minus one are at least this for exactly a zero, inf or nan.
_SPECIAL_FROM = np.uint32(0x7F7FFFFF)
_NO_BITS = np.uint32(0)
_ONE = np.uint32(1)
_TWO = np.uint32(2)
_THREE = np.uint32(3)
_FOUR = np.uint32(4)
_FIELD_SHIFT = np.uint32(23)
# A normal's exponent field plus this, or a subnormal's significand converted
# to float32 and that float's field, is E + 276 for |x| = 1.f 2^E: positive,
# and a multiple of 3 (92) away from E.
_NORMAL_FIELD_OFFSET = np.uint32(149)
_REDUCED_BIAS = np.uint32(127)
_FIELD_REBASE = np.uint32(92 << 23)
_ONE_BITS = np.uint32(0x3F800000)
_TWO_BITS = np.uint32(0x40000000)
# A float32 y in [1, 2] in units of 2^-24 is its significand shifted left by
# its exponent field less this.
_UNIT_FIELD = np.uint32(126)
_CUBE_SHIFT = np.uint64(52)
_SIGN_SHIFT = np.uint64(63)
_NO_BITS64 = np.uint64(0)
# The float32 inverse cube root bit trick's constant (kernels/formulas_f32.py).
_INV_CBRT_MAGIC = np.uint32(0x54A21E2E)
_THIRD = np.float32(1.0 / 3.0)
_MINUS_THIRD = np.float32(-1.0 / 3.0)
_FOUR_THIRDS = np.float32(4.0 / 3.0)


def make_formulas_f32_single(
    prims: Any, jit: Callable[[Callable[..., Any]], Any]
) -> dict[str, Any]:
    """Compile the float32-only cube root against one target's primitives.

    Parameters
    ----------
    prims, jit
        As for :func:`cbrtgrad.kernels.formulas.make_formulas`; only ``mul32``,
        ``fma32``, ``f32_as_i32`` and ``i32_as_f32`` are used.

    Returns
    -------
    dict
        ``cube_root_f32_single`` and its step 2, ``cube_root_f32_single_near``
        (``w -> y`` for ``w`` in [1, 8)), by name.

    Examples
    --------
    >>> import numba
    >>> import numpy as np
    >>> from cbrtgrad.kernels.primitives import CPU_PRIMITIVES
    >>> f = make_formulas_f32_single(CPU_PRIMITIVES, numba.njit)
    >>> float(f["cube_root_f32_single"](np.float32(-27.0)))
    -3.0
    """
    mul32 = prims.mul32
    fma32 = prims.fma32
    f32_as_i32 = prims.f32_as_i32
    i32_as_f32 = prims.i32_as_f32

    # NOTE: these functions are also translated to Metal (kernels/metal_source.py),
    # so they keep to a subset that means the same in numba and in C: one
    # assignment or return per statement, operands of one type, each type
    # made explicit by a cast. numba computes uint32 operations in 64 bits,
    # C in 32: every uint32 value here stays below 2^32 or is cut by
    # np.uint32 at once, so both give the same bits.
    @jit
    def cube_root_f32_single_near(w):  # type: ignore[no-untyped-def]
        # Step 2: a float32 within 0.516 ulp of w^(1/3) for a float32 w in
        # [1, 8), in float32 (tests/test_metal_source.py measures it over
        # every such w).
        w_bits = np.uint32(f32_as_i32(w))
        r = i32_as_f32(np.int32(np.uint32(_INV_CBRT_MAGIC - w_bits // _THREE)))
        r = mul32(r, fma32(mul32(mul32(w, r), mul32(r, r)), _MINUS_THIRD, _FOUR_THIRDS))
        r = mul32(r, fma32(mul32(mul32(w, r), mul32(r, r)), _MINUS_THIRD, _FOUR_THIRDS))
        y = mul32(mul32(w, r), r)
        y2 = mul32(y, y)
        y2e = fma32(y, y, -y2)
        residual = fma32(-y, y2e, fma32(-y, y2, w))
        return fma32(residual, mul32(mul32(r, r), _THIRD), y)

    @jit
    def cube_root_f32_single(x):  # type: ignore[no-untyped-def]
        ix = np.uint32(f32_as_i32(x))
        sign = np.uint32(ix & _SIGN)
        iax = np.uint32(ix ^ sign)
        # Step 1: |x| = 2^(3k) w, with w in [1, 8) given by its bits.
        subnormal = iax < _HIDDEN
        converted = np.uint32(f32_as_i32(np.float32(iax)))
        bits = converted if subnormal else iax
        offset = _NO_BITS if subnormal else _NORMAL_FIELD_OFFSET
        field = np.uint32((bits >> _FIELD_SHIFT) + offset)
        third = np.uint32(field // _THREE)
        rest = np.uint32(field - third * _THREE)
        w_bits = np.uint32(((rest + _REDUCED_BIAS) << _FIELD_SHIFT) | (bits & _SIGNIFICAND))
        w = i32_as_f32(np.int32(w_bits))
        # Step 2: y within 0.516 ulp of c = w^(1/3), in float32.
        y = cube_root_f32_single_near(w)
        # Step 3: y, its predecessor or its successor, by the exact signs of
        # w - m^3 at the two midpoints, in 64-bit integers.
        yb = np.uint32(f32_as_i32(y))
        yb = _ONE_BITS if yb < _ONE_BITS else yb
        yb = _TWO_BITS if yb > _TWO_BITS else yb
        units = np.uint32(((yb & _SIGNIFICAND) | _HIDDEN) << ((yb >> _FIELD_SHIFT) - _UNIT_FIELD))
        # The spacing below 1 and above 2 differs from that inside [1, 2).
        down = _ONE if yb == _ONE_BITS else _TWO
        up = _FOUR if yb == _TWO_BITS else _TWO
        low = np.uint64(np.uint32(units + units - down))
        high = np.uint64(np.uint32(units + units + up))
        scaled = np.uint64(np.uint64((bits & _SIGNIFICAND) | _HIDDEN) << np.uint64(rest))
        target = np.uint64(scaled << _CUBE_SHIFT)
        # NOTE: the cubes wrap modulo 2^64 on purpose (the proof's step 3):
        # silently in numba and C, with an overflow warning where numpy
        # scalars run this (the CUDA simulator).
        below = np.uint64(np.uint64(low * low * low - target) >> _SIGN_SHIFT) == _NO_BITS64
        above = np.uint64(np.uint64(high * high * high - target) >> _SIGN_SHIFT) != _NO_BITS64
        nearest = np.uint32(yb - _ONE) if below else (np.uint32(yb + _ONE) if above else yb)
        root = np.uint32(nearest + (third << _FIELD_SHIFT) - _FIELD_REBASE)
        # Zeros, infinities and nans: x itself, a nan quieted.
        special = np.uint32(iax - _ONE) >= _SPECIAL_FROM
        quiet = _QUIET if iax > _INF else _NO_BITS
        result = np.uint32(ix | quiet) if special else np.uint32(root | sign)
        return i32_as_f32(np.int32(result))

    return {
        "cube_root_f32_single": cube_root_f32_single,
        "cube_root_f32_single_near": cube_root_f32_single_near,
    }
