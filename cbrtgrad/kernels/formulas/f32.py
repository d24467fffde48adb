"""The float32 scalar formulas: the cube root and its gradient, correctly rounded.

Part of the one formula source (:mod:`cbrtgrad.kernels.formulas.scalar` gathers this
module and :mod:`cbrtgrad.kernels.formulas.f64`); branch-free, as the module
docstring there says why, but for ``cube_root_f32_branching``, the CUDA
kernels' form of the same root (the same bits, checked on all 2^32 inputs by
``cbrtgrad verify --exhaustive``): a GPU branches cheaply and converts
between types slowly, so its common path (a finite normal x) converts nothing
and its specials take a branch.

The cube root, correctly rounded for every input (checked exhaustively, all 2^32):

1. ``r ~ |x|^(-1/3)`` in float32 arithmetic: the float32 bit trick and one
   Newton step (with a float32 fma), so that ``e = x r^3 - 1`` lies in
   [-0.0069938, 4.88e-7] (measured over every float32). float32 lanes are half
   the width of float64 ones, and a few ulp of float32 rounding here do not
   matter: step 2 measures ``e`` in float64.
2. In float64, ``y0 = x r^2``, ``u = y0 r = 1 + e`` and ``y1 = y0 P(u)``
   with ``P`` the minimax quadratic of ``u^(-2/3)`` on that range (two fmas):
   ``y1 = x^(1/3)`` within 2^-27.4, where step 3 needs 2^-25.
3. ``t`` is ``y1`` cut to float32 precision (a mask on its float64 bits), and
   the correct result is ``t`` or its successor ``t + ulp``: the true root is
   within 2^-27.4 of ``y1``, so whenever it lies outside ``[t, t + ulp]`` it
   is still nearer to the one of the two on its side (docs/mathematics.md).
   Which one is decided exactly by the midpoint ``m = t + ulp/2`` (``t``'s
   bits or 2^28): ``m`` has 25 significant bits, so ``m*m`` is exact in
   float64 and ``fma(-m*m, m, x)`` is ``x - m^3`` rounded once, whose sign is
   exact. No float32 cube root is a
   midpoint (``m^3`` needs 73 or more bits), so there are no ties. NOTE: the
   sign comes from one fma, not ``(x - hi) - lo``: a compiler that contracts
   ``x - hi`` (NVVM does by default) would break the two-step form.

The gradient ``g / (3 y^2)`` from the saved output ``y``: correctly rounded
for that ``y`` whenever the result is a normal float32 (the float64 quotient,
where ``3 y^2`` is exact, locates it, and the same exact midpoint test as the
forward decides; below 2^-126 the float64 quotient is rounded once more, see
the kernel).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .f64 import MAGNITUDE_MASK64

# float32 bit patterns
_SIGN32 = np.int32(-0x80000000)
_INF32 = np.int32(0x7F800000)
_MIN_NORMAL32 = np.int32(0x00800000)
_ABS32 = np.int32(0x7FFFFFFF)
_QUIET32 = np.int32(1 << 22)
# x86's default nan (sign set, quiet, no payload), as _DEFAULT_NAN64.
_DEFAULT_NAN32 = np.int32(-0x00400000)
# Magic constant of the float32 inverse cube root bit trick, chosen (over all
# significands of three binades) for the smallest |x r^3 - 1| after the one
# Newton step that follows it: 0.0070.
_INV_CBRT_MAGIC32 = np.int32(0x54A21E2E)
_THIRD32 = np.float32(1.0 / 3.0)
_MINUS_THIRD32 = np.float32(-1.0 / 3.0)
_FOUR_THIRDS32 = np.float32(4.0 / 3.0)
# A float32 subnormal's significand (its bit pattern, < 2^23) times 2^-101 is
# 2^48 times its value, a normal float32; its cube root is 2^16 times larger,
# which 16 subtracted from the root's exponent field undoes exactly (the cube
# root of a subnormal, at least 2^-49.7, is a normal float32).
_SUBNORMAL_UP32 = np.float32(2.0**-101)
_SUBNORMAL_ROOT_DOWN32 = np.int64(16 << 23)
# The roots the arithmetic gives for the two patterns zero, inf and nan are
# clamped to (2^-149 and the largest float32, whose xs are 2^-101 and
# (2 - 2^-23) 2^127): their correctly rounded cube roots, 0x1.428a30p-34 and
# 0x1.965feap+42, as bit patterns (tests/test_special_values.py checks them
# against mpmath and against the kernels).
_ROOT_OF_CLAMPED_ZERO32 = np.int64(0x2EA14518)
_ROOT_OF_CLAMPED_INF32 = np.int64(0x54CB2FF5)
# One float32 ulp and half of one, in units of the float64 bit pattern
# (52 - 23 bits below it), and the mask that cuts a float64 to float32 precision.
_ULP32_AS_I64 = np.int64(1 << 29)
_HALF_ULP32_AS_I64 = np.int64(1 << 28)
_FLOAT32_PRECISION_MASK = np.int64(~((1 << 29) - 1))
_BELOW_FLOAT32_PRECISION = np.int64((1 << 29) - 1)
# A positive normal float32's bits (p) to its float64's: p << 29 plus this
# (the exponent bias 1023 - 127, in the float64 exponent field), and back:
# p's bits minus it shifted right by 29 (exact for every normal float32 value).
_REBIAS_F32_TO_F64 = np.int64((1023 - 127) << 52)
_REBIAS_F64_TO_F32 = np.int64((1023 - 127) << 23)
# |x|'s bits are a finite normal float32 exactly when this much above 2^-126's
# bits is below this span (one unsigned comparison).
_NORMAL_SPAN32 = np.uint32(0x7F800000 - 0x00800000)
# The gradient's float32 results below 2^-126 (as float64 bits) are subnormal;
# from 2^128 on they overflow.
_MIN_NORMAL32_AS_F64 = np.int64(0x3810000000000000)
_OVERFLOW32_AS_F64 = np.int64(0x47F0000000000000)
# P(u) = P0 + P1 u + P2 u^2, the minimax quadratic of u^(-2/3) in relative
# error on u = 1 + e, -0.00705 <= e <= 6e-7 (the range of xs r^3 - 1 after the
# float32 Newton step, over every float32, is [-0.0069938, 4.88e-7]): its error
# is at most 2^-27.44 there, and step 3 needs only 2^-25 (docs/mathematics.md).
# Fitted by tools/fit_cbrt_f32_series.py (which rechecks that error with mpmath).
_P0 = 2.227469062053254
_P1 = -1.7882853863052686
_P2 = 0.5608163297178594


def make_formulas_f32(prims: Any, jit: Callable[[Callable[..., Any]], Any]) -> dict[str, Any]:
    """Compile the float32 formulas against one target's primitives.

    Parameters
    ----------
    prims, jit
        As for :func:`cbrtgrad.kernels.formulas.scalar.make_formulas`.

    Returns
    -------
    dict
        The compiled scalar functions by name, the fields of
        :class:`cbrtgrad.kernels.formulas.scalar.Formulas` with ``f32`` in their
        names.

    Examples
    --------
    >>> import numba
    >>> import numpy as np
    >>> from cbrtgrad.kernels.formulas.primitives import CPU_PRIMITIVES
    >>> f = make_formulas_f32(CPU_PRIMITIVES, numba.njit)
    >>> float(f["cube_root_f32"](np.float32(-27.0)))
    -3.0
    """
    fma = prims.fma
    fma32 = prims.fma32
    mul = prims.mul
    mul32 = prims.mul32
    f64_as_i64 = prims.f64_as_i64
    i64_as_f64 = prims.i64_as_f64
    f32_as_i32 = prims.f32_as_i32
    i32_as_f32 = prims.i32_as_f32

    @jit
    def inverse_cbrt_f32(xs):  # type: ignore[no-untyped-def]
        # Step 1 of the float32 forward, in float32: r ~ xs^(-1/3) for a
        # normal positive float32 xs, by the bit trick and one Newton step
        # r (4 - xs r^3) / 3 (xs r^3 as (xs r) r^2, never subnormal), with
        # -0.0069938 <= xs r^3 - 1 <= 4.88e-7 for every such xs
        # (tools/fit_cbrt_f32_series.py measures it).
        guess = _INV_CBRT_MAGIC32 - np.int32(mul32(np.float32(f32_as_i32(xs)), _THIRD32))
        r = i32_as_f32(np.int32(guess))
        return mul32(r, fma32(mul32(mul32(xs, r), mul32(r, r)), _MINUS_THIRD32, _FOUR_THIRDS32))

    @jit
    def cube_root_f32(x):  # type: ignore[no-untyped-def]
        ix = np.int32(f32_as_i32(x))
        sign = np.int32(ix & _SIGN32)
        iax = np.int32(ix ^ sign)
        # The arithmetic runs on |x| clamped to the finite nonzero patterns
        # (two integer min/max, no flag, no subnormal result): a zero as the
        # least subnormal, an infinity or nan as the largest float. Those
        # lanes (where the clamp changed the pattern) return x itself at the
        # end.
        normal = min(max(iax, np.int32(1)), np.int32(_INF32 - np.int32(1)))
        # NOTE: no arithmetic may see a subnormal operand (a microcode assist
        # of about 100 cycles on x86): a subnormal's significand, its bit
        # pattern, is converted as an integer and scaled into the normal range,
        # xs = 2^48 |x|, and its root, 2^16 times too large, is scaled back by
        # an integer subtraction from the float32 result's exponent field.
        subnormal = normal < _MIN_NORMAL32
        xs = mul32(np.float32(normal), _SUBNORMAL_UP32) if subnormal else i32_as_f32(normal)
        # The last step of every lane is one integer added to the bits of the
        # root of xs, chosen here. For finite nonzero x it is the sign and the
        # subnormal rescaling. For a clamped lane the root of xs is a known
        # constant (of 2^-101 for a zero, of the largest float for inf and
        # nan), and the integer turns that constant into x itself, a
        # signaling nan quieted (IEEE 754), its payload kept.
        # NOTE: only this integer stays live through the arithmetic, instead
        # of x, |x|, the clamped pattern and the rescaling: fewer spills, and
        # room for a third vector iteration in flight on AVX2 (measured,
        # docs/kernels.md). The sums are in int64 and cut to int32 as the
        # hardware's wrapping add (numpy's int32 scalars, in the CUDA
        # simulator, would warn of the overflow).
        quiet = _QUIET32 if iax > _INF32 else np.int32(0)
        ordinary = np.int64(sign) - (_SUBNORMAL_ROOT_DOWN32 if subnormal else np.int64(0))
        clamped = np.int64(ix | quiet) - (
            _ROOT_OF_CLAMPED_ZERO32 if subnormal else _ROOT_OF_CLAMPED_INF32
        )
        adjust = ordinary if normal == iax else clamped
        # Step 1, float32: r ~ xs^(-1/3), within 0.0070 (relative, as xs r^3).
        r = inverse_cbrt_f32(xs)
        # Step 2, float64 (every float32 is a normal float64): y1 = y0 P(u)
        # with u = xs r^3 = 1 + e, P the minimax quadratic of u^(-2/3).
        ax = np.float64(xs)
        rd = np.float64(r)
        y0 = mul(ax, mul(rd, rd))
        u = mul(y0, rd)
        y1 = mul(y0, fma(u, fma(u, _P2, _P1), _P0))
        # Step 3: t or t + ulp, by the sign of x - m^3 (its sign bit: a
        # select on it is one blend, a comparison with 0.0 three operations).
        t = f64_as_i64(y1) & _FLOAT32_PRECISION_MASK
        m = i64_as_f64(t | _HALF_ULP32_AS_I64)
        above = f64_as_i64(fma(-mul(m, m), m, ax)) >= np.int64(0)
        t = t + _ULP32_AS_I64 if above else t
        iy = np.int32(f32_as_i32(np.float32(i64_as_f64(t))))
        return i32_as_f32(np.int32(np.int64(iy) + adjust))

    @jit
    def round_quotient_f32(q, big, g):  # type: ignore[no-untyped-def]
        # The float32 nearest to g / big, given q within 2^-50 of it (relative)
        # and big = 3 y^2 exact: t = |q| cut to float32 precision, and the sign
        # of |g| - m big at the midpoint m decides between t and t + ulp,
        # exactly, as in the forward (no ties: m big has 26 or more
        # significant bits, g 24). NOTE: special operands need no select:
        # q = ±inf or nan makes m a quiet nan (no flag, the comparison is
        # false, t stays inf or nan), and q = ±0 gives a negative difference.
        t = (f64_as_i64(q) & MAGNITUDE_MASK64) & _FLOAT32_PRECISION_MASK
        m = i64_as_f64(t | _HALF_ULP32_AS_I64)
        t = t + _ULP32_AS_I64 if fma(-m, big, abs(np.float64(g))) > 0.0 else t
        # The sign is g's (3 y^2 > 0 or nan).
        magnitude = np.float32(i64_as_f64(t))
        return i32_as_f32(np.int32(f32_as_i32(magnitude) | (f32_as_i32(g) & _SIGN32)))

    @jit
    def grad_nan_f32(g, y):  # type: ignore[no-untyped-def]
        # The gradient's nan, bit for bit the same on every CPU and GPU, as
        # grad_nan_f64: g's nan if g is one, else y's, quieted, else x86's
        # default nan (numpy's float32 g / (3*y*y) on x86). NOTE: by the bits:
        # the float64 quotient's nan narrowed would keep the CPU's payload and
        # lose it on a GPU (its conversion gives the canonical nan).
        source = g if g != g else (y if y != y else i32_as_f32(_DEFAULT_NAN32))
        return i32_as_f32(np.int32(f32_as_i32(source) | _QUIET32))

    @jit
    def cube_root_grad_f32(g, y):  # type: ignore[no-untyped-def]
        # NOTE: float64(g) / (3 y^2) rounded to float32 is a double rounding:
        # about one (g, y) pair in 4e8 lands within a float64 half-ulp of a
        # float32 midpoint and is rounded the wrong way (0.5000000002 ulp).
        # The quotient q64 (error 2^-53) only locates the answer, which
        # round_quotient_f32 decides exactly.
        yd = np.float64(y)
        big = mul(3.0, mul(yd, yd))  # exact: 3 times a 48-bit square
        q64 = np.float64(g) / big
        # Below 2^-126 the result is a float32 subnormal, on a coarser grid
        # than the test's: there q64 is rounded directly (exact ties, which
        # exist there, go to even; a quotient within 2^-53 of a grid midpoint
        # but not on it could be rounded the wrong way).
        tiny = (f64_as_i64(q64) & MAGNITUDE_MASK64) < _MIN_NORMAL32_AS_F64
        rounded = round_quotient_f32(q64, big, g)
        result = np.float32(q64) if tiny else rounded
        return result if q64 == q64 else grad_nan_f32(g, y)

    @jit
    def cube_root_grad_f32_fast(g, y):  # type: ignore[no-untyped-def]
        # The branch-free first pass of the CPU loops: the float64 quotient
        # q64 (3 y^2 exact, one rounding) rounded to float32 once more, and
        # whether that may differ from cube_root_grad_f32. Rounding is
        # monotone, so q64 and the exact quotient lie on the same side of
        # every float32 midpoint unless q64 is that midpoint itself (its 29
        # bits below float32 precision are 1 followed by zeros); the exact
        # quotient is never a midpoint (see round_quotient_f32). So the one
        # rounding is the correctly rounded result except there: those lanes
        # are hard (about one in 2^28) and the caller runs cube_root_grad_f32
        # on them. Everywhere else this is that kernel's result bit for bit:
        # it rounds q64 once too below 2^-126 and on overflow. Not its nans,
        # which are the hardware's here: the block loop (kernels/cpu/blocks.py)
        # replaces them by grad_nan_f32's, out of this vector loop.
        yd = np.float64(y)
        q64 = np.float64(g) / mul(3.0, mul(yd, yd))
        midpoint = (f64_as_i64(q64) & _BELOW_FLOAT32_PRECISION) == _HALF_ULP32_AS_I64
        magnitude = f32_as_i32(np.float32(q64)) & _ABS32
        result = i32_as_f32(np.int32(magnitude | (f32_as_i32(g) & _SIGN32)))
        return result, midpoint

    # The bit operations of the branching forms, for finite normal float32
    # values only (every conversion there is then exact).
    @jit
    def normal32(abs_bits):  # type: ignore[no-untyped-def]
        # Whether a float32's magnitude bits (an int64) are a finite normal's.
        return np.uint32(abs_bits - _MIN_NORMAL32) < _NORMAL_SPAN32

    @jit
    def widened32(abs_bits):  # type: ignore[no-untyped-def]
        # The float64 of the positive normal float32 whose bits are abs_bits.
        return i64_as_f64((abs_bits << np.int64(29)) + _REBIAS_F32_TO_F64)

    @jit
    def midpoint32(bits):  # type: ignore[no-untyped-def]
        # The float32 midpoint above float64 bits cut to float32 precision.
        return i64_as_f64((bits & _FLOAT32_PRECISION_MASK) | _HALF_ULP32_AS_I64)

    @jit
    def narrowed32(bits, up):  # type: ignore[no-untyped-def]
        # The float32 bits of float64 bits cut to float32 precision (a normal
        # float32's value), plus up ulps.
        return (bits >> np.int64(29)) - _REBIAS_F64_TO_F32 + up

    @jit
    def inverse_cbrt_f32_integer_third(iax):  # type: ignore[no-untyped-def]
        # inverse_cbrt_f32 of the positive normal float32 whose bits are iax
        # (an int64), the bit trick's third an exact integer division (a
        # multiply-high, where inverse_cbrt_f32 converts to float and back):
        # -0.0069927 <= xs r^3 - 1 <= 4.8e-7 over every such xs, inside the
        # range P is fitted on (tools/fit_cbrt_f32_series.py range --integer-third).
        guess = _INV_CBRT_MAGIC32 - np.int64(np.uint32(iax) // np.uint32(3))
        xs = i32_as_f32(np.int32(iax))
        r = i32_as_f32(np.int32(guess))
        return mul32(r, fma32(mul32(mul32(xs, r), mul32(r, r)), _MINUS_THIRD32, _FOUR_THIRDS32))

    @jit
    def cube_root_f32_normal(iax):  # type: ignore[no-untyped-def]
        # The bits of cube_root_f32 of the positive normal float32 whose bits
        # are iax (an int64), with no conversion between types: a GPU (compute
        # capability 9.0) converts at 16 results per clock and multiprocessor,
        # an eighth of its float32 rate, and cube_root_f32 converts six times
        # per element (docs/kernels.md, "The CUDA kernels").
        r = inverse_cbrt_f32_integer_third(iax)
        # Step 2, float64, xs and r (both normal) widened by their bits.
        ax = widened32(iax)
        rd = widened32(np.int64(f32_as_i32(r)))
        y0 = mul(ax, mul(rd, rd))
        u = mul(y0, rd)
        y1 = mul(y0, fma(u, fma(u, _P2, _P1), _P0))
        # Step 3 as in cube_root_f32, narrowed by the bits too: the root
        # (2^-42 to 2^43) is a normal float32, so its bits are y1's above the
        # 29 cut off, rebiased, plus one ulp when xs lies above the midpoint.
        bits = f64_as_i64(y1)
        m = midpoint32(bits)
        above = f64_as_i64(fma(-mul(m, m), m, ax)) >= np.int64(0)
        return narrowed32(bits, np.int64(1) if above else np.int64(0))

    @jit
    def cube_root_f32_branching(x):  # type: ignore[no-untyped-def]
        # cube_root_f32's bits where a branch is cheap and conversions are
        # not (the CUDA kernels): a finite normal x by cube_root_f32_normal,
        # with no select for the specials; zeros, subnormals, infs and nans
        # (a rare branch) by cube_root_f32 itself.
        ix = np.int64(f32_as_i32(x))
        iax = ix & _ABS32
        if not normal32(iax):
            return cube_root_f32(x)
        sign = np.int64(np.int32(ix) & _SIGN32)  # -2^31 or 0: the sum stays an int32
        return i32_as_f32(np.int32(cube_root_f32_normal(iax) + sign))

    @jit
    def cube_root_grad_f32_branching(g, y):  # type: ignore[no-untyped-def]
        # cube_root_grad_f32's bits where a branch is cheap and conversions
        # are not (the CUDA kernels, as cube_root_f32_branching): for normal g
        # and y and a normal result, the same quotient and midpoint test with
        # g and y widened and the result narrowed by their bits; the rest (a
        # zero, subnormal, inf or nan operand, a subnormal or overflowing
        # quotient) by cube_root_grad_f32 itself.
        ig = np.int64(f32_as_i32(g))
        iag = ig & _ABS32
        iay = np.int64(f32_as_i32(y)) & _ABS32
        if normal32(iag) and normal32(iay):
            ag = widened32(iag)
            ay = widened32(iay)
            big = mul(3.0, mul(ay, ay))  # exact, as in cube_root_grad_f32
            bits = f64_as_i64(ag / big)
            if bits >= _MIN_NORMAL32_AS_F64 and bits < _OVERFLOW32_AS_F64:
                # round_quotient_f32's test; one ulp more may reach 2^128,
                # whose bits are inf's, the correctly rounded result there.
                m = midpoint32(bits)
                up = np.int64(1) if fma(-m, big, ag) > 0.0 else np.int64(0)
                magnitude = narrowed32(bits, up)
                sign = np.int64(np.int32(ig) & _SIGN32)  # g's: 3 y^2 > 0
                return i32_as_f32(np.int32(magnitude + sign))
        return cube_root_grad_f32(g, y)

    return {
        "inverse_cbrt_f32": inverse_cbrt_f32,
        "cube_root_f32": cube_root_f32,
        "inverse_cbrt_f32_integer_third": inverse_cbrt_f32_integer_third,
        "cube_root_f32_normal": cube_root_f32_normal,
        "cube_root_f32_branching": cube_root_f32_branching,
        "cube_root_grad_f32": cube_root_grad_f32,
        "cube_root_grad_f32_branching": cube_root_grad_f32_branching,
        "cube_root_grad_f32_fast": cube_root_grad_f32_fast,
        "grad_nan_f32": grad_nan_f32,
    }
