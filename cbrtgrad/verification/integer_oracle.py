"""The correctly rounded float64 cube root in Python integers: the exact oracle.

Independent of the kernels (no floating-point arithmetic on the values): the
input is an exact rational, the root is found with an integer cube root, and
the rounding to nearest is decided on integers. Slow (tens of microseconds per
value): for the hard cases and samples the tests and ``tools/`` check.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np


def _icbrt(n: int) -> int:
    """floor(n^(1/3)) for an integer n >= 0, by Newton's method on integers."""
    if n < 2:
        return n
    r = 1 << ((n.bit_length() + 2) // 3)  # above the root
    while True:
        s = (2 * r + n // (r * r)) // 3
        if s >= r:
            break
        r = s
    while r * r * r > n:
        r -= 1
    while (r + 1) ** 3 <= n:
        r += 1
    return r


def correctly_rounded_cbrt(x: float) -> float:
    """The float64 nearest to the real cube root of the float64 ``x``.

    Parameters
    ----------
    x : float
        Any float64, subnormals, zeros, infinities and nan included.

    Returns
    -------
    float

    Examples
    --------
    >>> correctly_rounded_cbrt(27.0), correctly_rounded_cbrt(-0.125)
    (3.0, -0.5)
    >>> correctly_rounded_cbrt(0.9113028901216121).hex()
    '0x1.f0642fe72e894p-1'
    """
    if x != x or x in (0.0, float("inf"), float("-inf")):
        return x
    sign = -1.0 if x < 0 else 1.0
    value = Fraction(abs(x))
    # The root's exponent q: root in [2^52, 2^53) * 2^q.
    estimate = abs(x) ** (1.0 / 3.0)
    q = int(np.frexp(estimate)[1]) - 53
    for _ in range(3):  # the float estimate may be off by one binade
        scaled = value / Fraction(2) ** (3 * q)  # root of this in [2^52, 2^53)
        if scaled < Fraction(2) ** 156:
            q -= 1
        elif scaled >= Fraction(2) ** 159:
            q += 1
        else:
            break
    scaled = value / Fraction(2) ** (3 * q)
    # t = floor(2 cbrt(scaled)) = floor(cbrt(8 scaled)) = icbrt(floor(8 scaled)).
    eight = scaled * 8
    t = _icbrt(eight.numerator // eight.denominator)
    # t odd: the root lies above the midpoint t/2 (it is never on it), so up.
    significand = (t + 1) // 2
    return sign * float(Fraction(significand) * Fraction(2) ** q)
