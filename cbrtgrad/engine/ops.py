"""The arithmetic ops: ``+ - * /``, negation and ``**`` a scalar, with numpy broadcasting.

Each op is a ``...Backward`` node class holding, side by side, its
:class:`~cbrtgrad.OpSchema` (name, AMP policy, arity, what it saves, ufunc:
data the engine reads), its ``forward`` and its vector-Jacobian product
``vjp``, and the op function below that records it through
:func:`~cbrtgrad.engine.recording.apply`; the function's ``@routes`` line
enters it in the op table (op_table.py), which Tensor's operators and
numpy's ufuncs on Tensors dispatch through.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..arrays import dtypes as _dtypes
from ..arrays.kinds import is_dask_array
from .array_api import StandardArray, is_standard_array
from .data import refuse_masked
from .node import Node
from .op_table import routes
from .recording import apply
from .schema import AmpPolicy, OpSchema, Saves
from .shape_ops import reduce_to
from .tensor import Tensor

_SCALARS = (int, float, np.integer, np.floating, np.bool_, bool)


def _operand(value: Any, name: str) -> Any:
    """A Tensor, a real scalar or an ndarray (or dask array) constant; else a TypeError."""
    if isinstance(value, (Tensor, float, int)):
        return value
    if is_dask_array(value):
        _dtypes.compute_dtype(value.dtype, name)
        return value
    if is_standard_array(value):  # another library's constant (the op refuses numpy's mixed in)
        standard = StandardArray(value)
        _dtypes.compute_dtype(standard.dtype, name)
        return standard
    if isinstance(value, (np.ndarray, np.generic, list, tuple)):
        refuse_masked(value, name)
        array = np.asarray(value)
        _dtypes.compute_dtype(array.dtype, name)
        return array
    raise TypeError(
        f"cbrtgrad: {name} must be a Tensor, an ndarray or a real scalar (or a dask array, or "
        f"another array API library's), got {type(value).__name__}"
    )


class AddBackward(Node):
    """``a + b`` with numpy broadcasting."""

    __slots__ = ("shapes",)
    schema = OpSchema(name="add", arity=2, ufunc=np.add)

    @staticmethod
    def forward(backend: Any, a: Any, b: Any) -> Any:
        return np.add(a, b)

    def save(
        self, inputs: tuple[Any, ...], output: Tensor, backend: Any, params: dict[str, Any]
    ) -> None:
        self.shapes = tuple(np.shape(t) for t in inputs)

    def vjp(self, g: Any) -> tuple[Any, ...]:
        a, b = self.next_functions
        return (
            None if a is None else reduce_to(g, self.shapes[0]),
            None if b is None else reduce_to(g, self.shapes[1]),
        )


class SubtractBackward(AddBackward):
    """``a - b`` with numpy broadcasting."""

    __slots__ = ()
    schema = OpSchema(name="subtract", arity=2, ufunc=np.subtract)

    @staticmethod
    def forward(backend: Any, a: Any, b: Any) -> Any:
        return np.subtract(a, b)

    def vjp(self, g: Any) -> tuple[Any, ...]:
        a, b = self.next_functions
        return (
            None if a is None else reduce_to(g, self.shapes[0]),
            None if b is None else reduce_to(-g, self.shapes[1]),
        )


class MultiplyBackward(Node):
    """``a * b``; saves both inputs."""

    __slots__ = ()
    schema = OpSchema(name="multiply", arity=2, saves=Saves.INPUTS, ufunc=np.multiply)

    @staticmethod
    def forward(backend: Any, a: Any, b: Any) -> Any:
        return np.multiply(a, b)

    def vjp(self, g: Any) -> tuple[Any, ...]:
        a, b = self.saved_for(g)
        ea, eb = self.next_functions
        return (
            None if ea is None else reduce_to(g * b, np.shape(a)),
            None if eb is None else reduce_to(g * a, np.shape(b)),
        )


class DivideBackward(Node):
    """``a / b``; saves both inputs.

    NOTE: at ``b = 0`` the gradients are IEEE infinities or nan, as the
    forward is.
    """

    __slots__ = ()
    schema = OpSchema(name="divide", arity=2, saves=Saves.INPUTS, ufunc=np.true_divide)

    @staticmethod
    def forward(backend: Any, a: Any, b: Any) -> Any:
        return np.true_divide(a, b)

    def vjp(self, g: Any) -> tuple[Any, ...]:
        a, b = self.saved_for(g)
        ea, eb = self.next_functions
        ga = g / b
        # d(a/b)/db = -a / b^2, written as -(g / b) * a / b to reuse g / b.
        return (
            None if ea is None else reduce_to(ga, np.shape(a)),
            None if eb is None else reduce_to(-ga * a / b, np.shape(b)),
        )


class NegativeBackward(Node):
    """``-a``."""

    __slots__ = ()
    schema = OpSchema(name="negative", ufunc=np.negative)

    @staticmethod
    def forward(backend: Any, a: Any) -> Any:
        return np.negative(a)

    def vjp(self, g: Any) -> tuple[Any, ...]:
        return (-g,)


class PowerBackward(Node):
    """``a ** p`` for a real scalar exponent ``p``; saves the input.

    NOTE: for ``0 < p < 1`` the gradient at ``a = 0`` is ``inf`` (IEEE), and
    for ``p = 0`` it is exactly 0 (not ``0 * a**-1``, which is nan at 0).
    """

    __slots__ = ("exponent",)
    schema = OpSchema(
        name="power", amp_policy=AmpPolicy.FORCE_FP32, saves=Saves.INPUTS, ufunc=np.power
    )

    exponent: float

    @staticmethod
    def forward(backend: Any, a: Any, *, exponent: Any) -> Any:
        return np.power(a, exponent)

    def save(
        self, inputs: tuple[Any, ...], output: Tensor, backend: Any, params: dict[str, Any]
    ) -> None:
        self.exponent = params["exponent"]

    def vjp(self, g: Any) -> tuple[Any, ...]:
        (a,) = self.saved_for(g)
        p = self.exponent
        if p == 0:
            return (g * 0.0,)
        return (g * (a ** (p - 1) * p),)


# -- op functions ---------------------------------------------------------------
@routes(np.add)
def add(a: Any, b: Any) -> Tensor:
    """``a + b`` (broadcasting)."""
    return apply(AddBackward, (_operand(a, "a"), _operand(b, "b")))


@routes(np.subtract)
def subtract(a: Any, b: Any) -> Tensor:
    """``a - b`` (broadcasting)."""
    return apply(SubtractBackward, (_operand(a, "a"), _operand(b, "b")))


@routes(np.multiply)
def multiply(a: Any, b: Any) -> Tensor:
    """``a * b`` (broadcasting)."""
    return apply(MultiplyBackward, (_operand(a, "a"), _operand(b, "b")))


@routes(np.true_divide)
def divide(a: Any, b: Any) -> Tensor:
    """``a / b`` (broadcasting)."""
    return apply(DivideBackward, (_operand(a, "a"), _operand(b, "b")))


@routes(np.negative)
def negative(a: Any) -> Tensor:
    """``-a``."""
    return apply(NegativeBackward, (_operand(a, "a"),))


@routes(np.power)
def power(a: Any, exponent: Any) -> Tensor:
    """``a ** exponent`` for a real scalar ``exponent``.

    Examples
    --------
    >>> import numpy as np, cbrtgrad as cg
    >>> (cg.Tensor(np.array([2.0, 3.0])) ** 2).data
    array([4., 9.])
    """
    if isinstance(exponent, Tensor) or not isinstance(exponent, _SCALARS):
        raise TypeError(
            f"cbrtgrad: the exponent of ** must be a real scalar, got {type(exponent).__name__}"
        )
    if not isinstance(a, Tensor):
        raise TypeError(f"cbrtgrad: the base of ** must be a Tensor, got {type(a).__name__}")
    return apply(PowerBackward, (a,), exponent=float(exponent))
