"""The scalar cube-root formulas, written once and compiled for every target.

:func:`make_formulas` takes a namespace of primitives (an exact ``fma`` and
four bit casts) and a ``jit`` decorator, and returns the compiled scalar
functions. The numba CPU ufuncs, the parallel ufuncs and the CUDA device
functions are all built from this one source, so every backend that uses it
gives the same bits.

The algorithm is branch-free so that LLVM vectorises the ufunc loop: every
``a if cond else b`` below becomes a vector select, and special values are
classified on the integer bit pattern (integer compares raise no floating-point
flags, so numpy never sees a spurious ``invalid`` or ``overflow``).

float64, with error at most 0.5 + 2^-10 ulp:

1. ``r ~ |x|^(-1/3)`` from an exponent bit trick (``K - bits/3``, about 3.5 %
   relative error), then three division-free Newton steps
   ``r <- r * (4/3 - ((x/3) r) r^2)``; each squares the error: 2^-31 after
   three. Multiplying ``(x/3) r`` first keeps every product normal up to the
   largest float64, so only tiny inputs need rescaling.
2. ``y0 = x r^2`` and the residual ``x - y0^3`` computed almost exactly: with
   ``a + b = y0*y0`` exactly (one ``fma``), ``x - y0*a`` is exact before its one
   rounding (``fma``; it is about 2^-30 x, so that rounding is 2^-83 x) and
   ``y0*b`` is folded in by one more ``fma``. One Newton correction
   ``y = y0 + (x - y0^3) r^2 / 3`` follows. The correction is of the order of an
   ulp and is computed to about 2^-30 relative, so ``y`` is the correctly
   rounded value of ``cbrt(x)`` plus at most 2^-30 ulp before its one final
   rounding.

float32, correctly rounded for every input:

1. The same steps in float64 arithmetic up to ``y0`` (relative error 2^-31,
   far below a float32 half-ulp, 2^-25), then ``y32 = float32(y0)``.
2. ``y32`` is either the correct result or one ulp away from it, towards
   ``y0``. Which one is decided exactly: the midpoint ``m`` between ``y32`` and
   that neighbour (``y32``'s float64 bit pattern plus or minus 2^28) has 25
   significant bits, so ``m*m`` is exact in float64 and
   ``m^3 = hi + lo`` exactly with one ``fma``; the sign of ``x - m^3`` (exact by
   Sterbenz' lemma, since ``m^3`` is within a factor 2 of ``x``) says on which
   side of ``m`` the true cube root lies. No float32 cube root is a midpoint
   (``m^3`` needs 73 or more bits), so there are no ties.

The gradient ``g / (3 y^2)`` is computed from the saved output ``y`` to about
0.5 ulp for that ``y``: float32 in float64 arithmetic (``3 y^2`` is exact there),
rounded once; float64 with ``3 y^2`` as a double-double and one correction of
the quotient. Against the exact derivative at ``x`` it carries the rounding of
``y`` too: ``y`` is off by up to half an ulp, which ``1/y^2`` doubles and the
change of binade can stretch to 1.73 ulp of the result, so the bound is
1.73 + 0.5 = 2.23 ulp whatever the kernel does (measured: 2.16 in float32).
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np

# float64 bit patterns
_SIGN64 = np.int64(-0x8000000000000000)
_INF64 = np.int64(0x7FF0000000000000)
_ONE64 = np.int64(0x3FF0000000000000)
# |x| < 2^-800 is rescaled by 2^300 so that the residual terms (about
# 2^-106 |x|) stay normal; large |x| needs no rescaling (see the Newton step).
_TINY64 = np.int64(0x0DF0000000000000)
_MIN_NORMAL64 = np.int64(0x0010000000000000)
# 2^-1074 (the subnormal unit) times _UP_SCALE
_SUBNORMAL_SCALE = 2.0**-774
_UP_SCALE = 2.0**300
_UP_UNSCALE = 2.0**-100
_ABS64 = np.int64(0x7FFFFFFFFFFFFFFF)
# The gradient's refined path runs for 2^-400 <= |y| < 2^400.
_GRAD_LO64 = np.int64(0x26F0000000000000)
_GRAD_HI64 = np.int64(0x58F0000000000000)
# Magic constant of the inverse cube root bit trick for float64 (Moroz et al.):
# bits(r0) = K - bits(x) / 3 gives |r0 * x^(1/3) - 1| < 0.035.
_INV_CBRT_MAGIC64 = np.int64(0x553EF0FF289DD796)

# float32 bit patterns
_SIGN32 = np.int32(-0x80000000)
_INF32 = np.int32(0x7F800000)
_ONE32 = np.int32(0x3F800000)
_MIN_NORMAL32 = np.int32(0x00800000)
_TWO_M149 = 2.0**-149
# Half a float32 ulp, in units of the float64 bit pattern (52 - 23 - 1 bits).
_HALF_ULP32_AS_I64 = np.int64(1 << 28)

_THIRD = 1.0 / 3.0
_FOUR_THIRDS = 4.0 / 3.0


def make_formulas(prims: Any, jit: Callable[[Callable[..., Any]], Any]) -> SimpleNamespace:
    """Compile the scalar formulas against one target's primitives.

    Parameters
    ----------
    prims : namespace
        ``fma``, ``f64_as_i64``, ``i64_as_f64``, ``f32_as_i32`` and
        ``i32_as_f32`` for the target.
    jit : callable
        The decorator that compiles a scalar (device) function for the target,
        e.g. ``numba.njit(inline="always")`` or ``numba.cuda.jit(device=True)``.

    Returns
    -------
    types.SimpleNamespace
        ``cube_root_f64``, ``cube_root_f32``, ``cube_root_grad_f64`` and
        ``cube_root_grad_f32``, each a compiled scalar function.

    Examples
    --------
    >>> import numba
    >>> from cbrtgrad.kernels._primitives import CPU_PRIMITIVES
    >>> f = make_formulas(CPU_PRIMITIVES, numba.njit)
    >>> float(f.cube_root_f64(-27.0))
    -3.0
    """
    fma = prims.fma
    f64_as_i64 = prims.f64_as_i64
    i64_as_f64 = prims.i64_as_f64
    f32_as_i32 = prims.f32_as_i32
    i32_as_f32 = prims.i32_as_f32

    @jit
    def inverse_cbrt_f64(ax):  # type: ignore[no-untyped-def]
        # |ax^(1/3) r - 1| <= 2^-31 for normal, positive, finite ax (in range
        # where ax r^3 stays normal).
        guess = _INV_CBRT_MAGIC64 - np.int64(np.float64(f64_as_i64(ax)) * _THIRD)
        r = i64_as_f64(guess)
        ax3 = ax * _THIRD
        # (ax/3 r) r^2, not ax/3 r^3: r^3 is subnormal for |x| near 2^1024.
        r = r * fma(-(ax3 * r), r * r, _FOUR_THIRDS)
        r = r * fma(-(ax3 * r), r * r, _FOUR_THIRDS)
        r = r * fma(-(ax3 * r), r * r, _FOUR_THIRDS)
        return r

    @jit
    def cube_root_f64(x):  # type: ignore[no-untyped-def]
        ix = f64_as_i64(x)
        sign = ix & _SIGN64
        iax = ix ^ sign
        # NOTE: ±0, ±inf and nan are returned as they came (sign and payload
        # kept); the arithmetic below runs on 1.0 for them so that it raises
        # no floating-point flag.
        # iax == 0 or iax >= inf, as one unsigned compare.
        special = np.uint64(iax - np.int64(1)) >= np.uint64(_INF64 - np.int64(1))
        iax = _ONE64 if special else iax
        tiny = iax < _TINY64
        # NOTE: no arithmetic may see a subnormal operand: x86 takes a
        # microcode assist of about 100 cycles for each. A subnormal's bit
        # pattern, converted as an integer, is its significand: times 2^-774
        # that is exactly |x| 2^300, as the other tiny inputs are scaled.
        subnormal = iax < _MIN_NORMAL64
        operand = np.float64(iax) if subnormal else i64_as_f64(iax)
        scale = _SUBNORMAL_SCALE if subnormal else (_UP_SCALE if tiny else 1.0)
        unscale = _UP_UNSCALE if tiny else 1.0
        ax = operand * scale
        r = inverse_cbrt_f64(ax)
        r2 = r * r
        y = ax * r2
        # y^3 = y*a + y*b exactly (a + b = y*y); ax - y*a is exact inside the
        # fma and small, so its rounding and that of the y*b term are tiny.
        a = y * y
        b = fma(y, y, -a)
        residual = fma(-y, b, fma(-y, a, ax))
        y = fma(residual, r2 * _THIRD, y) * unscale
        iy = (ix ^ sign) if special else f64_as_i64(y)
        return i64_as_f64(iy | sign)

    @jit
    def cube_root_f32(x):  # type: ignore[no-untyped-def]
        ix = np.int32(f32_as_i32(x))
        sign = np.int32(ix & _SIGN32)
        iax = np.int32(ix ^ sign)
        special = (iax == 0) | (iax >= _INF32)
        # Every float32, subnormals included, is a normal float64, and x r^3 and
        # the residual stay normal: no rescaling needed. NOTE: a subnormal is
        # not converted as a float (a microcode assist on x86) but from its
        # bit pattern, its significand: times 2^-149 exactly.
        normal = _ONE32 if special else iax
        subnormal = normal < _MIN_NORMAL32
        ax = (
            np.float64(normal) * _TWO_M149
            if subnormal
            else np.float64(i32_as_f32(_ONE32 if subnormal else normal))
        )
        r = inverse_cbrt_f64(ax)
        y0 = ax * (r * r)
        y32 = np.float32(y0)
        iy = np.int32(f32_as_i32(y32))
        y32d = np.float64(y32)
        up = y0 > y32d
        # The midpoint between y32 and its neighbour on y0's side, exact in
        # float64: half a float32 ulp is 2^28 units of the float64 bit
        # pattern, and the integer step crosses binades correctly.
        m = i64_as_f64(f64_as_i64(y32d) + (_HALF_ULP32_AS_I64 if up else -_HALF_ULP32_AS_I64))
        m2 = m * m
        hi = m2 * m
        lo = fma(m2, m, -hi)
        above = ((ax - hi) - lo) > 0.0
        neighbour = np.int32(iy + np.int32(1) if up else iy - np.int32(1))
        iy = neighbour if above == up else iy
        iy = iax if special else iy
        return i32_as_f32(np.int32(iy | sign))

    @jit
    def cube_root_grad_f64(g, y):  # type: ignore[no-untyped-def]
        # g / (3 y^2) with 3 y^2 as a double-double (A + D_lo, error-free
        # products) and one Newton correction of the quotient: about 0.5 ulp
        # for the given y, where the plain expression has up to 2.5 ulp.
        # NOTE: at y = 0 this is IEEE division: ±inf (sign of g) and nan for
        # g = 0, with numpy's divide/invalid warnings, as JAX gives. Outside
        # 2^-400 <= |y| < 2^400 (never a cube root of a finite float64 but
        # possible for a user's y) and for infinite quotients the plain
        # expression is used; the refinement runs on sanitised operands so
        # that it raises no spurious flag. NOTE: LLVM assumes the default FP
        # environment and may compute an fma before the select that sanitises
        # its operands, so the vectorised loop still raises "invalid" for
        # y = ±inf and for g = ±inf (the results, ±0 and ±inf, are right).
        ay = f64_as_i64(y) & _ABS64
        in_range = (ay >= _GRAD_LO64) & (ay < _GRAD_HI64)
        ys = y if in_range else 1.0
        a = ys * ys
        b = fma(ys, ys, -a)
        big = 3.0 * a
        big_lo = fma(3.0, b, fma(3.0, a, -big))
        reciprocal = 1.0 / (big if in_range else 3.0 * (y * y))
        q = g * reciprocal
        # Refine only 0 < |q| < inf (one unsigned compare): ±0 and ±inf are
        # exact already, and the residual of a -0.0 quotient would be +0.0.
        aq = f64_as_i64(q) & _ABS64
        use = in_range & (np.uint64(aq - np.int64(1)) < np.uint64(_INF64 - np.int64(1)))
        qs = q if use else 0.0
        residual = fma(-qs, big_lo, fma(-qs, big, g if use else 0.0))
        refined = fma(residual, reciprocal if use else 0.0, q)
        # Select rather than rely on fma(0, 0, q): that turns -0.0 into +0.0.
        return refined if use else q

    @jit
    def cube_root_grad_f32(g, y):  # type: ignore[no-untyped-def]
        yd = np.float64(y)
        return np.float32(np.float64(g) / (3.0 * (yd * yd)))

    return SimpleNamespace(
        inverse_cbrt_f64=inverse_cbrt_f64,
        cube_root_f64=cube_root_f64,
        cube_root_f32=cube_root_f32,
        cube_root_grad_f64=cube_root_grad_f64,
        cube_root_grad_f32=cube_root_grad_f32,
    )
