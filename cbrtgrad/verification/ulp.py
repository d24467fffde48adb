"""Errors in ulp against mpmath at 200 bits.

The ulp of a reference value ``t`` is the spacing of its dtype at ``|t|``
(``np.spacing``), so an error of 0.5 ulp or less means correctly rounded.
"""

from __future__ import annotations

from collections.abc import Callable

import mpmath
import numpy as np

PRECISION_BITS = 200


def _ulp(t: mpmath.mpf, dtype: np.dtype) -> mpmath.mpf:
    rounded = dtype.type(float(t))
    if not np.isfinite(rounded):
        rounded = np.finfo(dtype).max
    return mpmath.mpf(float(np.spacing(np.abs(rounded))))


def mpmath_ulp_errors(
    x: np.ndarray, y: np.ndarray, exact: Callable[[mpmath.mpf], mpmath.mpf]
) -> np.ndarray:
    """Error of each ``y[i]`` in ulp of ``exact(x[i])``, by mpmath (finite ``x`` and ``y`` only).

    One mpmath evaluation per element (about 50 µs each), for any ``exact``;
    the fast measure of the cube root and its gradients is
    :func:`cbrtgrad.verification.reference.ulp_errors`, which this one checks.

    Parameters
    ----------
    x, y : ndarray
        Inputs and computed results, of one dtype (which sets the ulp).
    exact : callable
        Maps an ``mpmath.mpf`` input to the exact result.

    Examples
    --------
    >>> x = np.array([2.0]); y = np.array([1.2599210498948732])
    >>> float(mpmath_ulp_errors(x, y, mpmath.cbrt)[0]) < 0.5
    True
    """
    dtype = np.asarray(y).dtype
    errors = np.empty(np.size(x))
    with mpmath.workprec(PRECISION_BITS):
        for i, (xi, yi) in enumerate(zip(np.ravel(x), np.ravel(y), strict=True)):
            t = exact(mpmath.mpf(float(xi)))
            errors[i] = float(abs(mpmath.mpf(float(yi)) - t) / _ulp(t, dtype))
    return errors


def cbrt_exact(x: mpmath.mpf) -> mpmath.mpf:
    """The real cube root at the working precision."""
    return mpmath.cbrt(x) if x >= 0 else -mpmath.cbrt(-x)


def grad_exact(g: float) -> Callable[[mpmath.mpf], mpmath.mpf]:
    """``x -> g / (3 x^(2/3))``, the exact derivative times ``g``."""
    gm = mpmath.mpf(g)

    def derivative(x: mpmath.mpf) -> mpmath.mpf:
        return gm / (3 * cbrt_exact(x) ** 2)

    return derivative


def grad_from_output(g: float) -> Callable[[mpmath.mpf], mpmath.mpf]:
    """``y -> g / (3 y^2)``: the exact gradient for a given saved output ``y``."""
    gm = mpmath.mpf(g)

    def derivative(y: mpmath.mpf) -> mpmath.mpf:
        return gm / (3 * y**2)

    return derivative
