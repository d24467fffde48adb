r"""A vectorised double-double reference for the cube root and its gradients.

``cbrtgrad verify`` measures every result against this reference instead of
evaluating mpmath once per element (about 50 µs each); mpmath stays as an
independent spot check (:mod:`cbrtgrad.verification.ulp`). Nothing here uses
cbrtgrad's kernels, and ``np.cbrt`` is never an oracle: the cube root starts
from the platform's ``pow(a, 1/3)`` and is refined by Newton steps whose
residual ``a - y^3`` is computed from error-free products (the exact ``fma``
of :mod:`cbrtgrad.kernels.formulas.primitives`).

:mod:`cbrtgrad.verification.reference_loops` holds the numba loops and the
proof that the reference is within ``2^-103`` (the cube root) and ``2^-101``
(the gradients) relative of the real value.

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

from fractions import Fraction

import numpy as np

from .reference_loops import errors_loop, reference_loop

#: What :func:`ulp_errors` can measure: the forward, the gradient against the
#: exact derivative at ``x``, and the gradient against ``g / (3 y^2)`` for the
#: given ``y``.
KINDS = ("cbrt", "grad", "grad_given_y")

#: Errors within this many ulp of 0.5 are decided again, exactly.
EXACT_BAND = 2.0**-40

_MAX_STEPS = 8
_KIND_CODE = {name: code for code, name in enumerate(KINDS)}


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
    reference_loop(kind, _flat64(xarray), _flat64(garray), hi, lo)
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

    The same measure as ``cbrtgrad.verification.ulp.mpmath_ulp_errors`` (the ulp
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
    errors_loop(code, xf, yf, gf, is32, float(band), err, decide, r64)
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
