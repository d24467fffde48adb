"""The kernel ops, each described once, as data: what cbrtgrad's own kernels compute.

A *kernel op* is a computation cbrtgrad has its own correctly rounded kernels
for: the cube root, its gradient from the saved output, and the two fused in
one pass over memory. Each has one :class:`KernelOp` entry in
:data:`KERNEL_OPS`, and every layer reads its facts from there rather than
spelling them again:

- the kernels: the single-thread ufuncs (``cpu_ufuncs.UFUNCS``: name, inputs,
  docstring), the ``prange`` loops of each op (:attr:`KernelOp.parallel_loops`),
  what each runs (``cpu.loop_plan``, ``cbrtgrad info``), the block functions of
  ``cbrtgrad.numba``, the XLA FFI handlers and MLX loops of the elementary ops,
  the CUDA kernels' outputs;
- ``cbrtgrad warm`` and the dask worker plugin: which kernels exist to compile
  or load;
- the backends: the protocol's method of each op is named :attr:`KernelOp.name`
  and takes :attr:`KernelOp.inputs` (``tests/test_kernel_ops.py`` checks every
  backend against this table);
- the api: the public function :attr:`KernelOp.function`;
- the graph engine: the op's schema (name, arity, what it saves, its AMP
  policy, the numpy ufunc routed to it) is :func:`cbrtgrad.engine.schema.schema_of`
  this entry, and the PyTorch bridge's custom ops are named by it.

Nothing here imports numba: the api and the engine read it at import time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: The dtypes every kernel op is compiled for (half precision is computed in
#: float32, integers in float64: cbrtgrad.arrays.dtypes).
DTYPES = ("float32", "float64")


@dataclass(frozen=True, slots=True)
class KernelOp:
    """One kernel op: its names, operands, kernels and engine facts.

    Parameters
    ----------
    name : str
        The op's name: the backends' method, the ufunc's name, the name IEEE
        warnings give, the engine's schema and the PyTorch op
        (``torch.ops.cbrtgrad.<name>``).
    function : str
        The public function of :mod:`cbrtgrad` that runs it.
    inputs, outputs : tuple of str
        The operands' names, in order (the backends' and the api's positional
        parameters; the results).
    kernel : str
        The kernels' name for it inside :mod:`cbrtgrad.kernels` (block loops,
        ``prange`` loops, CUDA kernels, XLA handlers, MLX loops).
    summary : str
        One line: what it computes (the ufunc's docstring).
    saves : {"output", "inputs"}
        What the graph engine keeps for its backward (``engine.schema.Saves``).
    amp_policy : {"force_fp32", "promote"}
        What autocast does to its inputs (``engine.schema.AmpPolicy``).
    numpy_ufunc : numpy.ufunc, optional
        The numpy ufunc that a Tensor routes to this op (``np.cbrt``).
    parts : tuple of str
        For a fused op, the elementary ops it runs per block, in order; empty
        for an elementary op, which has its own scalar formula.
    parallel_loops : tuple of str
        The ``prange`` loops that run it (``kernels.prange_loops.LOOPS``).
    variants : mapping of str to str
        For an elementary op, what its formula does, by dtype (``cbrtgrad info``).

    Examples
    --------
    >>> op = KERNEL_OPS["cube_root_grad"]
    >>> op.function, op.inputs, op.arity, op.elementary
    ('cbrt_grad', ('g', 'y'), 2, True)
    >>> KERNEL_OPS["cube_root_and_grad"].kernels
    ('forward', 'grad')
    """

    name: str
    function: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    kernel: str
    summary: str
    saves: str
    amp_policy: str
    numpy_ufunc: Any = None
    parts: tuple[str, ...] = ()
    parallel_loops: tuple[str, ...] = ()
    variants: Mapping[str, str] = field(default_factory=dict)

    @property
    def arity(self) -> int:
        """The number of inputs."""
        return len(self.inputs)

    @property
    def argument(self) -> str:
        """The inputs' names as errors name them (``"g, y"``: ``compute_dtype_of``'s argument)."""
        return ", ".join(self.inputs)

    @property
    def kernels(self) -> tuple[str, ...]:
        """The kernels its loops run: its own, or a fused op's parts' in order."""
        return tuple(KERNEL_OPS[part].kernel for part in self.parts) or (self.kernel,)

    @property
    def elementary(self) -> bool:
        """True for an op with its own formula (and ufunc); False for a fused one."""
        return not self.parts


CUBE_ROOT = KernelOp(
    name="cube_root",
    function="cbrt",
    inputs=("x",),
    outputs=("y",),
    kernel="forward",
    summary="The real cube root (cbrtgrad).",
    saves="output",
    amp_policy="force_fp32",
    numpy_ufunc=np.cbrt,
    parallel_loops=("forward",),
    variants={
        "float32": "float32 Newton step, float64 quadratic, exact midpoint test",
        "float64": "correctly rounded: fast path, exact second pass for hard lanes",
    },
)

CUBE_ROOT_GRAD = KernelOp(
    name="cube_root_grad",
    function="cbrt_grad",
    inputs=("g", "y"),
    outputs=("dx",),
    kernel="grad",
    summary="g / (3 y^2), the cube root's gradient from its output y (cbrtgrad).",
    saves="inputs",
    amp_policy="promote",
    # grad_constant: one scalar g for every y (the gradient of a sum).
    parallel_loops=("grad", "grad_constant"),
    variants={
        "float32": "correctly rounded: float64 quotient, exact pass for hard lanes",
        "float64": "correctly rounded: corrected quotient, exact pass for hard lanes",
    },
)

CUBE_ROOT_AND_GRAD = KernelOp(
    name="cube_root_and_grad",
    function="cbrt_and_grad",
    inputs=("x", "g"),
    outputs=("y", "dx"),
    kernel="fused",
    summary="(cbrt(x), g / (3 cbrt(x)^2)) in one pass over memory (cbrtgrad).",
    saves="output",
    amp_policy="force_fp32",
    parts=("cube_root", "cube_root_grad"),
    parallel_loops=("fused",),
)

#: Every kernel op, by name.
KERNEL_OPS: dict[str, KernelOp] = {
    op.name: op for op in (CUBE_ROOT, CUBE_ROOT_GRAD, CUBE_ROOT_AND_GRAD)
}

#: The ops with a formula, a ufunc and per-target kernels of their own.
ELEMENTARY: tuple[KernelOp, ...] = tuple(op for op in KERNEL_OPS.values() if op.elementary)

#: Every op by its kernels' name (``"forward"``, ``"grad"``, ``"fused"``).
BY_KERNEL: dict[str, KernelOp] = {op.kernel: op for op in KERNEL_OPS.values()}


def elementary_op(name: Any, argument: str = "op") -> KernelOp:
    """The elementary op named ``name``, or a ValueError naming ``argument``.

    Parameters
    ----------
    name : str
        ``"cube_root"`` or ``"cube_root_grad"``.
    argument : str
        The caller's parameter, for the error.

    Returns
    -------
    KernelOp

    Raises
    ------
    ValueError
        For any other value.

    Examples
    --------
    >>> elementary_op("cube_root").kernel
    'forward'
    >>> elementary_op("cube_root_and_grad", "ops")
    Traceback (most recent call last):
    ...
    ValueError: cbrtgrad: ops must be 'cube_root' or 'cube_root_grad', got 'cube_root_and_grad'
    """
    op = KERNEL_OPS.get(name) if isinstance(name, str) else None
    if op is None or not op.elementary:
        names = " or ".join(repr(op.name) for op in ELEMENTARY)
        raise ValueError(f"cbrtgrad: {argument} must be {names}, got {name!r}")
    return op
