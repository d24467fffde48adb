"""Half-precision results (float16, bfloat16) correctly rounded in their own precision.

The kernels compute half precision in float32 (the force-fp32 policy). Where a
result is *returned* in half precision (an ``out=`` array of that dtype), rounding
the float32 result once more is not enough: a double rounding misrounds when
the float32 value lands on a half-precision midpoint (10 of the 31,743
positive finite float16 inputs of the cube root). So the half result is
decided exactly: the correctly rounded wider result ``q`` brackets the exact
value ``t`` between two adjacent half values ``a < b`` (or is one), and ``t``
is compared with their midpoint ``m`` in float64, where the comparison is
exact because ``m`` has few bits (12 for float16, 9 for bfloat16):

* cube root: ``t > m`` iff ``|x| > m^3`` (``m^3`` has at most 36 bits);
* gradient from half-precision ``g`` and ``y``: ``t = |g| / (3 y^2) > m`` iff
  ``|g| > 3 m y^2`` (at most 2 + 12 + 24 bits).

No exact tie exists (``m^3`` of a midpoint needs 33 or more bits, which no
half value has; the same for the gradient's products), so there is no
round-half-even case to decide.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_F16 = np.dtype(np.float16)


def bfloat16() -> np.dtype | None:
    """ml_dtypes' bfloat16 dtype when ml_dtypes is installed, else None.

    Examples
    --------
    >>> bfloat16() is None or bfloat16().itemsize == 2
    True
    """
    try:
        import ml_dtypes
    except ImportError:
        return None
    return np.dtype(ml_dtypes.bfloat16)


def is_half(dtype: Any) -> bool:
    """Whether ``dtype`` is float16 or bfloat16 (ml_dtypes).

    Examples
    --------
    >>> is_half(np.float16), is_half(np.float32)
    (True, False)
    """
    dt = np.dtype(dtype)
    return dt == _F16 or (dt.itemsize == 2 and dt.name == "bfloat16")


def _bracket(
    q: np.ndarray, half: np.dtype
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``|q|`` rounded to ``half`` (``h``), and the half values ``a <= |q| <= b`` around it.

    Returns ``h``, ``a``, ``b`` (half arrays) and where ``|q|`` is itself a half value.
    """
    mag = np.abs(q)
    h = mag.astype(half)
    bits = h.view(np.uint16)
    wide = h.astype(mag.dtype)
    above = wide > mag
    exact = wide == mag
    a = np.where(above, bits - np.uint16(1), bits).astype(np.uint16).view(half)
    b = np.where(above, bits, bits + np.uint16(1)).astype(np.uint16).view(half)
    return h, a, b, exact | ~np.isfinite(mag)


def _midpoint(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # Exact in float64. Above the largest half value the midpoint is the
    # overflow threshold, half an ulp above it (b is inf there).
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        m = (a64 + b64) * 0.5
    top = np.isinf(b64) & np.isfinite(a64)
    if top.any():
        below = (a.view(np.uint16)[top] - np.uint16(1)).view(a.dtype).astype(np.float64)
        m[top] = a64[top] + (a64[top] - below) * 0.5
    return m


def _signed(magnitude: np.ndarray, q: np.ndarray, half: np.dtype) -> np.ndarray:
    out = magnitude.astype(half)
    negative = np.signbit(q)
    out[negative] = -out[negative]
    return out


def cube_root(x: Any, q: Any, half: Any) -> np.ndarray:
    """``cbrt(x)`` correctly rounded to ``half`` from ``q``, the correctly rounded float32/64 one.

    Parameters
    ----------
    x : array_like
        The inputs (any real float dtype: every value is exact in float64).
    q : ndarray
        ``cbrt(x)`` correctly rounded in float32 or float64 (the kernels').
    half : dtype
        float16 or bfloat16.

    Returns
    -------
    ndarray of ``half``

    Examples
    --------
    >>> x = np.float16(8.112e-05)
    >>> q = np.cbrt(np.float32(x))  # here np.cbrt happens to round correctly
    >>> cube_root(x, q, np.float16), np.float16(q)  # the double rounding is one off
    (np.float16(0.0433), np.float16(0.04327))
    """
    half = np.dtype(half)
    x64 = np.abs(np.asarray(x).astype(np.float64))
    q = np.asarray(q)
    scalar = q.ndim == 0
    q = np.atleast_1d(q)
    x64 = np.broadcast_to(x64, q.shape)
    h, a, b, exact = _bracket(q, half)
    m = _midpoint(a, b)
    upper = x64 > m * m * m
    magnitude = np.where(exact, h, np.where(upper, b, a))
    result = _signed(magnitude, q, half)
    return result[0] if scalar else result


def gradient(g: Any, y: Any, q: Any, half: Any) -> np.ndarray:
    """``g / (3 y^2)`` correctly rounded to ``half`` from ``q``, the float32 one.

    Exact when ``g`` and ``y`` are half-precision values (the caller checks);
    zeros, infinities and nan take ``q``'s value.

    Examples
    --------
    >>> g, y = np.float16(1), np.float16(2)
    >>> gradient(g, y, np.float32(1 / 12), np.float16)
    np.float16(0.0833)
    """
    half = np.dtype(half)
    q = np.asarray(q)
    scalar = q.ndim == 0
    q = np.atleast_1d(q)
    g64 = np.broadcast_to(np.abs(np.asarray(g).astype(np.float64)), q.shape)
    y64 = np.broadcast_to(np.asarray(y).astype(np.float64), q.shape)
    h, a, b, exact = _bracket(q, half)
    m = _midpoint(a, b)
    with np.errstate(all="ignore"):
        upper = g64 > 3.0 * m * (y64 * y64)
    special = exact | (q == 0) | (y64 == 0) | ~np.isfinite(y64) | ~np.isfinite(g64)
    magnitude = np.where(special, h, np.where(upper, b, a))
    result = _signed(magnitude, q, half)
    return result[0] if scalar else result
