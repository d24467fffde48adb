r"""A vectorised double-double reference for the cube root and its gradients.

``cbrtgrad verify`` measures every result against this reference instead of
evaluating mpmath once per element (about 50 µs each); mpmath stays as an
independent spot check (:mod:`cbrtgrad.verification.ulp`). Nothing here uses
cbrtgrad's kernels, and ``np.cbrt`` is never an oracle: the cube root starts
from the platform's ``pow(a, 1/3)`` and is refined by Newton steps whose
residual ``a - y^3`` is computed from error-free products (the exact ``fma``
of :mod:`cbrtgrad.kernels.primitives`).

Error bound of :func:`cbrt_reference`
-------------------------------------
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
returned by :func:`grad_reference` is exact to those bounds when ``|result|``
is at least ``2^-969`` (its low part is then a normal number).

Errors in ulp
-------------
:func:`ulp_errors` follows :mod:`cbrtgrad.verification.ulp` exactly: the ulp of
a reference value ``t`` is ``np.spacing(|r|)`` of ``r = dtype(float(t))`` (the
reference rounded to float64, then to the result's dtype, with ``finfo.max``
in place of an infinite ``r``), so just below a power of two the ulp may be
the larger one. The error ``|y - t| / ulp`` is computed from the scaled
double-double, within ``2^-46`` ulp. Where it is within ``2^-40`` of 0.5 (or
where ``r`` could be either of two floats with different spacings), the
decision "at most 0.5 ulp" is made again with exact rational arithmetic
(:class:`fractions.Fraction`): for the cube root, ``y - s/2 <= t <= y + s/2``
is ``(y - s/2)^3 <= x <= (y + s/2)^3``; for the gradients it is a comparison
of rationals too. The returned error is then moved, by at most ``2^-40``, to
the side of 0.5 that decision says, so ``errors <= 0.5`` is exact.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numba
import numpy as np

from ..kernels.primitives import f32_as_i32, f64_as_i64, fma, i64_as_f64

#: What :func:`ulp_errors` can measure: the forward, the gradient against the
#: exact derivative at ``x``, and the gradient against ``g / (3 y^2)`` for the
#: given ``y``.
KINDS = ("cbrt", "grad", "grad_given_y")

#: Errors within this many ulp of 0.5 are decided again, exactly.
EXACT_BAND = 2.0**-40

_MAX_STEPS = 8
_KIND_CODE = {name: code for code, name in enumerate(KINDS)}
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
def _reference_kernel(kind, x, g, hi, lo):  # type: ignore[no-untyped-def]  # pragma: no cover
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
def _errors_kernel(kind, x, y, g, is32, band, err, decide, r64):  # type: ignore[no-untyped-def]  # pragma: no cover
    for i in range(x.shape[0]):
        status, negative, qh, ql, scale, value = _reference(kind, x[i], g[i])
        err[i], decide[i], r64[i] = _error(status, negative, qh, ql, scale, value, y[i], is32, band)


# --- exact decisions for the few errors next to 0.5 --------------------------------


def _compare(kind: int, x: float, g: float, w: Fraction) -> int:
    """The sign of ``reference - w``, exactly."""
    if kind == 0:  # cbrt is increasing: compare x with w^3
        d = Fraction(x) - w**3
    elif kind == 2:
        d = Fraction(g) / (3 * Fraction(x) ** 2) - w
    else:
        # g / (3 |x|^(2/3)) has the sign of g: for g > 0 and w > 0 it exceeds w
        # iff (g / (3 w))^3 > x^2.
        gf = Fraction(g)
        if gf < 0:
            return -_compare(kind, x, -g, -w)
        if gf == 0:
            return (w < 0) - (w > 0)
        if w <= 0:
            return 1
        d = (gf / (3 * w)) ** 3 - Fraction(x) ** 2
    return (d > 0) - (d < 0)


def _exact_round_f64(kind: int, x: float, g: float, start: float) -> float:
    """The reference rounded to float64 (nearest, ties to even), from a float next to it.

    ``start`` (the double-double's ``hi``) is at most an ulp or two away: each
    step moves one float, and a start further away is an error.
    """
    c = np.float64(start)
    if not np.isfinite(c):
        c = np.copysign(np.finfo(np.float64).max, c)
    for _ in range(_MAX_STEPS):
        with np.errstate(over="ignore"):
            up, down = np.nextafter(c, np.inf), np.nextafter(c, -np.inf)
        odd = bool(int(np.abs(c).view(np.int64)) & 1)
        for neighbour, other, towards in ((up, down, 1), (down, up, -1)):
            if np.isfinite(neighbour):
                mid = (Fraction(c) + Fraction(neighbour)) / 2
            else:  # past the largest float: the rounding boundary is half a gap out
                mid = Fraction(c) + (Fraction(c) - Fraction(other)) / 2
            side = _compare(kind, x, g, mid) * towards
            if side > 0 or (side == 0 and odd):
                c = neighbour
                break
        else:
            return float(c)
        if not np.isfinite(c):
            return float(c)
    raise RuntimeError(f"the exact rounding did not converge from {start!r}")


def _exactly_within_half(kind: int, x: float, g: float, y: float, r64: float, dtype: type) -> bool:
    """Whether ``|y - reference| <= spacing(|r|) / 2`` exactly (``r`` as in ulp.py)."""
    r = dtype(_exact_round_f64(kind, x, g, r64))
    if not np.isfinite(r):
        r = np.finfo(dtype).max
    half = Fraction(float(np.spacing(np.abs(r)))) / 2
    yf = Fraction(y)
    return _compare(kind, x, g, yf - half) >= 0 and _compare(kind, x, g, yf + half) <= 0


# --- public functions ----------------------------------------------------------


def _float_array(name: str, value: object) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"{name} must be a float32 or float64 array, got dtype {array.dtype}")
    return array


def _flat64(array: np.ndarray) -> np.ndarray:
    # Contiguous and writable, so the kernels compile once (a read-only array
    # is another numba type).
    return np.require(array, np.float64, ["C", "W"]).ravel()


def _broadcast_g(g: object, shape: tuple[int, ...]) -> np.ndarray:
    garray = _float_array("g", g)
    try:
        return np.broadcast_to(garray, shape)
    except ValueError:
        raise ValueError(
            f"g must broadcast to the shape of x {shape}, got shape {garray.shape}"
        ) from None


def _checked(
    x: object, y: object, kind: str, g: object
) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    if kind not in _KIND_CODE:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    xarray = _float_array("x", x)
    yarray = _float_array("y", y)
    if xarray.shape != yarray.shape:
        raise ValueError(f"x and y must have the same shape, got {xarray.shape} and {yarray.shape}")
    return _KIND_CODE[kind], xarray, yarray, _broadcast_g(g, xarray.shape)


def _dd_reference(kind: int, x: object, g: object) -> tuple[np.ndarray, np.ndarray]:
    xarray = _float_array("x" if kind != 2 else "y", x)
    garray = _broadcast_g(g, xarray.shape)
    hi = np.empty(xarray.size)
    lo = np.empty(xarray.size)
    _reference_kernel(kind, _flat64(xarray), _flat64(garray), hi, lo)
    return hi.reshape(xarray.shape), lo.reshape(xarray.shape)


def cbrt_reference(x: object) -> tuple[np.ndarray, np.ndarray]:
    """The real cube root of each element as a double-double ``hi + lo``.

    Parameters
    ----------
    x : array_like of float32 or float64
        Inputs; float32 is converted to float64 exactly.

    Returns
    -------
    hi : ndarray of float64
        Of the shape of ``x``: the float64 nearest ``hi + lo``, where
        ``|hi + lo - cbrt(x)| < 2^-103 |cbrt(x)|`` for every finite ``x``
        (subnormals included; the module docstring has the proof). ±0, ±inf
        and nan give ``hi = x``.
    lo : ndarray of float64
        The rest, ``|lo| <= ulp(hi) / 2``; 0 for ±0 and ±inf, nan for nan.

    Raises
    ------
    TypeError
        When ``x`` is not float32 or float64 (int, complex, ...).

    Examples
    --------
    >>> hi, lo = cbrt_reference(np.array([27.0, -2.0, 5e-324]))
    >>> hi.tolist()
    [3.0, -1.2599210498948732, 1.7031839360032603e-108]
    >>> float(lo[0]), abs(float(lo[1])) < 2.0**-53
    (0.0, True)
    """
    return _dd_reference(0, x, 0.0)


def grad_reference(x: object, g: object = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """The exact derivative times ``g``, ``g / (3 x^(2/3))``, as ``hi + lo``.

    Parameters
    ----------
    x : array_like of float32 or float64
        Inputs of the cube root.
    g : array_like of float32 or float64, default 1.0
        Cotangents, broadcast to the shape of ``x``.

    Returns
    -------
    hi : ndarray of float64
        The float64 nearest ``hi + lo``, which is within ``2^-101``
        relative wherever ``2^-969 <= |result| < 2^1024`` (below, ``lo``
        underflows; above, ``hi`` is ``±inf``). ``x = 0`` gives ``±inf``
        (nan for ``g = 0``), infinite ``x`` gives ``±0``.
    lo : ndarray of float64
        The rest (0 where ``hi`` is not finite or 0, nan for nan).

    Raises
    ------
    TypeError
        When ``x`` or ``g`` is not float32 or float64.
    ValueError
        When ``g`` does not broadcast to the shape of ``x``.

    Examples
    --------
    >>> hi, lo = grad_reference(np.array([8.0, -1.0]), 3.0)
    >>> hi.tolist(), lo.tolist()
    ([0.25, 1.0], [0.0, 0.0])
    """
    return _dd_reference(1, x, g)


def grad_given_y_reference(y: object, g: object = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """``g / (3 y^2)`` for a given (saved) output ``y``, as ``hi + lo``.

    The exact value of what a gradient kernel computes from ``y``: its own
    error, apart from the error ``y`` already carries.

    Parameters
    ----------
    y : array_like of float32 or float64
        The saved outputs.
    g : array_like of float32 or float64, default 1.0
        Cotangents, broadcast to the shape of ``y``.

    Returns
    -------
    hi : ndarray of float64
        The float64 nearest ``hi + lo``, which is within ``2^-102``
        relative wherever ``2^-969 <= |result| < 2^1024`` (otherwise as for
        :func:`~cbrtgrad.verification.reference.grad_reference`).
    lo : ndarray of float64
        The rest (0 where ``hi`` is not finite or 0, nan for nan).

    Raises
    ------
    TypeError
        When ``y`` or ``g`` is not float32 or float64.
    ValueError
        When ``g`` does not broadcast to the shape of ``y``.

    Examples
    --------
    >>> hi, lo = grad_given_y_reference(np.array([1.0]))
    >>> float(hi[0]), float(lo[0])
    (0.3333333333333333, 1.850371707708594e-17)
    """
    return _dd_reference(2, y, g)


def ulp_errors(
    x: object, y: object, kind: str = "cbrt", g: object = 1.0, *, band: float = EXACT_BAND
) -> np.ndarray:
    """Error of each ``y[i]`` in ulp of the exact result for ``x[i]``.

    The same measure as ``cbrtgrad.verification.ulp.ulp_errors`` (the ulp
    is ``np.spacing`` of the reference rounded to ``y``'s dtype), computed
    from the double-double reference: within ``2^-46`` ulp, and
    ``errors <= 0.5`` is decided exactly (see the module docstring).

    Parameters
    ----------
    x : array_like of float32 or float64
        The inputs: of the cube root for ``"cbrt"`` and ``"grad"``, the
        given outputs ``y`` of the cube root for ``"grad_given_y"``.
    y : array_like of float32 or float64
        The results to measure, of the shape of ``x``; their dtype sets the ulp.
    kind : {"cbrt", "grad", "grad_given_y"}
        ``cbrt(x)``, ``g / (3 x^(2/3))`` or ``g / (3 x^2)``.
    g : array_like of float32 or float64, default 1.0
        Cotangents of the gradient kinds, broadcast to the shape of ``x``.
    band : float, default ``EXACT_BAND`` (2^-40)
        Errors within ``band`` of 0.5 are decided again exactly (a wider band
        only costs time).

    Returns
    -------
    ndarray of float64
        Of the shape of ``x``. A non-finite ``y`` or reference gives ``inf``
        (0 where both are the same infinity) or nan.

    Raises
    ------
    TypeError
        When ``x``, ``y`` or ``g`` is not float32 or float64.
    ValueError
        When the shapes of ``x`` and ``y`` differ, ``g`` does not broadcast,
        or ``kind`` is unknown.

    Examples
    --------
    >>> x = np.array([2.0, 27.0]); y = np.array([1.2599210498948732, 3.0000000000000004])
    >>> ulp_errors(x, y).round(4).tolist()
    [0.1166, 1.0]
    >>> bool(ulp_errors(np.float32([8.0]), np.float32([1 / 12]), "grad")[0] <= 0.5)
    True
    """
    code, xarray, yarray, garray = _checked(x, y, kind, g)
    is32 = yarray.dtype == np.dtype(np.float32)
    xf, yf, gf = _flat64(xarray), _flat64(yarray), _flat64(garray)
    err = np.empty(xf.size)
    decide = np.empty(xf.size, np.bool_)
    r64 = np.empty(xf.size)
    _errors_kernel(code, xf, yf, gf, is32, float(band), err, decide, r64)
    dtype = np.float32 if is32 else np.float64
    above = np.nextafter(0.5, 1.0)
    for i in np.flatnonzero(decide):
        within = _exactly_within_half(code, xf[i], gf[i], yf[i], r64[i], dtype)
        err[i] = min(err[i], 0.5) if within else max(err[i], above)
    return err.reshape(xarray.shape)


def exact_decisions(x: object, y: object, kind: str = "cbrt", g: object = 1.0) -> np.ndarray:
    """Whether each error is at most 0.5 ulp, by exact rational arithmetic only.

    Slow (a Python loop); :func:`~cbrtgrad.verification.reference.ulp_errors`
    uses it for the few elements next to 0.5, and the tests compare the two.

    Parameters
    ----------
    x, y, kind, g
        As for :func:`~cbrtgrad.verification.reference.ulp_errors` (finite
        ``x``, ``y`` and reference).

    Returns
    -------
    ndarray of bool
        Of the shape of ``x``.

    Examples
    --------
    >>> exact_decisions(np.array([2.0, 2.0]), np.array([1.2599210498948732, 1.259921049894873]))
    array([ True, False])
    """
    code, xarray, yarray, garray = _checked(x, y, kind, g)
    dtype = np.float32 if yarray.dtype == np.dtype(np.float32) else np.float64
    xf, yf, gf = _flat64(xarray), _flat64(yarray), _flat64(garray)
    if code == 0:
        start = cbrt_reference(xf)[0]
    else:
        start = _dd_reference(code, xf, gf)[0]
    out = np.array(
        [_exactly_within_half(code, xf[i], gf[i], yf[i], start[i], dtype) for i in range(xf.size)],
        np.bool_,
    )
    return out.reshape(xarray.shape)
