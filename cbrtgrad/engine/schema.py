"""Op schemas: what the engine knows about an op, as data.

Each op declares one :class:`OpSchema` next to its node class in
:mod:`cbrtgrad.engine.ops`, and the engine reads every field: the AMP policy
in one place (:func:`cbrtgrad.engine.ops.autocast_inputs`), what to save when
it records the op (``ops.apply``), the arity against the
node's forward when the class is defined (``Node.__init_subclass__``), and
the ``ufunc`` that numpy calls on a Tensor route to the op
(``ops.UFUNC_OPS``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from ..kernels.kernel_ops import KernelOp


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


class Saves(enum.Enum):
    """What the engine keeps of an op for its backward, besides shapes and parameters.

    Examples
    --------
    >>> Saves.OUTPUT.value
    'output'
    """

    #: Nothing (the gradient needs only shapes or parameters, kept by the node's ``save``).
    NOTHING = "nothing"
    #: The inputs (``a * b`` needs ``a`` and ``b``).
    INPUTS = "inputs"
    #: The output, not the input (``cbrt``: the gradient ``g / (3 y^2)`` needs ``y`` only).
    OUTPUT = "output"


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
        Number of tensor inputs: the positional inputs of the node's forward.
    saves : Saves
        What the engine saves for the backward (in ``node.saved``), with a
        version check against in-place writes.
    ufunc : numpy.ufunc, optional
        The numpy ufunc that ``Tensor.__array_ufunc__`` routes to this op.

    Examples
    --------
    >>> import numpy as np
    >>> s = OpSchema(
    ...     name="cube_root", amp_policy=AmpPolicy.FORCE_FP32, saves=Saves.OUTPUT, ufunc=np.cbrt
    ... )
    >>> s.name, s.amp_policy, s.arity, s.saves
    ('cube_root', <AmpPolicy.FORCE_FP32: 'force_fp32'>, 1, <Saves.OUTPUT: 'output'>)
    """

    name: str
    amp_policy: AmpPolicy = AmpPolicy.PROMOTE
    arity: int = 1
    saves: Saves = Saves.NOTHING
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
        if not isinstance(self.saves, Saves):
            raise TypeError(f"cbrtgrad: OpSchema saves must be a Saves, got {self.saves!r}")


def schema_of(op: KernelOp) -> OpSchema:
    """The schema of a kernel op, from its one entry (:mod:`cbrtgrad.kernels.kernel_ops`).

    Parameters
    ----------
    op : KernelOp
        An entry of ``cbrtgrad.kernels.kernel_ops.KERNEL_OPS``.

    Returns
    -------
    OpSchema
        Its name, arity, what it saves, its AMP policy and the numpy ufunc
        routed to it.

    Examples
    --------
    >>> from cbrtgrad.kernels.kernel_ops import CUBE_ROOT
    >>> schema_of(CUBE_ROOT).saves, schema_of(CUBE_ROOT).amp_policy
    (<Saves.OUTPUT: 'output'>, <AmpPolicy.FORCE_FP32: 'force_fp32'>)
    """
    return OpSchema(
        name=op.name,
        amp_policy=AmpPolicy(op.amp_policy),
        arity=op.arity,
        saves=Saves(op.saves),
        ufunc=op.numpy_ufunc,
    )
