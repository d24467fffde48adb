"""Recording: running an op and, when a gradient is needed, adding its node to the graph.

:func:`apply` is the one place an op is run on Tensors: it applies autocast
(the op's AMP policy, read from its schema), calls the node class's
``forward`` on the inputs' data, and when an input requires grad makes the
node, its edges (:func:`edge_of`) and what the schema says it saves, with
the version checks. The cast is here too because autocast records it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..arrays import half as _half
from ..arrays.kinds import is_dask_array
from . import grad_mode
from .array_api import StandardArray, is_standard_array
from .node import Node, next_sequence_nr
from .op_table import routes
from .schema import AmpPolicy, OpSchema
from .tensor import Tensor
from .versions import Version, counter_of, version_check

_F32 = np.dtype(np.float32)

_grad_enabled = grad_mode.grad_enabled
_new = object.__new__
_autocast_enabled = grad_mode.autocast_enabled


def autocast_inputs(schema: OpSchema, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    """Apply the op's AMP policy to its inputs: the one place autocast acts.

    Inside :func:`cbrtgrad.autocast`, a ``FORCE_FP32`` op gets float16 inputs
    cast to float32 by a recorded :class:`CastBackward` node (so the gradient
    of a float16 leaf is float16 again); ``PROMOTE`` ops are left alone.
    """
    if schema.amp_policy is AmpPolicy.FORCE_FP32 and _autocast_enabled():
        return tuple(
            cast(t, _F32) if type(t) is Tensor and _half.is_half(t.dtype) else t for t in inputs
        )
    return inputs


def edge_of(t: Any) -> Any:
    """The edge to ``t`` a node records (and the backward starts from).

    ``None`` for a constant or a tensor that needs no grad, else the node
    that made ``t``, or ``t`` itself for a leaf (exactly a ``Tensor``: the
    backward walk tells leaves from nodes by that).
    """
    if type(t) is not Tensor or not t._requires_grad:
        return None
    return t if t.grad_fn is None else t.grad_fn


def apply(cls: type[Node], inputs: tuple[Any, ...], backend: Any = None, **params: Any) -> Tensor:
    """Run op ``cls`` on ``inputs`` and record it in the graph if a gradient is needed."""
    if _autocast_enabled():
        inputs = autocast_inputs(cls.schema, inputs)
    unary = len(inputs) == 1
    if unary and type(inputs[0]) is Tensor:
        # NOTE: hot path: a unary op on a Tensor (cbrt, sum, cast, ...), without
        # the lists of the general case.
        t = inputs[0]
        if params:
            data = cls.forward(backend, t._data, **params)
        else:
            data = cls.forward(backend, t._data)
        record = t._requires_grad
    else:
        record = False
        arrays = []
        for t in inputs:
            if type(t) is Tensor:
                arrays.append(t._data)
                if t._requires_grad:
                    record = True
            else:
                arrays.append(t)
        data = cls.forward(backend, *arrays, **params)
    if type(data) is not np.ndarray and type(data) is not StandardArray:
        # NOTE: hot path: ndarray first, then the numpy scalars that reductions
        # return, and only then the dask and device probes (a backend's
        # result on the device comes back as the library's array).
        if isinstance(data, np.generic) or not (is_dask_array(data) or is_standard_array(data)):
            data = np.asarray(data)
        elif is_standard_array(data):
            data = StandardArray(data)
    if not record or not _grad_enabled():
        return Tensor._make(data, None)
    return record_node(cls, inputs, data, backend, params)


def record_node(
    cls: type[Node],
    inputs: tuple[Any, ...],
    data: Any,
    backend: Any,
    params: dict[str, Any],
    save: bool = True,
) -> Tensor:
    """The output Tensor of op ``cls`` with its node: edges, what the schema saves, checks.

    ``data`` is the op's forward on ``inputs`` (an ndarray, dask array or
    StandardArray), and a gradient is recorded: an input requires grad and
    grad mode is on. :func:`apply` ends here; an op's own hot path that ran
    its forward itself (``cbrt`` on a small array) calls it directly, and
    with ``save=False`` sets the node's own fields itself instead of its
    ``save`` (the full ``.sum()``: one call fewer).
    """
    node = _new(cls)
    if len(inputs) == 1:
        fn = inputs[0].grad_fn  # a Tensor that requires grad: the edge is its node or itself
        node.next_functions = inputs if fn is None else (fn,)  # a leaf: the tuple is the edges
    else:
        node.next_functions = tuple([edge_of(t) for t in inputs])
    node.sequence_nr = next_sequence_nr()
    node.backend = backend
    # NOTE: hot path: Tensor._make, inlined.
    out: Tensor = _new(Tensor)
    out._data = data
    out._requires_grad = True
    out.grad = None
    out.grad_fn = node
    # What to save is schema data (read as Node.__init_subclass__ kept it).
    if cls.saves_output:
        version = out._counter = Version()
        node.saved = (data,)
        # NOTE: hot path: version_check's ndarray case inlined (a new tensor is at version 0).
        node._checks = ((version, 0),) if type(data) is np.ndarray else (version_check(out),)
    else:
        out._counter = None  # made when first read (versions.tensor_counter)
        if cls.saves_input:
            node.saved = inputs
            node._checks = _input_checks(inputs)
        else:
            node.saved = ()
            node._checks = ()
    if save and cls.keeps_more:  # NOTE: hot path: no call for an op with nothing more to keep
        node.save(inputs, out, backend, params)
    return out


def _input_checks(inputs: tuple[Any, ...]) -> tuple[tuple[Any, int], ...]:
    """The version checks of saved inputs: each Tensor's, and a constant's over a tensor's memory.

    A constant such as ``x * y.data`` is a read-only view of ``y``'s memory
    (see ``versions.alias``): a write through ``y`` changes it, so the node
    checks ``y``'s counter for it too.
    """
    checks = []
    for t in inputs:
        if type(t) is Tensor:
            checks.append(version_check(t))
        elif type(t) is np.ndarray and t.base is not None:
            counter = counter_of(t)
            if counter is not None:
                checks.append((counter, counter.value))
    return tuple(checks)


class CastBackward(Node):
    """A cast to another float dtype; the gradient is cast back."""

    __slots__ = ("in_dtype",)
    schema = OpSchema(name="cast")

    in_dtype: np.dtype

    @staticmethod
    def forward(backend: Any, a: Any, *, dtype: np.dtype) -> Any:
        if type(a) is StandardArray or is_dask_array(a):
            return a.astype(dtype)
        return np.asarray(a).astype(dtype)

    def save(
        self, inputs: tuple[Any, ...], output: Tensor, backend: Any, params: dict[str, Any]
    ) -> None:
        self.in_dtype = inputs[0].dtype

    def vjp(self, g: Any) -> tuple[Any, ...]:
        if type(g) is Tensor:
            return (cast(g, self.in_dtype),)
        return (g.astype(self.in_dtype, copy=False),)


@routes(method="astype")
def cast(a: Tensor, dtype: Any) -> Tensor:
    """A differentiable cast of ``a`` to float ``dtype``."""
    dt = np.dtype(dtype)
    if dt.kind != "f" and not _half.is_half(dt):
        raise TypeError(f"cbrtgrad: dtype must be a float dtype, got {dt}")
    if dt == a.dtype:
        return a
    return apply(CastBackward, (a,), dtype=dt)
