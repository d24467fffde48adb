"""The host side of the ``jax.pure_callback`` route: cbrtgrad's api on the arrays XLA hands over.

XLA calls these on one of its own threads, which run with subnormals flushed
(FTZ/DAZ): each call runs inside :class:`~cbrtgrad.kernels.cpu.denormals.IEEEDenormals`,
so every float instruction on the way (the api's half-to-float32 widening,
ml_dtypes' conversions, the kernels themselves) sees subnormals as IEEE
says, and XLA's thread gets its mode back after. Half precision is written
into a half ``out=`` array, which the api rounds correctly in its own
precision (:mod:`cbrtgrad.arrays.half`), never through float32 and then again.

IEEE exceptions are not reported: ``jnp`` functions raise no warning for a
division by zero either (the gradient at ``y = 0``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import api
from ..arrays import half as _half
from ..kernels.cpu.denormals import IEEEDenormals


def _result(compute: Any, like: np.ndarray) -> np.ndarray:
    # compute(out) with out of like's dtype for half precision, else its own result.
    with IEEEDenormals(), np.errstate(all="ignore"):
        if _half.is_half(like.dtype):
            out = np.empty(like.shape, like.dtype)
            compute(out)
            return out
        return np.asarray(compute(None), like.dtype)


def forward(x: Any) -> np.ndarray:
    """``cbrtgrad.cbrt(x)`` in ``x``'s own dtype (the callback of the forward primitive).

    Examples
    --------
    >>> import ml_dtypes
    >>> forward(np.array([8.0, -27.0], ml_dtypes.bfloat16))
    array([2, -3], dtype=...bfloat16...)
    """
    x = np.asarray(x)
    return _result(lambda out: api.cbrt(x, out=out), x)


def gradient(g: Any, y: Any) -> np.ndarray:
    """``cbrtgrad.cbrt_grad(g, y)`` in the operands' dtype (the gradient primitive's callback).

    Examples
    --------
    >>> gradient(np.float32([12.0, 1.0]), np.float32([2.0, 0.0]))
    array([ 1., inf], dtype=float32)
    """
    g, y = np.asarray(g), np.asarray(y)
    return _result(lambda out: api.cbrt_grad(g, y, out=out), y)
