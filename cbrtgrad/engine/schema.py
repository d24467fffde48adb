"""Op schemas: what the engine knows about an op, as data.

Each op declares one :class:`OpSchema` next to its node class in
:mod:`cbrtgrad.engine.ops`; the engine reads the AMP policy from it in one
place (:func:`cbrtgrad.engine.ops.autocast_inputs`) and routes numpy ufuncs to
the op through its ``ufunc`` field.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


class AmpPolicy(enum.Enum):
    """What :func:`cbrtgrad.autocast` does to an op's floating-point inputs.

    Examples
    --------
    >>> AmpPolicy.FORCE_FP32.value
    'force_fp32'
    """

    #: Use the inputs as they are; numpy promotion decides the result dtype.
    PROMOTE = "promote"
    #: Cast float16 inputs to float32 first (PyTorch's ``fp32`` autocast list).
    FORCE_FP32 = "force_fp32"


@dataclass(frozen=True, slots=True)
class OpSchema:
    """The declaration of one differentiable op.

    Parameters
    ----------
    name : str
        The op's name (``"cube_root"``); the node class is named after it
        (``CubeRootBackward``).
    amp_policy : AmpPolicy
        What autocast does to the op's inputs.
    arity : int
        Number of tensor inputs.
    ufunc : numpy.ufunc, optional
        The numpy ufunc that ``Tensor.__array_ufunc__`` routes to this op.

    Examples
    --------
    >>> import numpy as np
    >>> s = OpSchema(name="cube_root", amp_policy=AmpPolicy.FORCE_FP32, ufunc=np.cbrt)
    >>> s.name, s.amp_policy, s.arity
    ('cube_root', <AmpPolicy.FORCE_FP32: 'force_fp32'>, 1)
    """

    name: str
    amp_policy: AmpPolicy = AmpPolicy.PROMOTE
    arity: int = 1
    ufunc: Any = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"cbrtgrad: OpSchema name must be an identifier, got {self.name!r}")
        if not isinstance(self.amp_policy, AmpPolicy):
            raise TypeError(
                f"cbrtgrad: OpSchema amp_policy must be an AmpPolicy, got {self.amp_policy!r}"
            )
        if not isinstance(self.arity, int) or self.arity < 1:
            raise ValueError(f"cbrtgrad: OpSchema arity must be an int >= 1, got {self.arity!r}")
