"""The one table of cases: dtypes, inputs, oracles and bars.

It feeds the tests, the benchmarks and ``cbrtgrad verify``, so a bar is stated
once. Inputs are drawn log-uniformly over every binade, subnormals included,
with both signs, plus exact cubes and the special values. The inputs of the
speed measurements (the magnitudes of real data) are in
:mod:`cbrtgrad.cli.bench.inputs`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


@dataclass(frozen=True)
class AccuracyBar:
    """Accuracy bars for one dtype, in ulp.

    ``grad_max_ulp`` is against the exact derivative at ``x``,
    ``g / (3 x^(2/3))``; ``grad_given_y_max_ulp`` against the exact
    ``g / (3 y^2)`` for the saved ``y`` the kernel is given (its own error).

    NOTE: from a correctly rounded float32 ``y`` no kernel can be within 2 ulp
    of the derivative at ``x`` everywhere: ``y``'s half-ulp error, doubled by
    ``1/y^2`` and stretched by the change of binade, reaches 1.73 ulp of the
    result before the final rounding's 0.5 (see ``kernels/formulas/scalar.py``). The
    float32 bar is that bound, 2.23, and the kernel's own error is held to
    half an ulp (plus the 2^-29 of rounding twice).
    """

    forward_max_ulp: float
    grad_max_ulp: float
    grad_given_y_max_ulp: float
    forward_correctly_rounded: bool


BARS: dict[np.dtype, AccuracyBar] = {
    np.dtype(np.float32): AccuracyBar(
        forward_max_ulp=0.5,
        grad_max_ulp=2.23,
        grad_given_y_max_ulp=0.5 + 2.0**-20,
        forward_correctly_rounded=True,
    ),
    # float64: forward correctly rounded, and the gradient given y wherever
    # |g| >= 2^-968 and 2^-968 <= |result| < 2^1020 (docs/mathematics.md).
    np.dtype(np.float64): AccuracyBar(
        forward_max_ulp=0.5,
        grad_max_ulp=3.0,
        grad_given_y_max_ulp=0.5,
        forward_correctly_rounded=True,
    ),
}

#: Sizes: random inputs per dtype for ``verify`` and for tests.
VERIFY_SIZE = 1_000_000
TEST_SIZE = 20_000

#: Elements of each kind (forward, both gradients) per ``verify`` row that
#: mpmath checks the vectorised reference on.
MPMATH_CHECK_SIZE = 2000


def special_values(dtype: np.dtype) -> np.ndarray:
    """The special inputs of a dtype: zeros, infinities, nan, extremes, subnormals.

    Examples
    --------
    >>> v = special_values(np.dtype(np.float32))
    >>> bool(np.isnan(v).any()), v.dtype
    (True, dtype('float32'))
    """
    info = np.finfo(dtype)
    t = dtype.type
    positive = [
        t(0.0),
        t(np.inf),
        info.max,
        info.tiny,
        info.smallest_subnormal,
        t(info.smallest_subnormal * 3),
        np.nextafter(info.tiny, t(0)),  # largest subnormal
        np.nextafter(t(1), t(0)),
        t(1),
        np.nextafter(t(1), t(2)),
        t(8),
        t(27),
        t(0.125),
        info.eps,
    ]
    values = np.array(positive, dtype)
    return np.concatenate([values, -values, np.array([np.nan, -np.nan], dtype)])


#: Magnitudes of :func:`special_values` whose cube root is exact, and that root.
EXACT_ROOTS: dict[float, float] = {
    0.0: 0.0,
    np.inf: np.inf,
    1.0: 1.0,
    8.0: 2.0,
    27.0: 3.0,
    0.125: 0.5,
}


def expected_special(dtype: np.dtype) -> np.ndarray:
    """The exact results for :func:`special_values` where they are representable.

    Zeros, infinities and exact cubes (:data:`EXACT_ROOTS`), with the input's
    sign; every other position (nan, extremes, subnormals, the neighbours of
    1) holds nan, and those are compared in ulp like any input.

    NOTE: the expected values are known exactly, not taken from ``np.cbrt``:
    numpy's result is the platform's libm where SVML is not used (every CPU
    without AVX-512), and glibc's ``cbrt`` gives ``cbrt(27) = 3.0000000000000004``
    and ``cbrt(0.125) = 0.49999999999999994``.

    Examples
    --------
    >>> x = special_values(np.dtype(np.float64))
    >>> y = expected_special(np.dtype(np.float64))
    >>> [(float(a), float(b)) for a, b in zip(x, y) if a in (27.0, -0.125)]
    [(27.0, 3.0), (-0.125, -0.5)]
    """
    x = special_values(dtype)
    y = np.full_like(x, np.nan)
    for magnitude, root in EXACT_ROOTS.items():
        at = np.abs(x) == dtype.type(magnitude)
        y[at] = np.copysign(dtype.type(root), x[at])
    return y


def random_inputs(dtype: np.dtype, n: int, seed: int = 0) -> np.ndarray:
    """``n`` finite inputs, log-uniform over all binades (subnormals too), both signs.

    Examples
    --------
    >>> x = random_inputs(np.dtype(np.float64), 1000)
    >>> bool(np.isfinite(x).all()), bool((x < 0).any()), bool((np.abs(x) < 2.3e-308).any())
    (True, True, True)
    """
    rng = np.random.default_rng(seed)
    int_type = np.int32 if dtype == np.float32 else np.int64
    finite_max = np.asarray(np.finfo(dtype).max, dtype).view(int_type)
    bits = rng.integers(1, int(finite_max), size=n, dtype=int_type, endpoint=True)
    x = bits.view(dtype)
    return np.where(rng.random(n) < 0.5, -x, x)


def exact_cubes(dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Integers ``k`` and ``k^3`` that are exact in ``dtype`` (cbrt must be exact).

    Examples
    --------
    >>> k, cubes = exact_cubes(np.dtype(np.float32))
    >>> bool((k ** 3 == cubes).all())
    True
    """
    # k^3 is exact while it has at most the mantissa's bits: k < 2^(p/3).
    digits = np.finfo(dtype).nmant + 1
    limit = int(2 ** (digits / 3))
    k = np.arange(-limit, limit + 1, dtype=np.int64)
    return k.astype(dtype), (k**3).astype(dtype)


def gradient_pairs(
    y: np.ndarray,
    rng: np.random.Generator,
    log2_quotient: tuple[int, int],
    *,
    specials: int = 0,
    signs: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """``(g, y)`` whose quotients ``g / (3 y^2)`` spread log-uniformly over binades.

    The gradient kernels change path with the quotient's size (subnormal
    results, overflow, the float64 kernel's exact range), so their tests draw
    the quotient, not ``g``: ``g = q 3 y^2`` rounded to ``y``'s dtype, with
    ``|q|`` in ``[2^lo, 2^hi)`` for ``log2_quotient = (lo, hi)``. ``g`` may
    overflow to inf or round to zero past the dtype's range: special operands
    too. ``signs`` gives ``g`` random signs; ``specials`` puts that many
    :func:`special_values` into ``g`` and as many into a copy of ``y``.

    Raises
    ------
    TypeError
        For a ``y`` that is not a float32 or float64 ndarray.
    ValueError
        For ``lo >= hi`` or a negative ``specials``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> y = np.linspace(0.5, 4.0, 1000, dtype=np.float32)
    >>> g, y2 = gradient_pairs(y, rng, (-10, 10))
    >>> q = np.abs(g / (3.0 * y.astype(np.float64) ** 2))
    >>> bool(((q >= 2.0**-11.001) & (q < 2.0**10.001)).all()), g.dtype, y2 is y
    (True, dtype('float32'), True)
    """
    if not isinstance(y, np.ndarray) or y.dtype not in DTYPES:
        raise TypeError(f"cbrtgrad: y must be a float32 or float64 ndarray, got {y!r:.60}")
    low, high = log2_quotient
    if not low < high:
        raise ValueError(
            f"cbrtgrad: log2_quotient must be (lo, hi) with lo < hi, got {log2_quotient}"
        )
    if specials < 0:
        raise ValueError(f"cbrtgrad: specials must be at least 0, got {specials}")
    n = y.size
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):  # infs and zeros too
        q = rng.uniform(0.5, 2.0, n) * 2.0 ** rng.integers(low, high, n)
        if signs:
            q *= rng.choice([-1.0, 1.0], n)
        g = (q * 3.0 * y.astype(np.float64) ** 2).astype(y.dtype)
    if specials:
        values = special_values(y.dtype)
        g[rng.integers(0, n, specials)] = rng.choice(values, specials)
        y = y.copy()
        y[rng.integers(0, n, specials)] = rng.choice(values, specials)
    return g, y
