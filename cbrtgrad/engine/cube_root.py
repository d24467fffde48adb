"""The cube root op and its gradient op: what the engine records for ``cbrtgrad.cbrt``.

:class:`CubeRootBackward` is the seed's node (its names ``saves_input``,
``saves_output``, ``dispatch`` and ``grad_formula`` are public:
docs/engine.md); it saves the output ``y``, and its backward is the
gradient kernel ``g / (3 y^2)`` from ``y``, never re-running the cube root.
:class:`CubeRootGradBackward` records that kernel as an op of its own, so
that ``cbrtgrad.cbrt_grad`` on Tensors and the differentiable backward
(``create_graph=True``) give the kernel's correctly rounded bits too.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import api
from ..arrays import dtypes as _dtypes
from ..arrays import half as _half
from ..arrays.kinds import is_dask_array
from ..backends import _registry
from ..backends import host as _host
from ..kernels.kernel_ops import CUBE_ROOT, CUBE_ROOT_GRAD
from . import grad_mode
from .array_api import StandardArray, check_one_side, kernel_input, raw
from .node import Node
from .op_table import routes
from .ops import _operand
from .recording import apply, cast, record_node
from .schema import AmpPolicy, schema_of
from .shape_ops import reduce_to
from .tensor import Tensor
from .versions import alias

_NATIVE = frozenset({np.dtype(np.float32), np.dtype(np.float64)})
_F32 = np.dtype(np.float32)
_grad_enabled = grad_mode.grad_enabled
# NOTE: hot path: what cbrt's small calls read, as the api's read them (_host).
_forward_of = _host.forward_of
_gradient_of = _host.gradient_of
_KEPT = _host.KEPT
_CPU_NAME = _host.CPU_NAME
_CPU = _host.CPU
_selected_backend = _host.selected_backend
_NO_PARAMS: dict[str, Any] = {}


def _gradient(backend: Any, g: Any, y: Any) -> Any:
    # The backends take host inputs already in the compute dtype (float32 or
    # float64), which is decided here as the api decides it; device arrays
    # go to the backend as the library's own arrays, host arrays of other
    # libraries as numpy views, and the result comes back in y's library.
    if type(y) is StandardArray:
        like = y
        if type(g) is StandardArray and g.is_lazy_broadcast and g.shape == y.shape and y.on_device:
            # One value broadcast (a sum's gradient): the kernel reads it once
            # per thread, and the broadcast is never made into an array.
            g = g.one
            if like._numba:  # the user's kind, as y is given to the backend
                from numba import cuda

                g = cuda.as_cuda_array(g)
        g, y = kernel_input(g), y.kernel_input()
        compute = _dtypes.compute_dtype_of(g, y, argument="g, y")
        if not like.on_device:  # numpy views: cast as for host arrays below
            g, y = np.asarray(g, dtype=compute), np.asarray(y, dtype=compute)
        return like.from_kernel(backend.cube_root_grad(g, y, dtype=compute))
    g = raw(g)
    compute = _dtypes.compute_dtype_of(g, y, argument="g, y")
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

    __slots__ = ()
    schema = schema_of(CUBE_ROOT)  # saves y, force-fp32 (kernels/kernel_ops.py)

    @property
    def result(self) -> Any:
        """The saved output ``y`` (``None`` once released), read-only on the host.

        A host ``y`` is given as a read-only alias (``versions.alias``): a
        write into it would change the gradient unseen by the version check.
        """
        checks = self._checks
        if not checks:  # None once released
            return None
        y = self.saved[0]
        if type(y) is not np.ndarray:
            return y  # a dask array (never written) or a device array (see docs/engine.md)
        return alias(y, checks[0][0], writable=False)

    @staticmethod
    def forward(backend: Any, x: Any, *, dtype: Any = None) -> Any:
        """``backend.cube_root`` in the compute dtype of ``x``."""
        if type(x) is StandardArray:  # the backend takes it as kernel_input gives it
            return x.from_kernel(CubeRootBackward.forward(backend, x.kernel_input(), dtype=dtype))
        dt = x.dtype if type(x) is np.ndarray else _dtypes.dtype_of(x)
        if dtype is None:
            if dt in _NATIVE:
                # NOTE: hot path: a native dtype, no keyword (the backend's fast case).
                return backend.cube_root(x)
            dtype = _dtypes.compute_dtype_of(x)
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
        compute = _dtypes.compute_dtype_of(x, dtype=dtype)
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

    def vjp(self, g: Any) -> tuple[Any, ...]:
        y = self.saved[0]
        if type(g) is Tensor:
            # create_graph: the gradient op itself, recorded so that it is
            # differentiable (the same correctly rounded kernel, so the same
            # bits as the plain backward); ``y`` is the saved output
            # re-attached to this node, so d/dx flows through it.
            yt = Tensor._make(y, self)
            checks = self._checks
            assert checks is not None  # the walk calls no released node's vjp
            counter = checks[0][0]
            yt._version = getattr(counter, "version", counter)  # a LazyVersion wraps it
            return (_record_grad(g, yt, self.backend),)
        # The fast kernel, from the saved output; the cube root is never re-run.
        dt = y.dtype
        if self.backend is _CPU and g.dtype is dt and type(y) is np.ndarray:
            kernel = _gradient_of(dt)
            if kernel is not None:
                # NOTE: hot path: what the cpu backend's cube_root_grad calls for
                # one native dtype (the kept ones) and no out= or where=: its ufunc.
                return (kernel(g, y),)
        if g.dtype != dt or dt not in _NATIVE or type(y) is StandardArray:
            return (_gradient(self.backend, g, y),)
        return (self.backend.cube_root_grad(g, y),)


class CubeRootGradBackward(Node):
    """The ``cube_root_grad`` op: ``dx = g / (3 y^2)``, correctly rounded, from ``g`` and ``y``.

    What ``cbrtgrad.cbrt_grad(g, y)`` records on Tensors, and what the
    backward of :class:`~cbrtgrad.CubeRootBackward` records under
    ``create_graph=True``: the value is the backend's kernel (the bits of
    the plain backward), and its own vjp makes second derivatives:
    ``d/dg = 1 / (3 y^2)`` (this op again) and ``d/dy = -2 g / (3 y^3)``.

    Examples
    --------
    >>> import numpy as np, cbrtgrad as cg
    >>> g = cg.Tensor(np.array([12.0]), requires_grad=True)
    >>> dx = cg.cbrt_grad(g, cg.Tensor(np.array([2.0])))
    >>> dx, type(dx.grad_fn).__name__
    (Tensor([1.], grad_fn=<CubeRootGradBackward>), 'CubeRootGradBackward')
    """

    __slots__ = ("shapes",)
    schema = schema_of(CUBE_ROOT_GRAD)  # saves g and y

    shapes: tuple[tuple[int, ...], ...]

    @staticmethod
    def forward(backend: Any, g: Any, y: Any) -> Any:
        """``backend.cube_root_grad`` (both inputs of one native dtype: see :func:`cbrt_grad`)."""
        if type(y) is StandardArray:
            return y.from_kernel(backend.cube_root_grad(kernel_input(g), y.kernel_input()))
        return backend.cube_root_grad(g, y)

    def save(
        self, inputs: tuple[Any, ...], output: Tensor, backend: Any, params: dict[str, Any]
    ) -> None:
        self.shapes = tuple(np.shape(t) for t in inputs)

    def vjp(self, gz: Any) -> tuple[Any, ...]:
        g, y = self.saved_for(gz)
        eg, ey = self.next_functions
        if type(gz) is Tensor:
            dg = None if eg is None else _record_grad(gz, y, self.backend)
            dy = None if ey is None else _record_grad(g * gz, y, self.backend) * -2.0 / y
        else:
            dg = None if eg is None else _gradient(self.backend, gz, y)
            dy = None if ey is None else _gradient(self.backend, g * gz, y) * -2.0 / y
        return (
            None if dg is None else reduce_to(dg, self.shapes[0]),
            None if dy is None else reduce_to(dy, self.shapes[1]),
        )


@routes(np.cbrt, api_function=api.cbrt)
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
    data = x._data
    if (
        type(data) is np.ndarray
        and out is None
        and where is True
        and (backend is None or backend is _CPU_NAME)
    ):
        # NOTE: hot path: a small float32/float64 array that the automatic
        # choice (or backend="cpu") sends to the cpu backend is its kept
        # ufunc's call and the node (the api's own test, _host.keep_choice);
        # no autocast, which casts only half precision.
        forward = _forward_of(data.dtype)
        if (
            forward is not None
            and dtype is None
            and ((data.size < _KEPT[1] and _selected_backend() is None) or backend is _CPU_NAME)
        ):
            if x._requires_grad and _grad_enabled():
                return record_node(CubeRootBackward, (x,), forward(data), _CPU, _NO_PARAMS)
            return Tensor._make(forward(data), None)
    _host.keep_choice()  # the choice above, kept for the settings of this call
    if dtype is not None:
        requested = _dtypes.requested_dtype(dtype)
        if requested != x.dtype:
            x = cast(x, requested)
    data = x._data
    chosen = _registry.resolve(
        backend, data if type(data) is not StandardArray else kernel_input(data)
    )
    if out is None and where is True:
        if _half.is_half(x.dtype) and CubeRootBackward.schema.amp_policy is AmpPolicy.FORCE_FP32:
            # The one dtype rule (cbrtgrad.arrays.dtypes): half precision is computed
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
    compute = _dtypes.compute_dtype_of(x._data)
    data = x._data if x.dtype == compute or is_dask_array(x._data) else x._data.astype(compute)
    like = data if type(data) is StandardArray else None
    data = kernel_input(data)
    if out is None:
        y = chosen.cube_root(data, where=where, dtype=compute)
        if like is not None:
            y = like.from_kernel(y)
        elif not (type(y) is np.ndarray or is_dask_array(y)):
            y = np.asarray(y)
        return Tensor._make(y, None)
    if type(out) is not Tensor:
        raise TypeError(f"cbrtgrad: out must be a Tensor, got {type(out).__name__}")
    if type(out._data) is np.ndarray and _half.is_half(out.dtype):
        # Correctly rounded in out's own precision, as the api writes it.
        api.cbrt(x._data, out=out._data, where=where, backend=backend)
        out._version.value += 1
        return out
    target = kernel_input(out._data)
    api.check_out(target, (data,), compute, where)
    (data,) = api.unaliased((data,), target)
    chosen.cube_root(data, out=target, where=where, dtype=compute)
    out._version.value += 1
    return out


@routes(api_function=api.cbrt_grad)
def cbrt_grad(g: Any, y: Any, /, out: Any = None, *, where: Any = True, backend: Any = None) -> Any:
    """``g / (3 y^2)`` on Tensors: the correctly rounded kernel, recorded (differentiable).

    The compute dtype is the api's (cbrtgrad.arrays.dtypes): half precision is
    computed in float32, a float32 and a float64 operand in float64; the
    casts are recorded, so the gradients come back in each input's dtype.

    Examples
    --------
    >>> import numpy as np, cbrtgrad as cg
    >>> cg.cbrt_grad(cg.Tensor(np.array([12.0, 3.0])), np.array([2.0, 1.0]))
    Tensor([1., 1.])
    """
    if out is not None or where is not True:
        raise TypeError("cbrtgrad: cbrt_grad on Tensors does not take out= or where=")
    g, y = _operand(g, "g"), _operand(y, "y")
    data = y._data if type(y) is Tensor else y
    return _record_grad(g, y, _registry.resolve(backend, kernel_input(data)))


def _record_grad(g: Any, y: Any, backend: Any) -> Tensor:
    """Record :class:`CubeRootGradBackward` on ``backend``, in the api's compute dtype."""
    data = (g._data if type(g) is Tensor else g, y._data if type(y) is Tensor else y)
    check_one_side(data, "g, y")
    compute = _dtypes.compute_dtype_of(*data, argument="g, y")
    return apply(CubeRootGradBackward, (_in_dtype(g, compute), _in_dtype(y, compute)), backend)


def _in_dtype(value: Any, dtype: np.dtype) -> Any:
    """A Tensor cast (recorded) to ``dtype``, or a constant converted to it."""
    if type(value) is Tensor:
        return value if value.dtype == dtype else cast(value, dtype)
    if type(value) is StandardArray or is_dask_array(value):
        return value.astype(dtype, copy=False)
    return np.asarray(value, dtype=dtype)


@routes(api_function=api.cbrt_and_grad)
def cbrt_and_grad(x: Any, g: Any, /, out: Any = None, *, backend: Any = None) -> Any:
    """``(cbrt(x), g / (3 y^2))`` on Tensors."""
    if out is not None:
        raise TypeError("cbrtgrad: cbrt_and_grad on Tensors does not take out=")
    y = cbrt(x, backend=backend)
    return y, cbrt_grad(g, y)
