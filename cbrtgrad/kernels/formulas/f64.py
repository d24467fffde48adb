"""The float64 scalar formulas: the cube root and its gradient, correctly rounded.

Part of the one formula source (:mod:`cbrtgrad.kernels.formulas.scalar` gathers this
module and :mod:`cbrtgrad.kernels.formulas.f32`); branch-free, as the module
docstring there says why.

The cube root, correctly rounded for every input (the proof is in
docs/mathematics.md, "Correct rounding in float64"):

1. ``r ~ |x|^(-1/3)`` from an exponent bit trick (``K - bits/3`` on the high
   32 bits of the pattern, about 3.5 % relative error), then
   ``r = r0 (1 + e Q(e))`` with ``e = x r0^3 - 1`` and ``1 + e Q(e)`` the
   minimax polynomial of degree 6 of ``(1 + e)^(-1/3)``: 2^-32.2. The
   products ``x r0`` and ``r0^2`` stay normal up to the largest float64, so
   only tiny inputs need rescaling.
2. ``y0 = x r^2`` and the residual ``x - y0^3`` computed almost exactly: with
   ``a + b = y0*y0`` exactly (one ``fma``), ``x - y0*a`` is exact before its one
   rounding and ``y0*b`` is folded in by one more ``fma`` (error 2^-80.8 x).
3. A correction of Halley's order, ``c = t + 2 t^2 r`` with
   ``t = residual r^2 / 3``: ``y0 + c`` is within 2^-79.8 of the root, through
   the exact relation ``r^2 = y0 / x`` (up to one rounding), whatever r's error.
4. The rounding test: ``y0 + (c + tol)`` and ``y0 + (c - tol)`` rounded, with
   ``tol = 2^-77 y0``; if they agree, that is the correctly rounded root. If
   not (about one input in 10^7), :func:`cube_root_f64_fast` (or, for a
   block with no zero, inf, nan or tiny input, :func:`cube_root_f64_plain`,
   the same arithmetic without their selects) says the lane is hard, and
   :func:`cube_root_f64_exact` decides between ``y0 + c`` rounded and its
   neighbour by the exact sign of ``x - m^3`` at their midpoint, in integers
   (:mod:`cbrtgrad.kernels.formulas.exact_rounding`).

The gradient ``g / (3 y^2)`` from the saved output ``y``: correctly rounded
wherever ``|g| >= 2^-968`` and the result lies in [2^-968, 2^1020) in
magnitude: ``3 y^2`` as a double-double, one correction of the quotient
(within 2^-100.9), a rounding test, and for the rare lane that fails it the
exact sign of ``|g| - 3 m y^2`` at the midpoint ``m``, in integers
(docs/mathematics.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .exact_rounding import make_exact_rounding

# float64 bit patterns
_SIGN64 = np.int64(-0x8000000000000000)
_INF64 = np.int64(0x7FF0000000000000)
_ONE64 = np.int64(0x3FF0000000000000)
# |x| < 2^-800 is rescaled by 2^300 so that the residual terms (about
# 2^-106 |x|) stay normal; large |x| needs no rescaling (see the Newton step).
# The scalings are integer adds to the exponent field (exact for normal
# operands and results, and one instruction instead of a select and a
# multiply): 300 up for the input, 100 down for its cube root.
_TINY64 = np.int64(0x0DF0000000000000)
_MIN_NORMAL64 = np.int64(0x0010000000000000)
_UP_EXPONENT = np.int64(300 << 52)
_DOWN_EXPONENT = np.int64(100 << 52)
# A subnormal's bit pattern is its significand m, an integer below 2^52. Under
# the exponent of 2^-722 those bits are 2^-722 + m 2^-774, so subtracting
# 2^-722 leaves m 2^-774 = |x| 2^300 exactly (both operands normal), as the
# other tiny inputs are scaled, with no int64 -> float64 conversion (see the
# bit trick's NOTE).
# The mask keeps the other lanes' bits finite (no flag from the subtraction).
_SIGNIFICAND64 = np.int64((1 << 52) - 1)
_SUBNORMAL_EXPONENT = np.int64((1023 - 722) << 52)
_SUBNORMAL_OFFSET = 2.0**-722
_ABS64 = np.int64(0x7FFFFFFFFFFFFFFF)
_QUIET64 = np.int64(1 << 51)
# The nan x86 gives for 0/0 and inf/inf (sign set, quiet, no payload): the
# gradient's nan for those operands on every CPU and GPU (grad_nan_f64).
_DEFAULT_NAN64 = np.int64(-0x0008000000000000)
# The fast path's error bound is 2^-79.8 relative (docs/mathematics.md); the
# test uses 2^-77, with room for the roundings of c +- tolerance: lanes whose
# root may lie that close to a midpoint go to the exact path.
_ROUNDING_TOLERANCE = 2.0**-77
_TOLERANCE_EXPONENT = np.int64(77 << 52)
# Magic constant of the inverse cube root bit trick for float64 (Moroz et al.):
# bits(r0) = K - bits(x) / 3 gives |r0 * x^(1/3) - 1| < 0.035.
# NOTE: the trick runs on the high 32 bits of the pattern (sign, exponent and
# 20 significand bits): AVX2 has no packed int64 <-> float64 conversion (that
# is AVX-512DQ; LLVM turns each one into a scalar conversion per lane), and
# floor(h / 3) is the high word of h * 0x55555556 (the signed-division
# multiplier, exact for every h < 2^31: checked for all of them), one
# 32 x 32 -> 64 bit multiply (vpmuludq) with no shift after it. The magic's
# high 32 bits are Moroz et al.'s; its low 32 bits are zero, so that their
# low word is the product's low word. Together the two move the guess by
# under 2^-19 relative: e = x r0^3 - 1 lies in [-0.09925, 0.10628], so
# |r0 z - 1| < 0.0343, for every positive normal float64
# (tools/fit_cbrt_f64_inverse.py range).
_INV_CBRT_MAGIC64 = np.uint64(0x553EF0FF << 32)
_DIV3_MAGIC = np.uint64(0x55555556)

# The float64 fast path's plain inputs, 2^-800 <= |x| < inf, as the least and
# the first excluded bit pattern of |x|: a block of nothing else takes
# cube_root_f64_plain (kernels/cpu/blocks.py: forward_block_f64).
PLAIN_F64_LOWEST = _TINY64
PLAIN_F64_BEYOND = _INF64
MAGNITUDE_MASK64 = _ABS64

_THIRD = 1.0 / 3.0
# fl(2/3) is exactly 2 fl(1/3) (the same significand), so the plain path's
# t2 = R fl(r^2 fl(2/3)) is exactly twice the t = R fl(r^2 fl(1/3)) of the
# proof (docs/mathematics.md), and its c2 twice c.
_TWO_THIRDS = 2.0 / 3.0
# 1 + e Q(e), the minimax polynomial of (1 + e)^(-1/3) in relative error on
# -0.0993 <= e <= 0.1064, where e = a r0^3 - 1 lies for every positive normal
# float64 ([-0.099245, 0.106279] with the bit trick above): its error is at
# most 2^-32.24 there, and the proof needs 2^-31.5 (docs/mathematics.md).
# NOTE: one polynomial instead of Newton steps: three steps cost 13
# multiplies and fmas per element, this 10, and the AVX-512 loop is bound by
# its multiply pipes (docs/kernels.md, "Measured choices").
# Fitted by tools/fit_cbrt_f64_inverse.py (which rechecks that error with mpmath).
_Q0 = -0.3333333452215546
_Q1 = 0.22222216593348892
_Q2 = -0.17283007088614413
_Q3 = 0.14404979471316054
_Q4 = -0.12665922086428433
_Q5 = 0.11055036078836863


def make_formulas_f64(prims: Any, jit: Callable[[Callable[..., Any]], Any]) -> dict[str, Any]:
    """Compile the float64 formulas against one target's primitives.

    Parameters
    ----------
    prims, jit
        As for :func:`cbrtgrad.kernels.formulas.scalar.make_formulas`.

    Returns
    -------
    dict
        The compiled scalar functions by name, the fields of
        :class:`cbrtgrad.kernels.formulas.scalar.Formulas` that end in ``_f64`` or
        ``_f64_<path>`` but the gradient's
        (:mod:`cbrtgrad.kernels.formulas.f64_grad`).

    Examples
    --------
    >>> import numba
    >>> from cbrtgrad.kernels.formulas.primitives import CPU_PRIMITIVES
    >>> f = make_formulas_f64(CPU_PRIMITIVES, numba.njit)
    >>> float(f["cube_root_f64"](-27.0))
    -3.0
    """
    fma = prims.fma
    exact_rounding = make_exact_rounding(prims, jit)
    above_midpoint_cubed = exact_rounding.above_midpoint_cubed
    mul = prims.mul
    add = prims.add
    sub = prims.sub
    f64_as_i64 = prims.f64_as_i64
    i64_as_f64 = prims.i64_as_f64

    @jit
    def inverse_cbrt_guess_f64(ax):  # type: ignore[no-untyped-def]
        # The bit trick: |ax^(1/3) r0 - 1| <= 0.0343 for normal, positive,
        # finite ax. floor(high / 3) lands in the high 32 bits of the
        # product; its low 32 bits (the multiply's remainder bits) move r0
        # by under 2^-20 (relative) and save the mask that would clear them.
        high = np.uint64(f64_as_i64(ax)) >> np.uint64(32)
        return i64_as_f64(np.int64(_INV_CBRT_MAGIC64 - high * _DIV3_MAGIC))

    @jit
    def inverse_cbrt_f64(ax):  # type: ignore[no-untyped-def]
        # |ax^(1/3) r - 1| <= 2^-32 for normal, positive, finite ax:
        # r = r0 (1 + e)^(-1/3) with e = ax r0^3 - 1, the factor a minimax
        # polynomial 1 + e Q(e) (see the coefficients' NOTE). ax r0 and r0^2
        # stay normal up to the largest float64: no rescaling.
        r = inverse_cbrt_guess_f64(ax)
        e = fma(mul(ax, r), mul(r, r), -1.0)
        q = fma(e, _Q5, _Q4)
        q = fma(e, q, _Q3)
        q = fma(e, q, _Q2)
        q = fma(e, q, _Q1)
        q = fma(e, q, _Q0)
        return fma(mul(r, e), q, r)

    @jit
    def scaled_input_f64(x):  # type: ignore[no-untyped-def]
        # The operand of the arithmetic: |x|, or 1.0 for the specials (±0,
        # ±inf, nan) so that it raises no floating-point flag, scaled by
        # 2^300 below 2^-800 (tiny). Returns (ix, sign, special, tiny, ax).
        ix = f64_as_i64(x)
        sign = ix & _SIGN64
        iax = ix ^ sign
        # iax == 0 or iax >= inf, as one unsigned compare.
        special = np.uint64(iax - np.int64(1)) >= np.uint64(_INF64 - np.int64(1))
        iax = _ONE64 if special else iax
        tiny = iax < _TINY64
        # NOTE: no arithmetic may see a subnormal operand: x86 takes a
        # microcode assist of about 100 cycles for each (see the constants).
        subnormal = iax < _MIN_NORMAL64
        offset_bits = (iax & _SIGNIFICAND64) | _SUBNORMAL_EXPONENT
        from_subnormal = sub(i64_as_f64(offset_bits), _SUBNORMAL_OFFSET)
        scaled = i64_as_f64(iax + (_UP_EXPONENT if tiny else np.int64(0)))
        ax = from_subnormal if subnormal else scaled
        return ix, sign, special, tiny, ax

    @jit
    def cube_root_residual_f64(ax):  # type: ignore[no-untyped-def]
        # (r, r2, y0, residual): y0 = ax r^2 from r within 2^-32 of
        # ax^(-1/3), and the residual ax - y0^3 almost exactly (a + b = y0^2
        # exactly, ax - y0 a exact inside the fma).
        r = inverse_cbrt_f64(ax)
        r2 = mul(r, r)
        y0 = mul(ax, r2)
        a = mul(y0, y0)
        b = fma(y0, y0, -a)
        residual = fma(-y0, b, fma(-y0, a, ax))
        return r, r2, y0, residual

    @jit
    def cube_root_parts_f64(ax):  # type: ignore[no-untyped-def]
        # y0 + c = cbrt(ax) within 2^-79.8 relative (docs/mathematics.md):
        # the Halley-order correction c = t + 2 t^2 r with
        # t = residual r^2 / 3.
        r, r2, y0, residual = cube_root_residual_f64(ax)
        t = mul(residual, mul(r2, _THIRD))
        c = fma(mul(t, add(r, r)), t, t)
        return y0, c

    @jit
    def finish_f64(ix, sign, special, tiny, y):  # type: ignore[no-untyped-def]
        # Undo the scaling, put the sign back; the specials come back as they
        # came, a signaling nan quieted (IEEE 754, as glibc and CORE-MATH do).
        iy = f64_as_i64(y) - (_DOWN_EXPONENT if tiny else np.int64(0))
        iax = ix ^ sign
        quiet = _QUIET64 if iax > _INF64 else np.int64(0)
        iy = (iax | quiet) if special else iy
        return i64_as_f64(iy | sign)

    @jit
    def cube_root_f64_fast(x):  # type: ignore[no-untyped-def]
        # (y, hard): y is the correctly rounded cube root unless hard is
        # nonzero, about one input in 10^7 (the vector loops redo those lanes
        # with cube_root_f64_exact in a second pass). Branch-free.
        ix = f64_as_i64(x)
        sign = ix & _SIGN64
        iax = ix ^ sign
        # iax == 0 or iax >= inf, as one unsigned compare; and with the tiny
        # inputs (below 2^-800, subnormals included), as another.
        special = np.uint64(iax - np.int64(1)) >= np.uint64(_INF64 - np.int64(1))
        unusual = np.uint64(iax - _TINY64) >= np.uint64(_INF64 - _TINY64)
        # NOTE: the specials and the tiny inputs run the arithmetic on 1.0
        # (no flag, no subnormal operand); the tiny ones are sent to the
        # exact path, which scales them: they are rare in data, and their
        # scaling would cost every lane about 7 vector operations here.
        ax = 1.0 if unusual else i64_as_f64(iax)
        y0, c = cube_root_parts_f64(ax)
        # The root lies in [y0 + c - tol y0, y0 + c + tol y0]; if both ends
        # round to the same double, so does the root (rounding is monotonic).
        # c +- tol y0 in one fma each: the product is exact (a power of two
        # times y0), so this is the rounding of c +- tol y0 the proof counts.
        # The tiny lanes get a tolerance of 1.0 (their operand is 1.0), which
        # makes them fail the test: one select rather than a flag of their own.
        tol = 1.0 if unusual ^ special else _ROUNDING_TOLERANCE
        up = add(y0, fma(y0, tol, c))
        down = add(y0, fma(-y0, tol, c))
        # NOTE: hard is the xor of the two patterns (nonzero when they
        # differ), a 64-bit lane like the data: a loop or-ing it up needs no
        # packing of compare masks (measured, docs/kernels.md).
        hard = f64_as_i64(up) ^ f64_as_i64(down)
        # The specials come back as they came, a signaling nan quieted.
        quiet = _QUIET64 if iax > _INF64 else np.int64(0)
        iy = (iax | quiet) if special else f64_as_i64(up)
        return i64_as_f64(iy | sign), hard

    @jit
    def cube_root_f64_plain(x):  # type: ignore[no-untyped-def]
        # cube_root_f64_fast for 2^-800 <= |x| < inf only (the vector loops
        # check a block for other inputs first): the same arithmetic, the
        # same bits, without the selects for the specials and tiny inputs.
        ix = f64_as_i64(x)
        sign = ix & _SIGN64
        r, r2, y0, residual = cube_root_residual_f64(i64_as_f64(ix ^ sign))
        # NOTE: the correction as c2 = 2c exactly (t2 = 2t: see _TWO_THIRDS),
        # which saves the vector add r + r; each c +- tol is then one
        # fma(c2, 0.5, +-tol), which halves c2 exactly inside it: the same
        # bits as cube_root_parts_f64's c, faster on AVX-512 (docs/kernels.md,
        # "Measured choices"). The full fast path keeps c: there tol y0 is a
        # multiply, and the halving would move one more operation onto the
        # multiply pipes.
        t2 = mul(residual, mul(r2, _TWO_THIRDS))
        c2 = fma(mul(t2, r), t2, t2)
        # 2^-77 y0 by the exponent field, exactly (y0 >= 2^-267 here): an
        # integer operation, off the multiply pipes that bound this loop.
        tol = i64_as_f64(f64_as_i64(y0) - _TOLERANCE_EXPONENT)
        up = add(y0, fma(c2, 0.5, tol))
        down = add(y0, fma(c2, 0.5, -tol))
        iy = f64_as_i64(up)
        return i64_as_f64(iy | sign), iy ^ f64_as_i64(down)

    @jit
    def cube_root_f64_exact(x):  # type: ignore[no-untyped-def]
        # The correctly rounded cube root of any float64, for the lanes the
        # fast path cannot decide: the result is y0 + c rounded or its
        # neighbour on the side of the rounding error, and the exact sign of
        # ax - m^3 at their midpoint m decides (kernels/formulas/exact_rounding.py).
        ix, sign, special, tiny, ax = scaled_input_f64(x)
        y0, c = cube_root_parts_f64(ax)
        hi = add(y0, c)
        lo = sub(c, sub(hi, y0))  # exact: |y0| >= |c|
        step = np.int64(1) if lo > 0.0 else np.int64(-1)
        neighbour = i64_as_f64(f64_as_i64(hi) + step)
        lower = min(hi, neighbour)
        upper = max(hi, neighbour)
        rounded = upper if above_midpoint_cubed(ax, lower, upper) else lower
        return finish_f64(ix, sign, special, tiny, rounded)

    @jit
    def cube_root_f64(x):  # type: ignore[no-untyped-def]
        # Correctly rounded, one element at a time (CUDA threads, scalar
        # code); the CPU loops run the two passes instead.
        y, hard = cube_root_f64_fast(x)
        return cube_root_f64_exact(x) if hard != 0 else y

    @jit
    def cube_root_f64_branching(x):  # type: ignore[no-untyped-def]
        # cube_root_f64's bits where a branch is cheap (the CUDA kernels): the
        # CPU loops' two passes, one element at a time. For 2^-800 <= |x| < inf
        # (every input but zeros, tiny ones, infs and nans) the plain fast
        # path, without the specials' selects (a third fewer instructions on
        # sm_90), and the exact path when it cannot decide; the rest, a rare
        # branch, by cube_root_f64 itself.
        iax = f64_as_i64(x) & _ABS64
        if np.uint64(iax - _TINY64) >= np.uint64(_INF64 - _TINY64):
            return cube_root_f64(x)
        y, hard = cube_root_f64_plain(x)
        return cube_root_f64_exact(x) if hard != 0 else y

    return {
        "inverse_cbrt_guess_f64": inverse_cbrt_guess_f64,
        "cube_root_f64": cube_root_f64,
        "cube_root_f64_branching": cube_root_f64_branching,
        "cube_root_f64_fast": cube_root_f64_fast,
        "cube_root_f64_exact": cube_root_f64_exact,
        "cube_root_f64_plain": cube_root_f64_plain,
    }
