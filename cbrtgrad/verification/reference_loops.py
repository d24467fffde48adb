r"""The numba loops of the double-double reference (:mod:`cbrtgrad.verification.reference`).

:func:`reference_loop` computes the cube root or a gradient of each element
as a double-double, and :func:`errors_loop` the error of a result in ulp of
it (the measure :func:`cbrtgrad.verification.reference.ulp_errors` documents).
Kinds are coded as integers: 0 the cube root, 1 the gradient against the
exact derivative at ``x``, 2 ``g / (3 y^2)`` for a given ``y``. Nothing here
uses cbrtgrad's kernels, and ``np.cbrt`` is never an oracle: the cube root
starts from the platform's ``pow(a, 1/3)`` and is refined by Newton steps
whose residual ``a - y^3`` is computed from error-free products (the exact
``fma`` of :mod:`cbrtgrad.kernels.formulas.primitives`).

Error bound of :func:`~cbrtgrad.verification.reference.cbrt_reference`
----------------------------------------------------------------------
Write ``u = 2^-53``. A finite nonzero ``|x| = a 2^(3k)`` is split exactly
(exponent arithmetic, subnormals pre-scaled by ``2^54``) with
``a in [1, 8)``, so ``t = a^(1/3) in [1, 2)`` and no intermediate below is
subnormal or overflows. For a double ``y = t (1 + e)`` with ``|e| <= 2^-20``:

1. *Residual.* ``y^2 = p + q`` and ``p y = s + s'`` exactly (``fma``), so
   ``y^3 = s + s' + q y``; ``a - s`` is exact (Sterbenz: ``s`` is within a
   factor 2 of ``a``), and ``r^ = ((a - s) - s') - fl(q y)`` satisfies
   ``|r^ - r| <= 2u |r| + 3u^2 a`` for ``r = a - y^3``.
2. *Correction.* ``c = fl(r^ / fl(3 fl(y y)))`` is ``r^ / (3 y^2)`` times
   ``1 + theta`` with ``|theta| <= 3.01 u``.
3. *Newton.* Exactly, ``y + r / (3 y^2) = t (1 + e^2 (1 + 2e/3) / (1 + e)^2)``,
   and ``|r| / (3 y^2) <= t |e| (1 + 2|e|)``, ``a / (3 y^2) <= t (1 + 3|e|) / 3``.

Together: ``|y + c - t| <= t (e^2 + 5.01 u |e| + u^2) (1 + 2^-15)``.
The start ``pow(a, 1/3)`` is taken to be within ``2^-20`` (any libm is within
a few ulp). A first double step ``y = fl(y + c)`` leaves ``|e| <= 2^-39.9``,
a second ``|e| <= u (1 + 2^-26)``, and the third step kept as the double-double
``y + c`` (normalised exactly by Fast2Sum) is within
``(1 + 5.01 + 1 + 2^-20) u^2 < 7.02 u^2 < 2^-103.1`` of ``t``, relative.
Scaling back by ``2^k`` is exact. So ``hi + lo`` is within ``2^-103``
relative of the real cube root for every finite ``x``; ±0, ±inf and nan map to
themselves (``lo`` is 0, nan for nan).

Gradients
---------
``g / (3 x^(2/3))`` squares the cube root's mantissa in double-double
(``<= 5u^2``), multiplies by 3 (``<= 3u^2``) and divides the mantissa of ``g``
by it: one quotient, its exact residual (``fma``) and a second quotient,
within ``8u^2``; in all below ``2 * 7.02 + 5 + 3 + 8 < 31`` ``u^2 < 2^-101``
relative. ``g / (3 y^2)`` for a given ``y`` squares ``y`` exactly, so it is
within ``11 u^2``. Exponents are carried apart from the mantissas, so the
bounds hold wherever the result itself is representable; the double-double
returned by :func:`cbrtgrad.verification.reference.grad_reference` is exact to
those bounds when ``|result|`` is at least ``2^-969`` (its low part is then a
normal number).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ..kernels.formulas.primitives import f32_as_i32, f64_as_i64, fma, i64_as_f64

_TWO54 = 18014398509481984.0  # 2^54, a power of 8: subnormals are scaled by it
_MIN_NORMAL = 2.2250738585072014e-308
_MANTISSA = np.int64(0xFFFFFFFFFFFFF)
_EXP_ONE = np.int64(1023) << np.int64(52)
_THIRD = 1.0 / 3.0
_HUGE = 2.0**1000
_F32_MAX = float(np.finfo(np.float32).max)
_F64_MAX = float(np.finfo(np.float64).max)

# Status of a reference value.
_FINITE, _ZERO, _INF, _NAN = 0, 1, 2, 3

_njit = numba.njit(fastmath=False, cache=False)

# --- error-free transformations and double-double arithmetic ------------------


@_njit
def _two_sum(a, b):  # type: ignore[no-untyped-def]
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


@_njit
def _fast_two_sum(a, b):  # type: ignore[no-untyped-def]
    # |a| >= |b| (or a == 0).
    s = a + b
    return s, b - (s - a)


@_njit
def _two_prod(a, b):  # type: ignore[no-untyped-def]
    p = a * b
    return p, fma(a, b, -p)


@_njit
def _dd_sqr(h, lo):  # type: ignore[no-untyped-def]
    # (h + lo)^2 within 5u^2.
    p, e = _two_prod(h, h)
    e = e + (2.0 * h * lo + lo * lo)
    return _fast_two_sum(p, e)


@_njit
def _dd_mul_d(h, lo, b):  # type: ignore[no-untyped-def]
    # (h + lo) b within 3u^2.
    p, e = _two_prod(h, b)
    e = e + lo * b
    return _fast_two_sum(p, e)


@_njit
def _d_div_dd(a, bh, bl):  # type: ignore[no-untyped-def]
    # a / (bh + bl) within 8u^2 (normal operands).
    q1 = a / bh
    p, e = _two_prod(q1, bh)
    r = ((a - p) - e) - q1 * bl
    return _fast_two_sum(q1, r / bh)


# --- the scaled references -------------------------------------------------------


@_njit
def _split(v):  # type: ignore[no-untyped-def]
    # |v| = m 2^e exactly, m in [1, 2), for finite nonzero v.
    a = abs(v)
    pre = 0
    if a < _MIN_NORMAL:
        a = a * _TWO54
        pre = -54
    bits = f64_as_i64(a)
    e = (bits >> np.int64(52)) - np.int64(1023)
    m = i64_as_f64((bits & _MANTISSA) | _EXP_ONE)
    return m, e + pre


@_njit
def _residual(a, y):  # type: ignore[no-untyped-def]
    # a - y^3 within 2u|r| + 3u^2 a, for y^3 within a factor 2 of a.
    p, q = _two_prod(y, y)
    s, s2 = _two_prod(p, y)
    return ((a - s) - s2) - q * y


@_njit
def _cbrt_mantissa(x):  # type: ignore[no-untyped-def]
    # (th, tl, k) with |x|^(1/3) = (th + tl) 2^k, th in [1, 2], for finite nonzero x.
    m, e = _split(x)
    k = e // 3
    a = m * np.float64(np.int64(1) << (e - 3 * k))  # exact: times 1, 2 or 4
    y = a**_THIRD
    y = y + _residual(a, y) / (3.0 * (y * y))
    y = y + _residual(a, y) / (3.0 * (y * y))
    c = _residual(a, y) / (3.0 * (y * y))
    th, tl = _fast_two_sum(y, c)
    return th, tl, k


@_njit
def _grad_status(g, d):  # type: ignore[no-untyped-def]
    # Status and value of g / (3 d^2) or g / (3 d^(2/3)) when not finite nonzero.
    if math.isnan(g) or math.isnan(d):
        return _NAN, np.nan
    if d == 0.0:
        if g == 0.0:
            return _NAN, np.nan
        return _INF, math.copysign(np.inf, g)
    if math.isinf(d):
        if math.isinf(g):
            return _NAN, np.nan
        return _ZERO, math.copysign(0.0, g)
    if math.isinf(g):
        return _INF, g
    if g == 0.0:
        return _ZERO, g
    return _FINITE, 0.0


@_njit
def _reference(kind, x, g):  # type: ignore[no-untyped-def]
    # (status, negative, qh, ql, E, special value): the reference is
    # -/+ (qh + ql) 2^E when status is finite, else the special value.
    if kind == 0:
        if math.isnan(x):
            return _NAN, False, 0.0, 0.0, 0, np.nan
        if x == 0.0:
            return _ZERO, False, 0.0, 0.0, 0, x
        if math.isinf(x):
            return _INF, False, 0.0, 0.0, 0, x
        th, tl, k = _cbrt_mantissa(x)
        return _FINITE, x < 0.0, th, tl, k, 0.0
    status, value = _grad_status(g, x)
    if status != _FINITE:
        return status, False, 0.0, 0.0, 0, value
    gm, ge = _split(g)
    if kind == 1:
        th, tl, k = _cbrt_mantissa(x)
        sh, sl = _dd_sqr(th, tl)
        scale = ge - 2 * k
    else:
        ym, ye = _split(x)
        sh, sl = _two_prod(ym, ym)
        scale = ge - 2 * ye
    dh, dl = _dd_mul_d(sh, sl, 3.0)
    qh, ql = _d_div_dd(gm, dh, dl)
    return _FINITE, g < 0.0, qh, ql, scale, 0.0


@numba.njit(fastmath=False, cache=False)
def reference_loop(kind, x, g, hi, lo):  # type: ignore[no-untyped-def]  # pragma: no cover
    # hi + lo: the reference of each x (and g) of one kind.
    for i in range(x.shape[0]):
        status, negative, qh, ql, scale, value = _reference(kind, x[i], g[i])
        if status != _FINITE:
            hi[i] = value
            lo[i] = np.nan if status == _NAN else 0.0
            continue
        sign = -1.0 if negative else 1.0
        hi[i] = sign * math.ldexp(qh, scale)
        # Past the largest float, hi is the infinity and lo 0.
        lo[i] = sign * math.ldexp(ql, scale) if math.isfinite(hi[i]) else 0.0


# --- errors in ulp ---------------------------------------------------------------


@_njit
def _to_dtype(r, is32):  # type: ignore[no-untyped-def]
    # r rounded to the dtype, finfo.max for an infinity (as ulp.py does).
    if is32:
        r32 = np.float32(r)
        if math.isinf(r32):
            return _F32_MAX
        return np.float64(r32)
    if math.isinf(r):
        return _F64_MAX
    return r


@_njit
def _ulp_exponent(r, is32):  # type: ignore[no-untyped-def]
    # log2 of np.spacing(|r|) for a finite value r of the dtype.
    if is32:
        ef = (f32_as_i32(np.float32(abs(r))) >> np.int32(23)) & np.int32(0xFF)
        return -149 if ef == 0 else np.int64(ef) - 150
    ef = (f64_as_i64(abs(r)) >> np.int64(52)) & np.int64(0x7FF)
    return -1074 if ef == 0 else ef - 1075


@_njit
def _round_to_f64(qh, ql, scale):  # type: ignore[no-untyped-def]
    # (qh + ql) 2^scale rounded to float64, for qh > 0 and normalised qh + ql.
    ex = ((f64_as_i64(qh) >> np.int64(52)) & np.int64(0x7FF)) - 1023
    if ex + scale >= -1022:
        return math.ldexp(qh, scale)  # exact, or inf past the range
    # Subnormal: round qh + ql at the grid 2^-1074 itself (a tie of qh alone
    # is broken by ql).
    z = math.ldexp(qh, scale + 1074)
    n = np.rint(z)
    f = z - n
    if (f == 0.5 or f == -0.5) and ql != 0.0:
        n = z + 0.5 if ql > 0.0 else z - 0.5
    return math.ldexp(n, -1074)


@_njit
def _error(status, negative, qh, ql, scale, value, y, is32, band):  # type: ignore[no-untyped-def]
    # (error in ulp, whether to decide exactly, the reference in float64).
    if status == _NAN or math.isnan(y):
        return np.nan, False, np.nan
    if status == _INF:
        return (0.0 if y == value else np.inf), False, value
    if math.isinf(y):
        return np.inf, False, value
    if status == _ZERO:
        ue = _ulp_exponent(0.0, is32)
        return abs(math.ldexp(y, -ue)), False, value
    sign = -1.0 if negative else 1.0
    r64 = _round_to_f64(qh, ql, scale)
    ue = _ulp_exponent(_to_dtype(r64, is32), is32)
    ys = math.ldexp(sign * y, -ue)
    if abs(ys) >= _HUGE:
        err = abs(ys)
    else:
        s, e = _two_sum(ys, -math.ldexp(qh, scale - ue))
        err = abs(s + (e - math.ldexp(ql, scale - ue)))
    decide = abs(err - 0.5) <= band
    ex = ((f64_as_i64(qh) >> np.int64(52)) & np.int64(0x7FF)) - 1023
    if not decide and ql != 0.0 and ex + scale >= -1022:
        # Near a float64 midpoint, r64 could be either neighbour: if their
        # spacings in the dtype differ (a binade edge), decide exactly.
        bits = f64_as_i64(qh)
        nb = i64_as_f64(bits + np.int64(1) if ql > 0.0 else bits - np.int64(1))
        if abs(ql) >= abs(nb - qh) * (0.5 - band):
            other = _to_dtype(math.ldexp(nb, scale), is32)
            decide = _ulp_exponent(other, is32) != ue
    return err, decide, sign * r64


@numba.njit(fastmath=False, cache=False)
def errors_loop(kind, x, y, g, is32, band, err, decide, r64):  # type: ignore[no-untyped-def]  # pragma: no cover
    # The error of each y in ulp, whether it must be decided exactly (within
    # band of 0.5), and the reference rounded to float64.
    for i in range(x.shape[0]):
        status, negative, qh, ql, scale, value = _reference(kind, x[i], g[i])
        err[i], decide[i], r64[i] = _error(status, negative, qh, ql, scale, value, y[i], is32, band)
