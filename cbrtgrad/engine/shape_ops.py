"""The reductions and shape ops (``sum``, ``mean``, ``reshape``, broadcasting), and the
gradient shape helpers the other ops use (:func:`reduce_to`, :func:`expand`).

Laid out as ops.py: each node class with its schema, ``forward`` and
``vjp``, then the op functions. The helpers take an ndarray, a dask array
or (for the differentiable backward) a Tensor.
"""

from __future__ import annotations

import builtins
import math
from typing import Any

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

from ..arrays import half as _half
from ..arrays.kinds import is_dask_array
from ..backends import _registry
from ..backends._protocol import SUM_MIN_SIZE
from .array_api import StandardArray
from .grad_mode import grad_enabled as _grad_enabled
from .node import Node
from .op_table import routes
from .recording import apply, cast, record_node
from .schema import OpSchema
from .tensor import Tensor

_F32 = np.dtype(np.float32)
#: The params of ``.sum()`` (what its node's ``save`` reads).
_ALL_AXES: dict[str, Any] = {"axis": None, "keepdims": False}
_ZEROS = {np.dtype(t): np.zeros((), t) for t in (np.float32, np.float64)}

#: Broadcast gradients up to this many elements are materialised (see expand).
_MATERIALISE_MAX = 4096

#: numpy 2.3 added ``out=...``: a reduction then returns a 0-d array instead of
#: a scalar that ``apply`` would wrap again (its cost: docs/engine.md, "Performance").
_REDUCE_TO_ARRAY = np.lib.NumpyVersion(np.__version__) >= "2.3.0"


def _one_element_sum(a: np.ndarray) -> np.ndarray | None:
    """The 0-d sum of a one-element float32/float64 ``a``, as numpy's reduction gives it; else None.

    NOTE: numpy's reduction of one element adds it to the identity 0.0 (so
    -0.0 gives 0.0 and a signalling nan is quieted): that one add gives the
    same bits (hot path: a one-element loss). It is done on the Python float
    (an IEEE double add, as numpy's loop; a float32 value widens, adds 0.0
    and narrows back exactly), which costs less than a ufunc call and a
    reshape; a nan takes numpy's add, which quiets a signalling one and
    raises its invalid flag under numpy's errstate, as the reduction does.
    """
    zero = _ZEROS.get(a.dtype)
    if zero is None:
        return None
    value = a.item()
    if value == value:  # not a nan
        return np.array(value + 0.0, a.dtype)
    return np.add(a, zero).reshape(())


class SumBackward(Node):
    """``a.sum(axis, keepdims)``; the gradient is broadcast back.

    For a dask input the gradient is broadcast back lazily, in the input's
    chunks (``chunks``), so the backward of a dask graph stays a dask graph
    and never materialises an array of the input's size on the client.
    """

    __slots__ = ("in_shape", "kept_shape", "chunks")
    schema = OpSchema(name="sum", ufunc=None)

    in_shape: tuple[int, ...]
    kept_shape: tuple[int, ...]
    chunks: Any

    @staticmethod
    def forward(backend: Any, a: Any, *, axis: Any, keepdims: Any) -> Any:
        if type(a) is StandardArray:
            return a.sum(axis, keepdims=keepdims)  # float16 accumulates in float32 there too
        if type(a) is not np.ndarray and is_dask_array(a):
            return a.sum(axis=axis, keepdims=keepdims)  # dask has no ufunc.reduce
        if axis is None and a.size == 1:
            total = _one_element_sum(a)
            if total is not None:
                return total.reshape(a.shape) if keepdims else total
        # A backend may bring its own sum (the parallel one: large float32
        # sums on all threads, in float64); the others are numpy's. NOTE:
        # ``sum`` names no backend, so large arrays ask the registry (which
        # follows use_backend and CBRTGRAD_BACKEND); small ones skip the lookup.
        if type(a) is np.ndarray and a.size >= SUM_MIN_SIZE:
            chosen = _registry.resolve(None, a) if backend is None else backend
            backend_sum = getattr(chosen, "sum", None)
            if backend_sum is not None:
                return backend_sum(a, axis=axis, keepdims=keepdims)
        if a.dtype.itemsize == 2 and _half.is_half(a.dtype):
            # NOTE: half precision accumulates in float32, rounded once at the end.
            wide = np.add.reduce(a, axis=axis, keepdims=keepdims, dtype=_F32)
            return np.asarray(wide).astype(a.dtype)
        if _REDUCE_TO_ARRAY:
            return np.add.reduce(a, axis=axis, keepdims=keepdims, out=...)
        return np.add.reduce(a, axis=axis, keepdims=keepdims)

    def save(
        self, inputs: tuple[Any, ...], output: Tensor, backend: Any, params: dict[str, Any]
    ) -> None:
        data = inputs[0]._data
        shape = data.shape
        axis = params["axis"]
        self.in_shape = shape
        self.chunks = data.chunks if type(data) is not np.ndarray and is_dask_array(data) else None
        if axis is None:
            self.kept_shape = (1,) * len(shape)
        else:
            self.kept_shape = tuple(1 if i in axis else n for i, n in enumerate(shape))

    def vjp(self, g: Any) -> tuple[Any, ...]:
        kept = self.kept_shape
        if kept == self.in_shape and type(g) is np.ndarray and self.chunks is None:
            # NOTE: hot path (a one-element input): no axis longer than 1 was
            # summed, so the gradient is g in the input's shape: no array made.
            return (g if g.shape == kept else g.reshape(kept),)
        return (expand(reshape_grad(g, kept), self.in_shape, self.chunks),)


class MeanBackward(SumBackward):
    """``a.mean(axis, keepdims)``; the gradient is broadcast back and divided."""

    __slots__ = ("count",)
    schema = OpSchema(name="mean", ufunc=None)

    count: int

    @staticmethod
    def forward(backend: Any, a: Any, *, axis: Any, keepdims: bool) -> Any:
        if type(a) is StandardArray:
            return a.mean(axis, keepdims=keepdims)  # float16 accumulates in float32 there too
        if a.dtype.itemsize == 2 and _half.is_half(a.dtype):
            # NOTE: half precision accumulates in float32 (numpy does for
            # float16, not for bfloat16), rounded once at the end.
            return np.asarray(np.mean(a, axis=axis, keepdims=keepdims, dtype=_F32)).astype(a.dtype)
        return np.mean(a, axis=axis, keepdims=keepdims)

    def save(
        self, inputs: tuple[Any, ...], output: Tensor, backend: Any, params: dict[str, Any]
    ) -> None:
        super().save(inputs, output, backend, params)
        # Reduced axes have 1 in kept_shape (unreduced axes of length 1 add a factor 1).
        self.count = math.prod(
            n for n, k in zip(self.in_shape, self.kept_shape, strict=True) if k == 1
        )

    def vjp(self, g: Any) -> tuple[Any, ...]:
        dt = g.dtype
        if dt.itemsize == 2 and _half.is_half(dt):
            # NOTE: the count does not fit half precision (70,000 > 65,504 is
            # inf in float16): divided in float32, rounded once.
            g = cast(g, _F32) if type(g) is Tensor else g.astype(_F32)
            scaled = g / self.count
            g = cast(scaled, dt) if type(scaled) is Tensor else scaled.astype(dt)
        else:
            g = g / self.count
        return (expand(reshape_grad(g, self.kept_shape), self.in_shape, self.chunks),)


class ReshapeBackward(Node):
    """``a.reshape(shape)``."""

    __slots__ = ("in_shape",)
    schema = OpSchema(name="reshape")

    in_shape: tuple[int, ...]

    @staticmethod
    def forward(backend: Any, a: Any, *, shape: tuple[int, ...]) -> Any:
        return np.reshape(a, shape)

    def save(
        self, inputs: tuple[Any, ...], output: Tensor, backend: Any, params: dict[str, Any]
    ) -> None:
        self.in_shape = inputs[0].shape

    def vjp(self, g: Any) -> tuple[Any, ...]:
        return (reshape_grad(g, self.in_shape),)


class BroadcastToBackward(ReshapeBackward):
    """``broadcast_to(a, shape)``; the gradient is summed back."""

    __slots__ = ()
    schema = OpSchema(name="broadcast_to")

    @staticmethod
    def forward(backend: Any, a: Any, *, shape: tuple[int, ...]) -> Any:
        if type(a) is StandardArray:
            return a.broadcast_to(shape)
        return np.broadcast_to(a, shape)

    def vjp(self, g: Any) -> tuple[Any, ...]:
        return (reduce_to(g, self.in_shape),)


class SumToBackward(ReshapeBackward):
    """Sum a broadcast array back to ``shape`` (the adjoint of ``broadcast_to``)."""

    __slots__ = ()
    schema = OpSchema(name="sum_to")

    @staticmethod
    def forward(backend: Any, a: Any, *, shape: tuple[int, ...]) -> Any:
        return reduce_to(a, shape)

    def vjp(self, g: Any) -> tuple[Any, ...]:
        return (expand(g, self.in_shape),)


# -- op functions ---------------------------------------------------------------
def _axes(a: Tensor, axis: Any) -> tuple[int, ...] | None:
    # None (all axes) is kept as None: numpy's fastest reduction path.
    if axis is None:
        return None
    return normalize_axis_tuple(axis, a.ndim, "axis")


@routes(method="sum")
def _sum_method(
    a: Tensor, axis: Any = None, dtype: Any = None, out: Any = None, *, keepdims: bool = False
) -> Tensor:
    """``Tensor.sum`` (its docstring: methods.Methods.sum)."""
    if axis is None and dtype is None and out is None and keepdims is False:
        data = a._data
        if type(data) is np.ndarray:
            # NOTE: hot path: ``.sum()`` of an ndarray is apply's unary case
            # without its keywords (sum's PROMOTE policy: autocast does nothing).
            total = _one_element_sum(data) if data.size == 1 else None
            if total is None:
                total = SumBackward.forward(None, data, axis=None, keepdims=False)
                if type(total) is not np.ndarray:
                    total = np.asarray(total)  # a numpy scalar (numpy < 2.3, a backend's sum)
            if a._requires_grad and _grad_enabled():
                # NOTE: hot path: SumBackward.save's case for all axes of an
                # ndarray, without its call.
                out = record_node(SumBackward, (a,), total, None, _ALL_AXES, save=False)
                node = out.grad_fn
                node.in_shape = shape = data.shape
                node.kept_shape = (1,) * len(shape)
                node.chunks = None
                return out
            return Tensor._make(total, None)
        return apply(SumBackward, (a,), axis=None, keepdims=False)
    return reduce(SumBackward, a, axis, dtype, out, keepdims)


@routes(method="mean")
def _mean_method(
    a: Tensor, axis: Any = None, dtype: Any = None, out: Any = None, *, keepdims: bool = False
) -> Tensor:
    """``Tensor.mean`` (its docstring: methods.Methods.mean)."""
    return reduce(MeanBackward, a, axis, dtype, out, keepdims)


def reduce(
    op: type[SumBackward],
    a: Tensor,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    keepdims: bool = False,
) -> Tensor:
    """``sum`` or ``mean`` (``op``) over ``axis``: what ``Tensor.sum``/``Tensor.mean`` run.

    ``dtype`` and ``out`` are there for numpy's ``np.sum``/``np.mean`` signature only.
    """
    if dtype is not None or out is not None:
        raise TypeError(f"cbrtgrad: Tensor.{op.schema.name} does not take dtype= or out=")
    if axis is None and keepdims is False:  # NOTE: hot path: ``.sum()``
        return apply(op, (a,), axis=None, keepdims=False)
    return apply(op, (a,), axis=_axes(a, axis), keepdims=builtins.bool(keepdims))


def sum(a: Tensor, axis: Any = None, *, keepdims: bool = False) -> Tensor:
    """Sum over ``axis`` (all by default)."""
    return reduce(SumBackward, a, axis, keepdims=keepdims)


def mean(a: Tensor, axis: Any = None, *, keepdims: bool = False) -> Tensor:
    """Mean over ``axis`` (all by default)."""
    return reduce(MeanBackward, a, axis, keepdims=keepdims)


@routes(method="reshape")
def reshape(a: Tensor, *shape: Any) -> Tensor:
    """``a`` in a new shape, ``reshape(a, 2, 3)`` or ``reshape(a, (2, 3))`` (``Tensor.reshape``)."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    shape = a._data.reshape(shape).shape  # resolves -1 and checks the size
    return apply(ReshapeBackward, (a,), shape=shape)


def broadcast_to(a: Tensor, shape: tuple[int, ...]) -> Tensor:
    """``a`` broadcast to ``shape``."""
    return apply(BroadcastToBackward, (a,), shape=tuple(shape))


def sum_to(a: Tensor, shape: tuple[int, ...]) -> Tensor:
    """Sum ``a`` down to ``shape`` (to which it broadcasts)."""
    return apply(SumToBackward, (a,), shape=tuple(shape))


# -- gradient shape helpers -----------------------------------------------------
def reduce_to(g: Any, shape: tuple[int, ...]) -> Any:
    """Sum a broadcast gradient back to an input's ``shape`` (array or Tensor)."""
    if g.shape == shape:
        return g
    if isinstance(g, Tensor):
        return sum_to(g, shape)
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        i + lead for i, n in enumerate(shape) if n == 1 and g.shape[i + lead] != 1
    )
    if type(g) is not np.ndarray and is_dask_array(g):
        return g.sum(axis=axes, keepdims=True).reshape(shape)
    return np.add.reduce(g, axis=axes, keepdims=True).reshape(shape)


def expand(g: Any, shape: tuple[int, ...], chunks: Any = None) -> Any:
    """Broadcast a gradient to ``shape`` (array or Tensor).

    ``chunks`` (those of a dask input) makes the result a lazy dask array in
    those chunks, whatever ``g`` is.
    """
    if g.shape == shape:
        return g
    if isinstance(g, Tensor):
        return broadcast_to(g, shape)
    if type(g) is StandardArray:
        return g.broadcast_to(shape)
    if chunks is not None or (type(g) is not np.ndarray and is_dask_array(g)):
        import dask.array as da

        return da.broadcast_to(g, shape, chunks=chunks)
    if math.prod(shape) > _MATERIALISE_MAX:
        # A stride-0 view: materialising a large one costs more in fresh pages
        # than the kernels lose on it (docs/engine.md, "Performance").
        return np.broadcast_to(g, shape)
    # Small: a real array is cheaper than np.broadcast_to's Python overhead
    # (docs/engine.md), and a fresh array can become a leaf's .grad without a copy.
    out = np.empty(shape, g.dtype)
    np.copyto(out, g)
    return out


def reshape_grad(g: Any, shape: tuple[int, ...]) -> Any:
    """Reshape a gradient (array or Tensor)."""
    if g.shape == shape:
        return g
    if isinstance(g, Tensor):
        return reshape(g, shape)
    return g.reshape(shape)
