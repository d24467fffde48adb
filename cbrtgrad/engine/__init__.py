"""The graph engine: reverse-mode gradients through ``cbrt`` and the ops of a loss.

Examples
--------
>>> import numpy as np, cbrtgrad as cg
>>> x = cg.Tensor(np.linspace(-8, 8, 4), requires_grad=True)
>>> loss = (cg.cbrt(x) * 2.0 + x).sum()
>>> loss.backward()
>>> np.allclose(x.grad, 2 / (3 * np.cbrt(x.data) ** 2) + 1)
True
"""

# Each op module enters its functions in the op table (op_table.py) when
# imported, and Tensor dispatches through it: importing them all here is
# what makes every Tensor operator and method work.
from . import cube_root, graph, methods, ops, shape_ops  # noqa: F401 (they fill the op table)
from .cube_root import CubeRootBackward, CubeRootGradBackward
from .functional import grad, value_and_grad
from .grad_mode import autocast, detect_anomaly, enable_grad, no_grad
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .node import Node
from .ops import (
    AddBackward,
    DivideBackward,
    MultiplyBackward,
    NegativeBackward,
    PowerBackward,
    SubtractBackward,
)
from .recording import CastBackward
from .schema import AmpPolicy, OpSchema, Saves
from .shape_ops import (
    BroadcastToBackward,
    MeanBackward,
    ReshapeBackward,
    SumBackward,
    SumToBackward,
)
from .tensor import Tensor

# The table's method functions become Tensor's methods (one call, not two: methods.bind).
methods.bind(Tensor)

__all__ = [
    "AddBackward",
    "AmpPolicy",
    "BroadcastToBackward",
    "CastBackward",
    "CubeRootBackward",
    "CubeRootGradBackward",
    "DivideBackward",
    "GradcheckError",
    "MeanBackward",
    "MultiplyBackward",
    "NegativeBackward",
    "Node",
    "OpSchema",
    "PowerBackward",
    "ReshapeBackward",
    "Saves",
    "SubtractBackward",
    "SumBackward",
    "SumToBackward",
    "Tensor",
    "autocast",
    "detect_anomaly",
    "enable_grad",
    "grad",
    "gradcheck",
    "gradgradcheck",
    "no_grad",
    "value_and_grad",
]
