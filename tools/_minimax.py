"""Lawson's iteration: the minimax fit the kernels' polynomials come from (tools only)."""

from __future__ import annotations

import numpy as np


def lawson(basis: np.ndarray, target: np.ndarray, iterations: int = 300) -> np.ndarray:
    """Coefficients ``c`` that minimise ``max |basis @ c - target|`` over the rows.

    Weighted least squares whose weights grow where the error is largest
    (Lawson's iteration); it converges to the minimax solution on the
    points, slowly: reruns agree to about 1e-9.
    """
    weights = np.full(target.size, 1.0 / target.size)
    coefficients = np.zeros(basis.shape[1])
    for _ in range(iterations):
        root = np.sqrt(weights)
        coefficients = np.linalg.lstsq(basis * root[:, None], target * root, rcond=None)[0]
        error = np.abs(basis @ coefficients - target)
        weights = weights * error
        weights /= weights.sum()
    return coefficients
