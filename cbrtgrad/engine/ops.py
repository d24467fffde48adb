"""Every differentiable op, each in one place: node class, schema, forward, gradient.

An op is a ``...Backward`` node class holding, side by side, its
:class:`~cbrtgrad.OpSchema` (name, AMP policy, arity, what it saves, ufunc:
data the engine reads), its ``forward`` and its vector-Jacobian product
``vjp``, plus the public function below it that records it through
:func:`apply`. That function's ``@_routes`` line is the op table:
:data:`UFUNC_OPS` (from the schema's ``ufunc``) and :data:`API_OPS` are
filled from it, and ``Tensor``'s operators call these functions.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

from .. import _dtypes, _half, api
from .._array_kinds import is_dask_array
from ..backends import _registry
from . import grad_mode
from .node import Node, expand, next_sequence_nr, reduce_to
from .node import reshape as reshape_grad
from .schema import AmpPolicy, OpSchema, Saves
from .tensor import Tensor, version_check

_NATIVE = frozenset({np.dtype(np.float32), np.dtype(np.float64)})
_F32 = np.dtype(np.float32)
_SCALARS = (int, float, np.integer, np.floating, np.bool_, bool)
_OUTPUT = Saves.OUTPUT
_INPUTS = Saves.INPUTS

_grad_enabled = grad_mode.grad_enabled
_autocast_enabled = grad_mode.autocast_enabled

#: numpy 2.3 added ``out=...``: a reduction then returns a 0-d array instead of
#: a scalar that ``apply`` would wrap again (its cost: docs/engine.md, "Performance").
_REDUCE_TO_ARRAY = np.lib.NumpyVersion(np.__version__) >= "2.3.0"


def _operand(value: Any, name: str) -> Any:
    """A Tensor, a real scalar or an ndarray (or dask array) constant; else a TypeError."""
    if isinstance(value, (Tensor, float, int)):
        return value
    if is_dask_array(value):
        _dtypes.compute_dtype(value.dtype, name)
        return value
    if isinstance(value, (np.ndarray, np.generic, list, tuple)):
        array = np.asarray(value)
        _dtypes.compute_dtype(array.dtype, name)
        return array
    raise TypeError(
        f"cbrtgrad: {name} must be a Tensor, an ndarray or a real scalar (or a dask array), "
        f"got {type(value).__name__}"
    )


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


def _edge(t: Any) -> Any:
    # None for a constant or a tensor that needs no grad, else the input's
    # node, or the leaf itself.
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
    if type(data) is not np.ndarray and (isinstance(data, np.generic) or not is_dask_array(data)):
        # NOTE: hot path: ndarray first, then the numpy scalars that reductions
        # return, and only then the dask probe.
        data = np.asarray(data)
    if not record or not _grad_enabled():
        return Tensor._make(data, None)
    node = cls.__new__(cls)
    if unary:
        fn = inputs[0].grad_fn  # the unary case above: a Tensor that requires grad
        node.next_functions = (inputs[0] if fn is None else fn,)
    else:
        node.next_functions = tuple([_edge(t) for t in inputs])
    node.sequence_nr = next_sequence_nr()
    node.released = False
    out = Tensor._make(data, node)
    saves = cls.schema.saves  # what to save is schema data, read here only
    if saves is _OUTPUT:
        node.saved = (data,)
        # NOTE: hot path: version_check's ndarray case inlined (a new tensor is at version 0).
        node._checks = ((out._version, 0),) if type(data) is np.ndarray else (version_check(out),)
    elif saves is _INPUTS:
        node.saved = inputs
        node._checks = tuple([version_check(t) for t in inputs if type(t) is Tensor])
    else:
        node.saved = ()
        node._checks = ()
    node.save(inputs, out, backend, params)
    return out


# -- the op table -----------------------------------------------------------------
_F = TypeVar("_F", bound=Callable[..., Any])

#: numpy ufunc -> op function (``Tensor.__array_ufunc__``), from the schemas' ``ufunc``.
UFUNC_OPS: dict[Any, Callable[..., Any]] = {}
#: cbrtgrad public function -> op function (``Tensor.__cbrtgrad_function__``).
API_OPS: dict[Any, Callable[..., Any]] = {}


def _routes(op: type[Node] | None = None, *, api_function: Any = None) -> Callable[[_F], _F]:
    """Enter an op function in the table: for ``op.schema.ufunc``, and for ``api_function``."""

    def register(function: _F) -> _F:
        if op is not None and op.schema.ufunc is not None:
            UFUNC_OPS[op.schema.ufunc] = function
        if api_function is not None:
            API_OPS[api_function] = function
        return function

    return register


# -- cube root ----------------------------------------------------------------
def _gradient(backend: Any, g: Any, y: Any) -> Any:
    # The backends take host inputs already in the compute dtype (float32 or
    # float64), which is decided here as the api decides it.
    compute = _dtypes.result_dtype(g, y, argument="g, y")
    if not (is_dask_array(g) or is_dask_array(y)):  # dask casts inside each chunk's task
        g, y = np.asarray(g, dtype=compute), np.asarray(y, dtype=compute)
    return backend.cube_root_grad(g, y, dtype=compute)


class CubeRootBackward(Node):
    """The ``cube_root`` op: ``y = cbrt(x)``; saves the output ``y`` (``result``), not ``x``.

    Examples
    --------
    >>> import numpy as np, cbrtgrad as cg
    >>> x = cg.Tensor(np.array([8.0]), requires_grad=True)
    >>> y = cg.cbrt(x)
    >>> type(y.grad_fn).__name__, y.grad_fn.result
    ('CubeRootBackward', array([2.]))
    >>> y.grad_fn.vjp(np.array([12.0]))
    (array([1.]),)
    """

    __slots__ = ("backend",)
    schema = OpSchema(
        name="cube_root", amp_policy=AmpPolicy.FORCE_FP32, saves=Saves.OUTPUT, ufunc=np.cbrt
    )

    backend: Any

    @property
    def result(self) -> Any:
        """The saved output ``y`` (``None`` once released)."""
        return self.saved[0] if self.saved else None

    @result.setter
    def result(self, value: Any) -> None:
        self.saved = (value,)

    @staticmethod
    def forward(backend: Any, x: Any, *, dtype: Any = None) -> Any:
        """``backend.cube_root`` in the compute dtype of ``x``."""
        dt = x.dtype
        if dtype is None:
            if dt in _NATIVE:
                # NOTE: hot path: a native dtype, no keyword (the backend's fast case).
                return backend.cube_root(x)
            dtype = _dtypes.compute_dtype(dt, "x")
        return backend.cube_root(x, dtype=dtype)

    @classmethod
    def dispatch(cls, backend: Any, x: Any, stream: Any = None, dtype: Any = None) -> Any:
        """The seed's ``dispatch(backend, a, s, dt)``: the forward on ``backend``.

        Parameters
        ----------
        backend : Backend or str
            A backend (:func:`cbrtgrad.backends.get_backend`) or its name.
        x : array
            The input, of a kind the backend takes.
        stream : stream, optional
            The stream to run on: the ``cuda`` backend's only (the seed's ``s``).
        dtype : dtype, optional
            The compute dtype (the seed's ``dt``); by default that of ``x``.

        Returns
        -------
        array
            ``cbrt(x)``, as :meth:`forward` gives it (what the engine records).

        Raises
        ------
        TypeError
            For a ``stream`` given to a backend that has none.

        Examples
        --------
        >>> import numpy as np, cbrtgrad as cg
        >>> cg.CubeRootBackward.dispatch("cpu", np.array([27.0, -8.0]))
        array([ 3., -2.])
        """
        if isinstance(backend, str):
            from ..backends import get_backend

            backend = get_backend(backend)
        if stream is None:
            return cls.forward(backend, x, dtype=dtype)
        if backend.name != "cuda":
            raise TypeError(f"cbrtgrad: stream is only for the cuda backend, not {backend.name!r}")
        compute = dtype if dtype is not None else _dtypes.compute_dtype(_dtypes.dtype_of(x), "x")
        return backend.cube_root(x, dtype=compute, stream=stream)

    def grad_formula(self, g: Any) -> Any:
        """The seed's ``grad_formula(g)``: ``g / (3 y^2)`` from the saved output ``y``.

        The array :meth:`vjp` returns for the one input (``vjp`` is the
        engine's protocol, a tuple per input).

        Examples
        --------
        >>> import numpy as np, cbrtgrad as cg
        >>> y = cg.cbrt(cg.Tensor(np.array([8.0]), requires_grad=True))
        >>> y.grad_fn.grad_formula(np.array([12.0]))
        array([1.])
        """
        return self.vjp(g)[0]

    def save(
        self, inputs: tuple[Any, ...], output: Tensor, backend: Any, params: dict[str, Any]
    ) -> None:
        self.backend = backend

    def vjp(self, g: Any) -> tuple[Any, ...]:
        y = self.saved[0]
        if type(g) is Tensor:
            # create_graph: g / (3 y^2) with engine ops so that it is differentiable;
            # ``y`` is the saved output re-attached to this node, so d/dx flows through it.
            yt = Tensor._make(y, self)
            counter = self._checks[0][0]
            yt._version = getattr(counter, "version", counter)  # a _LazyVersion wraps it
            return (g / (yt * yt * 3.0),)
        # The fast kernel, from the saved output; the cube root is never re-run.
        dt = y.dtype
        if g.dtype != dt or dt not in _NATIVE:  # NOTE: hot path: one native dtype, no call
            return (_gradient(self.backend, g, y),)
        return (self.backend.cube_root_grad(g, y),)


@_routes(CubeRootBackward, api_function=api.cbrt)
def cbrt(
    x: Any, /, out: Any = None, *, where: Any = True, dtype: Any = None, backend: Any = None
) -> Any:
    """Differentiable cube root of a Tensor (what ``cbrtgrad.cbrt(tensor)`` runs).

    ``out=`` (a Tensor) and ``where=`` are only allowed when no gradient is
    recorded; ``dtype=`` is a differentiable cast before the op.

    Examples
    --------
    >>> import numpy as np, cbrtgrad as cg
    >>> cg.cbrt(cg.Tensor(np.array([-27.0, 8.0])))
    Tensor([-3.,  2.])
    """
    if type(x) is not Tensor:
        x = Tensor(x)
    if dtype is not None:
        requested = _dtypes.requested_dtype(dtype)
        if requested != x.dtype:
            x = cast(x, requested)
    chosen = _registry.resolve(backend, x._data)
    if out is None and where is True:
        if _half.is_half(x.dtype) and CubeRootBackward.schema.amp_policy is AmpPolicy.FORCE_FP32:
            # The one dtype rule (cbrtgrad._dtypes): half precision is computed
            # in float32 and returned as float32, as the api returns it, in or
            # out of autocast; the cast is recorded, so a half leaf's gradient
            # is cast back to its dtype.
            x = cast(x, _F32)
        return apply(CubeRootBackward, (x,), chosen)
    if _grad_enabled() and x._requires_grad:
        raise RuntimeError(
            "cbrtgrad: cbrt with out= or where= is not differentiable; call it inside "
            "`with cbrtgrad.no_grad():` or drop out=/where="
        )
    where = api.check_where(where)
    compute = _dtypes.compute_dtype(x.dtype, "x")
    data = x._data if x.dtype == compute or is_dask_array(x._data) else x._data.astype(compute)
    if out is None:
        y = chosen.cube_root(data, where=where, dtype=compute)
        return Tensor._make(y if type(y) is np.ndarray or is_dask_array(y) else np.asarray(y), None)
    if type(out) is not Tensor:
        raise TypeError(f"cbrtgrad: out must be a Tensor, got {type(out).__name__}")
    if type(out._data) is np.ndarray and _half.is_half(out.dtype):
        # Correctly rounded in out's own precision, as the api writes it.
        api.cbrt(x._data, out=out._data, where=where, backend=backend)
        out._version.value += 1
        return out
    api.check_out(out._data, (data,), compute, where)
    (data,) = api.unaliased((data,), out._data)
    chosen.cube_root(data, out=out._data, where=where, dtype=compute)
    out._version.value += 1
    return out


@_routes(api_function=api.cbrt_grad)
def cbrt_grad(g: Any, y: Any, /, out: Any = None, *, where: Any = True, backend: Any = None) -> Any:
    """``g / (3 y^2)`` on Tensors, as engine ops (so it is differentiable)."""
    if out is not None or where is not True:
        raise TypeError("cbrtgrad: cbrt_grad on Tensors does not take out= or where=")
    return divide(g, multiply(multiply(y, y), 3.0))


@_routes(api_function=api.cbrt_and_grad)
def cbrt_and_grad(x: Any, g: Any, /, out: Any = None, *, backend: Any = None) -> Any:
    """``(cbrt(x), g / (3 y^2))`` on Tensors."""
    if out is not None:
        raise TypeError("cbrtgrad: cbrt_and_grad on Tensors does not take out=")
    y = cbrt(x, backend=backend)
    return y, cbrt_grad(g, y)


# -- arithmetic ----------------------------------------------------------------
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


class CastBackward(Node):
    """A cast to another float dtype; the gradient is cast back."""

    __slots__ = ("in_dtype",)
    schema = OpSchema(name="cast")

    in_dtype: np.dtype

    @staticmethod
    def forward(backend: Any, a: Any, *, dtype: np.dtype) -> Any:
        return a.astype(dtype) if is_dask_array(a) else np.asarray(a).astype(dtype)

    def save(
        self, inputs: tuple[Any, ...], output: Tensor, backend: Any, params: dict[str, Any]
    ) -> None:
        self.in_dtype = inputs[0].dtype

    def vjp(self, g: Any) -> tuple[Any, ...]:
        if type(g) is Tensor:
            return (cast(g, self.in_dtype),)
        return (g.astype(self.in_dtype, copy=False),)


# -- reductions and shapes -------------------------------------------------------
#: Sums from this size ask the backend registry for a sum of their own.
_BACKEND_SUM_MIN_SIZE = 1 << 16


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
        if type(a) is not np.ndarray and is_dask_array(a):
            return a.sum(axis=axis, keepdims=keepdims)  # dask has no ufunc.reduce
        # A backend may bring its own sum (the parallel one: large float32
        # sums on all threads, in float64); the others are numpy's. NOTE:
        # ``sum`` names no backend, so large arrays ask the registry (which
        # follows use_backend and CBRTGRAD_BACKEND); small ones skip the lookup.
        if type(a) is np.ndarray and a.size >= _BACKEND_SUM_MIN_SIZE:
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
        return (expand(reshape_grad(g, self.kept_shape), self.in_shape, self.chunks),)


class MeanBackward(SumBackward):
    """``a.mean(axis, keepdims)``; the gradient is broadcast back and divided."""

    __slots__ = ("count",)
    schema = OpSchema(name="mean", ufunc=None)

    count: int

    @staticmethod
    def forward(backend: Any, a: Any, *, axis: Any, keepdims: bool) -> Any:
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


# -- public op functions ---------------------------------------------------------
@_routes(AddBackward)
def add(a: Any, b: Any) -> Tensor:
    """``a + b`` (broadcasting)."""
    return apply(AddBackward, (_operand(a, "a"), _operand(b, "b")))


@_routes(SubtractBackward)
def subtract(a: Any, b: Any) -> Tensor:
    """``a - b`` (broadcasting)."""
    return apply(SubtractBackward, (_operand(a, "a"), _operand(b, "b")))


@_routes(MultiplyBackward)
def multiply(a: Any, b: Any) -> Tensor:
    """``a * b`` (broadcasting)."""
    return apply(MultiplyBackward, (_operand(a, "a"), _operand(b, "b")))


@_routes(DivideBackward)
def divide(a: Any, b: Any) -> Tensor:
    """``a / b`` (broadcasting)."""
    return apply(DivideBackward, (_operand(a, "a"), _operand(b, "b")))


@_routes(NegativeBackward)
def negative(a: Any) -> Tensor:
    """``-a``."""
    return apply(NegativeBackward, (_operand(a, "a"),))


@_routes(PowerBackward)
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


def cast(a: Tensor, dtype: Any) -> Tensor:
    """A differentiable cast of ``a`` to float ``dtype``."""
    dt = np.dtype(dtype)
    if dt.kind != "f" and not _half.is_half(dt):
        raise TypeError(f"cbrtgrad: dtype must be a float dtype, got {dt}")
    if dt == a.dtype:
        return a
    return apply(CastBackward, (a,), dtype=dt)


def _axes(a: Tensor, axis: Any) -> tuple[int, ...] | None:
    # None (all axes) is kept as None: numpy's fastest reduction path.
    if axis is None:
        return None
    return normalize_axis_tuple(axis, a.ndim, "axis")


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


def reshape(a: Tensor, shape: Any) -> Tensor:
    """``a`` with a new shape."""
    shape = a._data.reshape(shape).shape  # resolves -1 and checks the size
    return apply(ReshapeBackward, (a,), shape=shape)


def broadcast_to(a: Tensor, shape: tuple[int, ...]) -> Tensor:
    """``a`` broadcast to ``shape``."""
    return apply(BroadcastToBackward, (a,), shape=tuple(shape))


def sum_to(a: Tensor, shape: tuple[int, ...]) -> Tensor:
    """Sum ``a`` down to ``shape`` (to which it broadcasts)."""
    return apply(SumToBackward, (a,), shape=tuple(shape))
