"""cbrtgrad: the element-wise cube root and its gradient.

Correctly rounded in float32 and float64, differentiable,
on CPU (numba), GPU (CUDA) and dask.

Examples
--------
>>> import numpy as np, cbrtgrad
>>> y = cbrtgrad.cbrt(np.array([-8.0, 27.0]))
>>> y, cbrtgrad.cbrt_grad(np.ones(2), y)
(array([-2.,  3.]), array([0.08333333, 0.03703704]))
"""

from . import backends, ufunc
from ._version import __version__
from .api import cbrt, cbrt_and_grad, cbrt_grad
from .build.cache import KernelCacheWarning
from .engine import (
    AmpPolicy,
    CubeRootBackward,
    GradcheckError,
    OpSchema,
    Tensor,
    autocast,
    detect_anomaly,
    enable_grad,
    grad,
    gradcheck,
    gradgradcheck,
    no_grad,
    value_and_grad,
)
from .warming import warm

__all__ = [
    "AmpPolicy",
    "CubeRootBackward",
    "GradcheckError",
    "KernelCacheWarning",
    "OpSchema",
    "Tensor",
    "__version__",
    "autocast",
    "backends",
    "cbrt",
    "cbrt_and_grad",
    "cbrt_grad",
    "detect_anomaly",
    "enable_grad",
    "grad",
    "gradcheck",
    "gradgradcheck",
    "no_grad",
    "ufunc",
    "value_and_grad",
    "warm",
]
