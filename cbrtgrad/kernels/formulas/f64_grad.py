"""The float64 gradient formula: ``g / (3 y^2)`` from the saved output, correctly rounded.

Part of the one formula source (:mod:`cbrtgrad.kernels.formulas.scalar` gathers it
with :mod:`cbrtgrad.kernels.formulas.f64` and the float32 modules): the
quotient as ``q + t``, ``q = g (1 / 3y^2)`` and one Newton correction with
``3 y^2`` as a double-double; a rounding test with a tolerance; and, for the
few lanes it cannot decide, the exact sign of ``|g| - 3 m y^2`` at the
midpoint ``m`` of the two candidates (:mod:`cbrtgrad.kernels.formulas.exact_rounding`).
The proof is in docs/mathematics.md, "The gradient, from the saved output".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .exact_rounding import make_exact_rounding
from .f64 import _ABS64, _DEFAULT_NAN64, _INF64, _QUIET64, _SIGN64

# The gradient's refined path runs for 2^-400 <= |y| < 2^400, its rounding
# test for 2^-968 <= |g| and 2^-968 <= |q| < 2^1020: there the residual and
# the correction t (about 2^-53 q) keep 2^-101 |q| of absolute precision (a
# subnormal t would not) and the neighbours of q are normal. The test's
# tolerance: 2^-98, four times the bound 2^-100.9 of q + t, with room for the
# roundings of t +- tolerance (docs/mathematics.md).
_GRAD_LO64 = np.int64(0x26F0000000000000)
_GRAD_HI64 = np.int64(0x58F0000000000000)
_GRAD_EXACT_LO64 = np.int64(0x0370000000000000)
_GRAD_Q_HI64 = np.int64(0x7FB0000000000000)
_GRAD_TOLERANCE = 2.0**-98

# The gradient's refined range of |y| as the least and the first excluded
# bit pattern (kernels/cpu/grad_flags.py sets the IEEE flags by it).
GRAD_REFINED_LOWEST64 = _GRAD_LO64
GRAD_REFINED_BEYOND64 = _GRAD_HI64


def make_grad_formulas_f64(
    prims: Any,
    jit: Callable[[Callable[..., Any]], Any],
    exact_jit: Callable[[Callable[..., Any]], Any] | None = None,
) -> dict[str, Any]:
    """Compile the float64 gradient formulas against one target's primitives.

    Parameters
    ----------
    prims, jit
        As for :func:`cbrtgrad.kernels.formulas.scalar.make_formulas`.
    exact_jit : callable, optional
        The decorator for the exact path of hard lanes (``cube_root_grad_f64_exact``
        and its exact rounding test); default ``jit``. The CPU compiles it out
        of line (it is rare, and not in a vector loop) while the fast path is
        inlined into the loops (kernels/cpu/blocks.py).

    Returns
    -------
    dict
        The compiled scalar functions by name: ``cube_root_grad_f64`` and its
        two passes, and ``grad_nan_f64``.

    Examples
    --------
    >>> import numba
    >>> from cbrtgrad.kernels.formulas.primitives import CPU_PRIMITIVES
    >>> f = make_grad_formulas_f64(CPU_PRIMITIVES, numba.njit)
    >>> float(f["cube_root_grad_f64"](3.0, 1.0))
    1.0
    """
    fma = prims.fma
    exact_jit = exact_jit or jit
    above_midpoint_times_square = make_exact_rounding(prims, exact_jit).above_midpoint_times_square
    mul = prims.mul
    add = prims.add
    sub = prims.sub
    f64_as_i64 = prims.f64_as_i64
    i64_as_f64 = prims.i64_as_f64

    @jit
    def grad_parts_f64(g, y):  # type: ignore[no-untyped-def]
        # g / (3 y^2) as q + t: q = g (1 / big) and t, one Newton correction,
        # with 3 y^2 as a double-double (big + big_lo, error-free products):
        # |q + t - g / (3 y^2)| < 2^-100.9 |q| (docs/mathematics.md).
        # Refined only for 2^-400 <= |y| < 2^400 (every cube root of a finite
        # float64 is there) and 0 < |q| < inf (one unsigned compare: ±0 and
        # ±inf are exact already); elsewhere q + t is the plain expression
        # (t = 0), with numpy's divisor 3*(y*y). The refinement runs on
        # sanitised operands. NOTE: at y = 0 this is IEEE division: ±inf
        # (sign of g) and nan for g = 0, as JAX gives. NOTE: the IEEE flags
        # of these operations are not the gradient's: 1 / 0 raises divide
        # by zero whatever g is, the correction and the rounding test
        # underflow where the quotient does not, g * (1 / 3y^2) underflows
        # where the one division g / 3y^2 is exact, and LLVM, which assumes
        # the default FP environment, computes the residual's fma from an
        # infinite q before the select that sanitises it (invalid). Keeping
        # them out of the vector loop cost it 5 to 10 % (a select of |g| for
        # 1 / 0; selects LLVM cannot move, as bit masks, for the residual;
        # measured on AVX-512): the CPU block loops set the flags to the rule
        # of docs/accuracy.md, "IEEE flags", instead (kernels/cpu/grad_flags.py).
        ay = f64_as_i64(y) & _ABS64
        in_range = (ay >= _GRAD_LO64) & (ay < _GRAD_HI64)
        ys = y if in_range else 1.0
        a = mul(ys, ys)
        b = fma(ys, ys, -a)
        big = mul(3.0, a)
        big_lo = fma(3.0, b, fma(3.0, a, -big))
        reciprocal = 1.0 / (big if in_range else mul(3.0, mul(y, y)))
        q = mul(g, reciprocal)
        aq = f64_as_i64(q) & _ABS64
        use = in_range & (np.uint64(aq - np.int64(1)) < np.uint64(_INF64 - np.int64(1)))
        qs = q if use else 0.0
        residual = fma(-qs, big_lo, fma(-qs, big, g if use else 0.0))
        t = mul(residual, reciprocal if use else 0.0)
        return q, t, use

    @jit
    def grad_nan_f64(g, y):  # type: ignore[no-untyped-def]
        # The gradient's nan, bit for bit the same on every CPU and GPU: g's
        # nan if g is one, else y's, quieted, else (0/0, inf/inf) x86's
        # default nan; numpy's g / (3*y*y) on x86 gives these bits. NOTE: the
        # hardware's own is not portable: x86 returns the first operand's nan
        # of a product of two and LLVM may order g * (1 / 3y^2) either way (the
        # vector loop and the scalar tail differed), arm64's default nan has
        # no sign, and a GPU may return its canonical nan.
        source = g if g != g else (y if y != y else i64_as_f64(_DEFAULT_NAN64))
        return i64_as_f64(f64_as_i64(source) | _QUIET64)

    @jit
    def grad_bracket_f64(q, t, use):  # type: ignore[no-untyped-def]
        # q + t rounded with t moved by +- the tolerance: if both agree, that
        # is the correctly rounded quotient. Other lanes run on 1.0 and 0.0.
        qs = q if use else 1.0
        ts = t if use else 0.0
        tolerance = mul(abs(qs), _GRAD_TOLERANCE)
        return add(qs, add(ts, tolerance)), add(qs, sub(ts, tolerance))

    @jit
    def cube_root_grad_f64_fast(g, y):  # type: ignore[no-untyped-def]
        # The branch-free first pass: q + t rounded, and whether the lane is
        # hard (the rounding test failed). A hard lane may also be one the
        # test does not apply to (see cube_root_grad_f64_exact): keeping that
        # check out of the vector loop costs nothing there.
        q, t, use = grad_parts_f64(g, y)
        up, down = grad_bracket_f64(q, t, use)
        # Select rather than rely on q + 0.0: that turns -0.0 into +0.0. A
        # nan result is the hardware's here (a lane with one is never hard):
        # the block loop (kernels/cpu/blocks.py) replaces it by grad_nan_f64's,
        # out of this vector loop, as cube_root_grad_f64 does.
        return add(q, t) if use else q, up != down

    @exact_jit
    def cube_root_grad_f64_exact(g, y):  # type: ignore[no-untyped-def]
        # For a hard lane: the correctly rounded quotient is one of the two
        # adjacent roundings up and down, decided by the exact sign of
        # |g| - 3 m y^2 at their midpoint m (kernels/formulas/exact_rounding.py),
        # where the test applies (|g|, |q| >= 2^-968, |q| < 2^1020); elsewhere
        # q + t rounded, about half an ulp.
        q, t, use = grad_parts_f64(g, y)
        up, down = grad_bracket_f64(q, t, use)
        ag = f64_as_i64(g) & _ABS64
        aq = f64_as_i64(q) & _ABS64
        exact_ok = use & (ag >= _GRAD_EXACT_LO64) & (aq >= _GRAD_EXACT_LO64) & (aq < _GRAD_Q_HI64)
        if not exact_ok:
            return add(q, t) if use else q
        lower = min(abs(up), abs(down))
        upper = max(abs(up), abs(down))
        above = above_midpoint_times_square(abs(g), lower, upper, abs(y))
        magnitude = upper if above else lower
        return i64_as_f64(f64_as_i64(magnitude) | (f64_as_i64(g) & _SIGN64))

    @jit
    def cube_root_grad_f64(g, y):  # type: ignore[no-untyped-def]
        # Correctly rounded where the test applies, one element at a time
        # (CUDA threads, scalar code); the CPU loops run the two passes.
        dx, hard = cube_root_grad_f64_fast(g, y)
        if hard:
            return cube_root_grad_f64_exact(g, y)
        return dx if dx == dx else grad_nan_f64(g, y)

    return {
        "cube_root_grad_f64": cube_root_grad_f64,
        "cube_root_grad_f64_fast": cube_root_grad_f64_fast,
        "cube_root_grad_f64_exact": cube_root_grad_f64_exact,
        "grad_nan_f64": grad_nan_f64,
    }
