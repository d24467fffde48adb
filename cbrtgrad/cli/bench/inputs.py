"""The inputs of every speed measurement: ``cbrtgrad bench``, its peers, its curve and asv.

The accuracy cases (every binade, subnormals, special values, exact cubes)
are in :mod:`cbrtgrad.verification.cases`; these are the magnitudes of real
data instead.
"""

from __future__ import annotations

import numpy as np

#: Array sizes of the speed table (``cbrtgrad bench`` and asv).
BENCH_SIZES = (100_000, 10_000_000)

#: The magnitudes of the benchmark inputs: log-uniform over [1e-6, 1e6].
BENCH_DECADES = 6


def bench_inputs(dtype: np.dtype, n: int, seed: int = 0) -> np.ndarray:
    """``n`` benchmark inputs: magnitudes log-uniform in [1e-6, 1e6], both signs.

    The magnitudes of real data, with no zeros (where the gradient is
    singular) and no subnormals (which numpy's SVML loop and cbrtgrad's
    kernels treat at different speeds); the accuracy checks use
    :func:`cbrtgrad.verification.cases.random_inputs`, over all binades,
    instead.

    Examples
    --------
    >>> x = bench_inputs(np.dtype(np.float32), 1000)
    >>> x.dtype, bool((np.abs(x) >= 1e-6).all() and (np.abs(x) <= 1e6).all())
    (dtype('float32'), True)
    """
    rng = np.random.default_rng(seed)
    magnitude = 10.0 ** rng.uniform(-BENCH_DECADES, BENCH_DECADES, n)
    return np.where(rng.random(n) < 0.5, -magnitude, magnitude).astype(dtype)
