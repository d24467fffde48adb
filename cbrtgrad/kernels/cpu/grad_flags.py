"""The IEEE flags of the float64 gradient on the CPU, set to their rule.

numpy reports the divide, overflow, underflow and invalid flags that a ufunc
loop leaves set, and the ``parallel`` backend reports its threads' flags the
same way (:mod:`cbrtgrad.kernels.cpu.fpstatus`). The float64 gradient's loops
compute more than ``g / (3 y^2)``, and raise more: the correction ``t``, the
residual it comes from (about 2^-53 of the quotient) and the rounding test's
tolerance (2^-98 of it) underflow where the quotient is normal, below about
2^-860 and for ``|g|`` below that; an exact subnormal quotient, e.g.
``3 * 2^-1074 / 3``, comes out of an inexact product ``g * (1 / 3)``, which
underflows where numpy's one division does not; ``1 / 0`` divides by zero
whatever ``g`` is; and LLVM, which assumes the default floating-point
environment, computes the residual's ``fma`` from an infinite quotient
before the select that sanitises it (invalid). Keeping these out of the
vector loop would change its bits below 2^-968 or cost it 5 to 10 % (a
select of ``|g|`` for ``1 / 0``; selects that LLVM cannot move, for the
residual), so the block loops audit the flags instead: after every
``AUDIT_BLOCK`` elements they read them, and only where one was raised that
was not set before they work out whether the rule raises it for those
elements (:func:`audit`) and set the flags to that. Reading the flags costs
about 12 ns (``fetestexcept``), once per ``AUDIT_BLOCK`` elements (1024 in
place) and once per call of a ufunc's inner loop or a ``prange`` block. An
audit runs where a flag appeared: once per flag and call where the rule
raises it (a flag set stays set), and, at 0.1 to 0.4 ns per element, in
every block of data whose every block raises one the rule does not (0 / 0
everywhere, or quotients all between 2^-1022 and 2^-860).

The rule (docs/accuracy.md, "IEEE flags"), for each element:

- ``2^-400 <= |y| < 2^400`` (where every cube root of a finite float64 lies
  and the kernel computes ``3 y^2`` exactly, as a double-double): the flags of
  one correctly rounded division ``g / (3 y^2)``. For a finite nonzero ``g``,
  overflow where the result is infinite; underflow where the exact quotient
  is tiny after rounding to 53 bits with an unbounded exponent (x86's
  tininess, on every CPU, as the nan results follow x86) and is not a
  float64. A signaling nan ``g`` raises invalid; nothing else raises a flag.
- every other ``y`` (±0, ±inf, nan, and finite ``y`` that no cube root is):
  the flags of numpy's evaluation of what the kernel computes there, numpy's
  divisor ``d = 3*(y*y)`` and then ``g * (1 / d)``, or ``g / d`` where ``d``
  is zero (:func:`formula_flags`).

NOTE: the audit reads the inputs back after the block's passes; in place
(``dx`` is ``g`` or ``y``) the block loop audits each block of its passes,
whose inputs it keeps anyway (keeping them for ``AUDIT_BLOCK`` elements cost
the in-place gradient 9 %).
"""

from __future__ import annotations

import numba
import numpy as np

from ...build import compile as _compile
from ..formulas.exact_rounding import make_exact_rounding
from ..formulas.f64_grad import GRAD_REFINED_BEYOND64, GRAD_REFINED_LOWEST64
from ..formulas.primitives import CPU_PRIMITIVES, f64_as_i64, fma
from ..internal_jit import numba_only
from .fpstatus import (
    FENV_DIVBYZERO,
    FENV_INVALID,
    FENV_MASK,
    FENV_OVERFLOW,
    FENV_UNDERFLOW,
    clear_flags,
    raise_flags,
    raised_flags,
)

#: Elements per flag audit of the float64 gradient: one read of the flags
#: (``fetestexcept``, about 12 ns) per this many elements.
AUDIT_BLOCK = 4096

_ABS64 = np.int64(0x7FFFFFFFFFFFFFFF)
_INF64 = np.int64(0x7FF0000000000000)
_QUIET64 = np.int64(1 << 51)
_MIN_NORMAL64 = np.int64(0x0010000000000000)
# Within this many ulps of 2^-1022 the exact test decides whether a quotient
# is tiny; further out the result itself says (it is within one ulp of the
# exact quotient, see _underflows).
_NEAR_MIN_NORMAL = np.int64(4)
# x86 detects tininess after rounding: the quotient is tiny when its rounding
# to 53 bits, the exponent unbounded, is below 2^-1022, that is below the
# midpoint 2^-1022 - 2^-1076 of 2^-1022 and its 53-bit predecessor (the tie
# goes to 2^-1022, whose significand is even). That midpoint, scaled by
# 2^200 into the normal range, as the two neighbours the exact test takes.
_TININESS_SCALE = 2.0**200
_BELOW_MIN_NORMAL_SCALED = 2.0**-822 - 2.0**-875
_MIN_NORMAL_SCALED = 2.0**-822
# Scales a subnormal result and its g into the normal range for the exact
# comparison g == 3 y^2 dx (|g| < 2^-220 there: exact, no overflow).
_EXACT_SCALE = 2.0**1000

_EXACT = make_exact_rounding(CPU_PRIMITIVES, numba.njit(**_compile.SCALAR_OPTIONS))
_above_midpoint_times_square = _EXACT.above_midpoint_times_square


@numba.njit(**_compile.SCALAR_OPTIONS)
def _quotient_is(g, y, p):  # type: ignore[no-untyped-def]
    # Whether g / (3 y^2) is exactly p, for 2^-400 <= |y| < 2^400 and a
    # nonzero p below 2^-1021. It can be only where 3 y^2 is a float64:
    # 3 Y^2 P = G in odd integers needs 3 Y^2 <= G < 2^53. Then it is
    # whether |g| = 3 y^2 |p|, scaled by 2^1000 (exact: every term is normal
    # there, the product's error too).
    ay = abs(y)
    a = ay * ay
    if fma(ay, ay, -a) != 0.0:
        return False
    big = 3.0 * a
    if fma(3.0, a, -big) != 0.0:
        return False
    scaled = abs(p) * _EXACT_SCALE
    product = big * scaled
    return product == abs(g) * _EXACT_SCALE and fma(big, scaled, -product) == 0.0


@numba.njit(**_compile.SCALAR_OPTIONS)
def _underflows(g, y, dx):  # type: ignore[no-untyped-def]
    # Whether g / (3 y^2), exact, is tiny (x86: after rounding) and not a
    # float64, for a finite nonzero g and 2^-400 <= |y| < 2^400, given the
    # kernel's result dx: q + t (within 2^-100 of the quotient) rounded, or
    # the product g * (1 / 3y^2) rounded to 0. Either is within one ulp of
    # the exact quotient, and is it if the quotient is a float64.
    adx = f64_as_i64(dx) & _ABS64
    if adx >= _MIN_NORMAL64 + _NEAR_MIN_NORMAL:
        return False
    if adx != 0 and _quotient_is(g, y, dx):
        return False
    if adx <= _MIN_NORMAL64 - _NEAR_MIN_NORMAL:
        return True
    # Near 2^-1022: tiny below the midpoint (see the constants), decided on
    # g and y scaled by 2^200 (no tie: see kernels/formulas/exact_rounding.py).
    above = _above_midpoint_times_square(
        abs(g) * _TININESS_SCALE, _BELOW_MIN_NORMAL_SCALED, _MIN_NORMAL_SCALED, abs(y)
    )
    return not above


# NOTE: not inlined, and its operands read from memory: the flags are read
# and cleared by calls that LLVM cannot move the loads across (they may
# write memory), and the result is stored before the flags are read, so the
# arithmetic stays between the two calls (LLVM takes floating-point
# operations to have no side effect and could otherwise move them).
@numba_only(**_compile.BLOCK_OPTIONS)
def formula_flags(g, y, i, sink):  # type: ignore[no-untyped-def]
    """The ``<fenv.h>`` flags of element ``i`` for a finite nonzero ``y`` outside the refined range.

    numpy's evaluation of what the kernel computes there
    (:mod:`cbrtgrad.kernels.formulas.f64`, ``grad_parts_f64``): numpy's
    divisor ``d = 3*(y*y)``, then ``g * (1 / d)``, or ``g / d`` where ``d``
    is zero (the same value; ``1 / 0`` would raise divide by zero for a zero,
    infinite or nan ``g`` too). The flags are left cleared.
    """
    clear_flags(FENV_MASK)
    gi = g[i]
    yi = y[i]
    divisor = 3.0 * (yi * yi)
    sink[0] = gi / divisor if divisor == 0.0 else gi * (1.0 / divisor)
    raised = raised_flags(FENV_MASK)
    clear_flags(FENV_MASK)
    return raised


@numba.njit(**_compile.SCALAR_OPTIONS)
def _refined(y):  # type: ignore[no-untyped-def]
    ay = f64_as_i64(y) & _ABS64
    return (ay >= GRAD_REFINED_LOWEST64) & (ay < GRAD_REFINED_BEYOND64)


@numba.njit(**_compile.SCALAR_OPTIONS)
def _outside(y):  # type: ignore[no-untyped-def]
    # A finite nonzero y outside the refined range: no cube root is there.
    ay = f64_as_i64(y) & _ABS64
    finite_nonzero = (ay > 0) & (ay < _INF64)
    return finite_nonzero & ((ay < GRAD_REFINED_LOWEST64) | (ay >= GRAD_REFINED_BEYOND64))


@numba.njit(**_compile.SCALAR_OPTIONS)
def _signaling(v):  # type: ignore[no-untyped-def]
    bits = f64_as_i64(v) & _ABS64
    return (bits > _INF64) & ((bits & _QUIET64) == 0)


# The passes below say whether any element of an audit block raises one
# flag under the rule; each is a loop LLVM vectorises, and the audit runs
# only those of the flags that appeared. The rule's invalid, divide by zero
# and overflow are read off the values (an IEEE operation raises them
# exactly when its result says so); only underflow (tiny and inexact) needs
# the exact test or the replay, for the few elements where it can happen.
@numba_only(**_compile.BLOCK_OPTIONS)
def any_invalid(g, y, dx):  # type: ignore[no-untyped-def]
    """Whether a result is a nan of no nan operand (0/0, inf/inf, 0 * inf), or an operand sNaN."""
    found = False
    for i in range(dx.shape[0]):
        gi, yi, di = g[i], y[i], dx[i]
        made = (di != di) & (gi == gi) & (yi == yi)
        found |= made | _signaling(gi) | _signaling(yi)
    return found


@numba_only(**_compile.BLOCK_OPTIONS)
def any_divide(g, y):  # type: ignore[no-untyped-def]
    """Whether a finite nonzero g meets numpy's divisor 3*(y*y) rounded to zero."""
    found = False
    for i in range(y.shape[0]):
        ag = f64_as_i64(g[i]) & _ABS64
        found |= (ag > 0) & (ag < _INF64) & (3.0 * (y[i] * y[i]) == 0.0)
    return found


@numba_only(**_compile.BLOCK_OPTIONS)
def any_overflow(g, y, dx):  # type: ignore[no-untyped-def]
    """Whether a finite g's quotient is infinite (refined y), or the formula overflows (other y)."""
    found = False
    for i in range(dx.shape[0]):
        gi, yi = g[i], y[i]
        finite_g = abs(gi) < np.inf
        refined = _refined(yi) & finite_g & (abs(dx[i]) == np.inf)
        divisor = 3.0 * (yi * yi)
        reciprocal = 1.0 / divisor
        formula = (
            (divisor == np.inf)
            | ((divisor != 0.0) & (reciprocal == np.inf))
            | (finite_g & (reciprocal < np.inf) & (abs(gi * reciprocal) == np.inf))
        )
        found |= refined | (_outside(yi) & formula)
    return found


@numba.njit(**_compile.SCALAR_OPTIONS)
def _may_underflow(y, dx):  # type: ignore[no-untyped-def]
    # Where underflow needs a closer look: a refined quotient near or below
    # 2^-1022 (zeros included), and every y outside the refined range.
    adx = f64_as_i64(dx) & _ABS64
    return (_refined(y) & (adx < _MIN_NORMAL64 + _NEAR_MIN_NORMAL)) | _outside(y)


@numba_only(**_compile.BLOCK_OPTIONS)
def _any_may_underflow(y, dx):  # type: ignore[no-untyped-def]
    found = False
    for i in range(dx.shape[0]):
        found |= _may_underflow(y[i], dx[i])
    return found


@numba_only(**_compile.BLOCK_OPTIONS)
def any_underflow(g, y, dx):  # type: ignore[no-untyped-def]
    """Whether an exact refined quotient is tiny and inexact, or the formula underflows."""
    if not _any_may_underflow(y, dx):
        return False
    sink = np.empty(1, np.float64)
    for i in range(dx.shape[0]):
        if not _may_underflow(y[i], dx[i]):
            continue
        if _outside(y[i]):
            if formula_flags(g, y, i, sink) & FENV_UNDERFLOW:
                return True
            continue
        ag = f64_as_i64(g[i]) & _ABS64
        if ag > 0 and ag < _INF64 and _underflows(g[i], y[i], dx[i]):
            return True
    return False


@numba_only(**_compile.BLOCK_OPTIONS)
def audit(g, y, dx, before, raised, nan_result):  # type: ignore[no-untyped-def]
    """Set the flags to ``before`` plus those of ``raised`` the rule's ``dx = g / (3 y^2)`` raises.

    ``before`` are the ``<fenv.h>`` flags set before these elements were
    computed and ``raised`` those set after; ``nan_result`` says whether any
    result is a nan (without one, invalid is not the rule's). Returns the
    flags set. A flag the rule raises but the kernel did not is not added:
    the audit runs only where a flag appeared.
    """
    new = raised & ~before
    wanted = np.int64(before)
    if new & FENV_INVALID and nan_result and any_invalid(g, y, dx):
        wanted |= FENV_INVALID
    if new & FENV_DIVBYZERO and any_divide(g, y):
        wanted |= FENV_DIVBYZERO
    if new & FENV_OVERFLOW and any_overflow(g, y, dx):
        wanted |= FENV_OVERFLOW
    if new & FENV_UNDERFLOW and any_underflow(g, y, dx):
        wanted |= FENV_UNDERFLOW
    clear_flags(FENV_MASK)
    if wanted:
        raise_flags(wanted)
    return wanted
