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

from . import graph, ops, tensor
from .functional import grad, value_and_grad
from .grad_mode import autocast, detect_anomaly, enable_grad, no_grad
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .node import Node
from .ops import (
    AddBackward,
    BroadcastToBackward,
    CastBackward,
    CubeRootBackward,
    DivideBackward,
    MeanBackward,
    MultiplyBackward,
    NegativeBackward,
    PowerBackward,
    ReshapeBackward,
    SubtractBackward,
    SumBackward,
    SumToBackward,
)
from .schema import AmpPolicy, OpSchema, Saves
from .tensor import Tensor

# tensor.py's operators and backward call these two modules, which import it:
# they are bound into it here, once both exist (see the TYPE_CHECKING imports there).
tensor.ops = ops
tensor.graph = graph

__all__ = [
    "AddBackward",
    "AmpPolicy",
    "BroadcastToBackward",
    "CastBackward",
    "CubeRootBackward",
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
