"""Half-precision results (float16, bfloat16) correctly rounded in their own precision.

The kernels compute half precision in float32 or float64 (the force-fp32
policy). Where a result is *returned* in half precision (an ``out=`` array of
that dtype), rounding the kernel's result ``q`` once more is right except in
one case, which this module decides exactly:

* Rounding is monotonic and every half value and every midpoint between two
  adjacent half values (at most 12 significant bits) is a float32 and a
  float64. So if the exact value ``t`` lies strictly between two adjacent
  midpoints, so does ``q`` (correctly rounded, or even faithfully rounded),
  and ``q`` rounds to the half value ``t`` rounds to.
* When ``q`` *is* a midpoint ``m`` (float32 lands on one for 20 float16
  inputs of the cube root; an exact ``t == m`` always does), rounding ``q``
  would settle it by ties-to-even whatever side ``t`` is on. Here ``t`` is
  compared with ``m`` exactly instead: above, below, or an exact tie, which
  goes to the even neighbour (IEEE round-half-even, ``np.float16(2051.0)``
  is 2052). Above the largest half value the midpoint is the overflow
  threshold (65520 for float16), and a tie there rounds to infinity.

The exact comparisons: the cube root ``t > m`` iff ``|x| > m^3``, where
``m^3`` (at most 36 bits) is exact in float64 and ``x`` is any input the
kernels take; the gradient ``t = |g| / (3 y^2) > m`` iff ``|g| > 3 m y^2``,
compared with Python's exact rationals (the midpoint cases are few).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

_F16 = np.dtype(np.float16)
_F64 = np.dtype(np.float64)


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
    """Whether ``dtype`` is float16 (in either byte order) or bfloat16 (ml_dtypes).

    Examples
    --------
    >>> is_half(np.float16), is_half(">f2"), is_half(np.float32)
    (True, True, False)
    """
    dt = np.dtype(dtype)
    if dt.itemsize != 2:
        return False
    return dt.kind == "f" or dt.name == "bfloat16"


#: Compares the exact values ``t`` of the elements ``index`` with the midpoints
#: ``m`` (float64): -1 where ``t < m``, 0 where equal, +1 where ``t > m``.
Comparison = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _round(q: Any, half: Any, compare: Comparison) -> np.ndarray:
    """``q`` (float32 or float64, within a rounding of ``t``) rounded to ``half`` as ``t`` is.

    See the module's docstring; ``compare`` decides the elements where ``|q|``
    is a midpoint. The result has ``q``'s sign (and nan where ``q`` is nan).
    """
    half = np.dtype(half).newbyteorder("=")
    q = np.asarray(q)
    shape = q.shape
    q = q.reshape(-1)  # NOTE: 1-D, so that h is an array the bits below write into (not a scalar)
    mag = np.abs(q).astype(_F64)
    with np.errstate(over="ignore", invalid="ignore"):
        h = mag.astype(half)  # one rounding, to nearest even: right but at midpoints
    wide = h.astype(_F64)
    inexact = (wide != mag) & np.isfinite(mag)
    index = np.flatnonzero(inexact)
    if index.size:
        bits = h.view(np.uint16)
        hs, mags, widths = bits[index], mag[index], wide[index]
        # The other half value beside |q|: below it when h rounded up (h may be inf).
        other = np.where(widths > mags, hs - np.uint16(1), hs + np.uint16(1)).astype(np.uint16)
        low = np.minimum(hs, other)
        high = np.maximum(hs, other)
        low64 = low.view(half).astype(_F64)
        high64 = high.view(half).astype(_F64)
        below_low = (low - np.uint16(1)).view(half).astype(_F64)
        with np.errstate(invalid="ignore"):
            # Exact in float64; past the largest value, the overflow threshold.
            top = low64 + (low64 - below_low) * 0.5
            m = np.where(np.isinf(high64), top, (low64 + high64) * 0.5)
        at_mid = m == mags
        if at_mid.any():
            where = index[at_mid]
            side = compare(where, m[at_mid])
            # A tie keeps h: numpy's rounding of the midpoint is to the even one.
            chosen = np.where(side > 0, high[at_mid], np.where(side < 0, low[at_mid], hs[at_mid]))
            bits[where] = chosen
    negative = np.signbit(q)
    if negative.any():
        h[negative] = -h[negative]
    return h.reshape(shape)


def cube_root(x: Any, q: Any, half: Any) -> Any:
    """``cbrt(x)`` correctly rounded to ``half`` from ``q``, the correctly rounded float32/64 one.

    Parameters
    ----------
    x : array_like
        The inputs the kernel took (every value exact in float64).
    q : ndarray
        ``cbrt(x)`` correctly rounded in float32 or float64 (the kernels').
    half : dtype
        float16 or bfloat16.

    Returns
    -------
    ndarray of ``half`` (a scalar for 0-d ``q``)

    Examples
    --------
    >>> from cbrtgrad import cbrt
    >>> x = np.float16(8.112e-05)
    >>> q = cbrt(np.float32(x))  # 0.043270... correctly rounded in float32: a float16 midpoint
    >>> cube_root(x, q, np.float16), np.float16(q)  # the double rounding is one off
    (np.float16(0.0433), np.float16(0.04327))
    >>> x = np.float64(2051.0) ** 3  # the cube root is the midpoint of 2050 and 2052
    >>> float(cube_root(x, cbrt(x), np.float16))  # a tie: to even, as np.float16(2051.0)
    2052.0
    """
    q = np.asarray(q)
    x64 = np.broadcast_to(np.abs(np.asarray(x).astype(_F64)), q.shape).reshape(-1)

    def compare(index: np.ndarray, m: np.ndarray) -> np.ndarray:
        cubes = m * m * m  # exact: m has at most 12 significant bits
        xs = x64[index]
        return (xs > cubes).astype(np.int8) - (xs < cubes).astype(np.int8)

    result = _round(q, half, compare)
    return result[()] if q.ndim == 0 else result


def gradient(g: Any, y: Any, q: Any, half: Any) -> Any:
    """``g / (3 y^2)`` correctly rounded to ``half`` from ``q``, a faithful float64 one.

    ``g`` and ``y`` are the operands the kernel took (any float dtype); ``q``
    is within a rounding of the exact quotient (the float64 kernel's result,
    correctly rounded over the whole half-precision range).

    Examples
    --------
    >>> g, y = np.float16(1), np.float16(2)
    >>> gradient(g, y, np.float64(1 / 12), np.float16)
    np.float16(0.0833)
    >>> float(gradient(np.float64(3 * 2051.0), np.float64(1.0), np.float64(2051.0), np.float16))
    2052.0
    """
    q = np.asarray(q)
    gs = np.broadcast_to(np.asarray(g), q.shape).reshape(-1)
    ys = np.broadcast_to(np.asarray(y), q.shape).reshape(-1)

    def compare(index: np.ndarray, m: np.ndarray) -> np.ndarray:
        # NOTE: |g| vs 3 m y^2 needs up to 2 + 12 + 106 bits for float64
        # operands: exact rationals, on the few midpoint elements only.
        side = np.empty(index.size, np.int8)
        for k, (i, mid) in enumerate(zip(index.tolist(), m.tolist(), strict=True)):
            lhs = abs(Fraction(float(gs[i])))
            rhs = 3 * Fraction(mid) * Fraction(float(ys[i])) ** 2
            side[k] = (lhs > rhs) - (lhs < rhs)
        return side

    result = _round(q, half, compare)
    return result[()] if q.ndim == 0 else result
