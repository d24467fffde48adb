"""The engine's array type: :class:`Tensor`, with a version counter for in-place writes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .. import _dtypes
from .._array_kinds import is_dask_array, is_device_array
from . import grad_mode

if TYPE_CHECKING:
    # The operators call ops' functions and backward calls graph's; both import
    # this module (they make and test Tensors on every op). So these imports
    # are for the type checker, which sees each operator's real signature, and
    # at run time the package binds the two modules here once, after importing
    # them (cbrtgrad/engine/__init__.py): no import cycle, and each call is one
    # global lookup (a function-level import costs more than a small op).
    from . import graph, ops
    from .node import Node


_new = object.__new__


class engine_write:
    """Context for one of the engine's own writes through a ``.data`` view.

    ``Tensor.data`` is read-only for numpy (see :class:`_DataView`); the
    writes the view sees (item assignment, ufuncs with ``out=``) make it
    writable for the write, then read-only again, and bump the version.
    A view of an array that is read-only itself stays read-only.
    """

    __slots__ = ("array", "opened")

    def __init__(self, array: Any) -> None:
        self.array = array
        self.opened = False

    def __enter__(self) -> None:
        array = self.array
        if not array.flags.writeable and array._owner is not None and array._owner.flags.writeable:
            array.flags.writeable = True
            self.opened = True

    def __exit__(self, *exc: Any) -> None:
        if self.opened:
            self.array.flags.writeable = False


class _Version:
    """A mutable counter shared by a tensor and every view of its data."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0


class _LazyVersion:
    """A tensor's version, plus one if its dask array was rebound since it was saved.

    NOTE: item assignment into a dask array (``t.data[i] = v``) does not go
    through the tensor: dask swaps the array object's graph, so the array's
    key (``name``) is what changes.
    """

    __slots__ = ("version", "array", "name")

    def __init__(self, version: _Version, array: Any) -> None:
        self.version = version
        self.array = array
        self.name = array.name

    @property
    def value(self) -> int:
        return self.version.value + (self.array.name != self.name)


def version_check(t: Tensor) -> tuple[Any, int]:
    """``(counter, value now)`` for a node to check a saved tensor against later."""
    data = t._data
    if type(data) is not np.ndarray and is_dask_array(data):
        return _LazyVersion(t._version, data), t._version.value
    return t._version, t._version.value


def host_data(value: Any, name: str) -> Any:
    """``value`` as a Tensor's data: an ndarray (no copy when it is one) or a dask array.

    A device array (CUDA array interface, or numba's simulator) is a
    ``TypeError``: ``np.asarray`` would copy it to the host without a word.
    """
    if type(value) is not np.ndarray:
        if is_dask_array(value):
            _dtypes.compute_dtype(value.dtype, name)
            return value
        refuse_device_array(value, name)
        value = np.asarray(value)
    _dtypes.compute_dtype(value.dtype, name)
    return value


def refuse_device_array(value: Any, name: str) -> None:
    """Raise ``TypeError`` for a device array (the engine would copy it to the host)."""
    if is_device_array(value):
        raise TypeError(
            f"cbrtgrad: {name} is a device array ({type(value).__name__}); a Tensor holds "
            "host data (a numpy or dask array) and will not copy it to the host silently: "
            "copy it explicitly first (e.g. .copy_to_host())"
        )


class _DataView(np.ndarray):
    """What ``Tensor.data`` returns: a plain-looking ndarray view that counts writes.

    Item assignment and ufuncs writing into it (``out=``, ``+=``, ``ufunc.at``)
    bump the owning tensor's version, so a saved value modified after the
    forward is caught by backward instead of giving a silently wrong gradient.

    NOTE: numpy has writers a subclass never sees (``fill``, ``np.copyto``,
    ``.flat[i] = v``, ``np.put``, ``sort``, any C code writing the buffer), so
    the view is read-only for numpy: those raise numpy's ``ValueError`` ("...
    read-only") instead of writing unseen. The two writes it sees open it for
    the write (:class:`engine_write`).
    """

    _version: _Version | None
    #: The tensor's array this is a view of (whether it may be written at all).
    _owner: np.ndarray | None

    def __array_finalize__(self, obj: Any) -> None:
        # Views (slices, reshapes) share the buffer and the counter; copies
        # (``base is None``) are new memory and must not bump it.
        if isinstance(obj, _DataView) and self.base is not None:
            self._version = obj._version
            self._owner = obj._owner
        else:
            self._version = None
            self._owner = None

    def _bump(self) -> None:
        if self._version is not None:
            self._version.value += 1

    def __setitem__(self, key: Any, value: Any) -> None:
        with engine_write(self):
            super().__setitem__(key, value)
        self._bump()

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if any(isinstance(i, Tensor) for i in inputs):
            return NotImplemented  # let Tensor.__array_ufunc__ take it
        out = kwargs.get("out")
        outs: tuple[Any, ...] = () if out is None else out if isinstance(out, tuple) else (out,)
        # ``ufunc.at(a, indices, b)`` writes into a.
        written = (*outs, inputs[0]) if method == "at" else outs
        guards = [engine_write(o) for o in written if isinstance(o, _DataView)]
        for guard in guards:
            guard.__enter__()
        try:
            # Plain views, made while the written ones are open.
            plain = tuple(i.view(np.ndarray) if isinstance(i, _DataView) else i for i in inputs)
            if outs:
                kwargs["out"] = tuple(
                    o.view(np.ndarray) if isinstance(o, _DataView) else o for o in outs
                )
            result = getattr(ufunc, method)(*plain, **kwargs)
        finally:
            for guard in reversed(guards):
                guard.__exit__()
        for o in written:
            if isinstance(o, _DataView):
                o._bump()
        if method == "at":
            return None
        if outs and method == "__call__":
            return outs[0] if len(outs) == 1 else outs
        return result

    def __repr__(self) -> str:
        return repr(self.view(np.ndarray))

    def __str__(self) -> str:
        return str(self.view(np.ndarray))


class Tensor:
    """An array that records the ops applied to it, for reverse-mode gradients.

    Parameters
    ----------
    data : array_like or dask.array.Array
        The values; float16, float32, float64, bool or integers. A numpy array
        is wrapped without a copy; a dask array stays lazy (so do the results
        and gradients computed from it, until the user computes them).
    requires_grad : bool, default False
        Whether backward computes ``.grad`` for this tensor (float dtypes only).

    Attributes
    ----------
    grad : ndarray or None
        The gradient accumulated by :meth:`backward` (a ``Tensor`` after
        ``backward(create_graph=True)``).
    grad_fn : Node or None
        The node that made this tensor (``None`` for a leaf).

    Raises
    ------
    TypeError
        For data of a non-real dtype, for a device array (GPU memory: it is
        not copied to the host behind your back), and for ``requires_grad``
        on a non-float tensor.

    Notes
    -----
    NOTE: writes through ``.data`` and in-place operators bump
    :attr:`version`; writes through the original numpy array passed in
    bypass it. ``.numpy()`` returns a read-only view for that reason.

    NOTE: for dask data, ``.data`` is the dask array itself and item
    assignment into it (dask rebinds the array object to a new graph) is not
    counted; in-place operators and assigning ``t.data = ...`` are, and a
    backward through a saved dask value that was rebound raises as for numpy.

    Examples
    --------
    >>> import numpy as np, cbrtgrad as cg
    >>> x = cg.Tensor(np.array([-8.0, 1.0, 27.0]), requires_grad=True)
    >>> loss = (cg.cbrt(x) * 2.0 + x).sum()
    >>> loss.backward()
    >>> x.grad
    array([1.16666667, 1.66666667, 1.07407407])
    >>> loss.grad_fn
    <SumBackward>
    """

    __slots__ = ("_data", "_requires_grad", "grad", "grad_fn", "_version", "__weakref__")

    _data: np.ndarray
    _requires_grad: bool
    grad: Any
    grad_fn: Node | None
    _version: _Version

    # Tensor wins over ndarray in mixed binary operators.
    __array_priority__ = 1000

    def __init__(self, data: Any, *, requires_grad: bool = False) -> None:
        self._data = data._data if isinstance(data, Tensor) else host_data(data, "data")
        self.grad = None
        self.grad_fn = None
        self._version = _Version()
        self._requires_grad = False
        self.requires_grad = requires_grad

    @staticmethod
    def _make(data: np.ndarray, grad_fn: Node | None) -> Tensor:
        # NOTE: hot path: no validation, the engine made ``data`` itself; a
        # static method and a bound ``object.__new__`` (no class argument to pass).
        t: Tensor = _new(Tensor)
        t._data = data
        t._requires_grad = grad_fn is not None
        t.grad = None
        t.grad_fn = grad_fn
        t._version = _Version()
        return t

    # -- attributes ---------------------------------------------------------
    @property
    def data(self) -> np.ndarray:
        """The values, as an ndarray view whose writes bump :attr:`version`.

        For dask data: the (lazy) dask array itself.
        """
        if is_dask_array(self._data):
            return self._data
        view = self._data.view(_DataView)
        view._version = self._version
        view._owner = self._data
        view.flags.writeable = False  # see _DataView: only the writes it counts
        return view

    @data.setter
    def data(self, value: Any) -> None:
        if isinstance(value, _DataView) and value._version is self._version:
            return  # ``t.data += 1`` wrote in place and already bumped the version
        self._data = host_data(value, "data")
        self._version.value += 1

    @property
    def requires_grad(self) -> bool:
        """Whether backward computes a gradient for this tensor."""
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"cbrtgrad: requires_grad must be a bool, got {type(value).__name__}")
        if self.grad_fn is not None:
            raise RuntimeError(
                "cbrtgrad: requires_grad can only be changed on a leaf tensor; use .detach()"
            )
        if value and self._data.dtype.kind != "f" and self._data.dtype.name != "bfloat16":
            raise TypeError(
                f"cbrtgrad: only floating-point tensors can require grad, got dtype "
                f"{self._data.dtype}"
            )
        self._requires_grad = bool(value)

    @property
    def is_leaf(self) -> bool:
        """True for tensors not made by a recorded op."""
        return self.grad_fn is None

    @property
    def version(self) -> int:
        """How many in-place writes this tensor's data has had."""
        return self._version.value

    @property
    def shape(self) -> tuple[int, ...]:
        return self._data.shape

    @property
    def dtype(self) -> np.dtype:
        return self._data.dtype

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def size(self) -> int:
        return self._data.size

    def __len__(self) -> int:
        return len(self._data)

    def detach(self) -> Tensor:
        """A new leaf sharing the data, cut from the graph."""
        t = Tensor._make(self._data, None)
        t._version = self._version
        return t

    def numpy(self) -> np.ndarray:
        """The values as a read-only ndarray view (write through ``.data``).

        Dask data is computed (``.data`` keeps it lazy).
        """
        if is_dask_array(self._data):
            view = np.asarray(self._data)
            view.flags.writeable = False
            return view
        view = self._data.view()
        view.flags.writeable = False
        return view

    def item(self) -> Any:
        """The single value as a Python scalar (dask data is computed)."""
        return np.asarray(self._data).item()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        # Never a writable alias (a write through it would bypass the version
        # counter): a read-only view, or a new array when a copy or another
        # dtype is asked for.
        if copy:
            return np.array(self._data, dtype=dtype, copy=True)
        if dtype is None or np.dtype(dtype) == self._data.dtype:
            return self.numpy()
        if copy is False:
            raise ValueError(
                f"cbrtgrad: cannot give a Tensor of dtype {self._data.dtype} as {np.dtype(dtype)} "
                "without a copy (copy=False)"
            )
        return np.asarray(self._data).astype(dtype)

    def __repr__(self) -> str:
        # A dask array is shown as dask shows it: printing must not compute it.
        if is_dask_array(self._data):
            body = repr(self._data)
        else:
            body = np.array2string(self._data, separator=", ", prefix="Tensor(")
        extra = ""
        if self.grad_fn is not None:
            extra = f", grad_fn=<{type(self.grad_fn).__name__}>"
        elif self._requires_grad:
            extra = ", requires_grad=True"
        if self._data.dtype != np.float64:
            extra = f", dtype={self._data.dtype}" + extra
        return f"Tensor({body}{extra})"

    # -- Python protocols ---------------------------------------------------
    def __bool__(self) -> bool:
        # As an ndarray: the value of one element, else an error (never
        # Python's default through __len__, which says True for [0.0]).
        if self._data.size != 1:
            raise ValueError(
                f"cbrtgrad: the truth value of a Tensor of {self._data.size} elements is "
                "ambiguous; use .numpy().any() or .numpy().all()"
            )
        return bool(np.asarray(self._data).reshape(()))

    # Comparisons are element-wise, as numpy's, and give a plain bool ndarray
    # (not differentiable). A Tensor stays hashable by identity, as the
    # backward's dicts need (and as a PyTorch tensor is).
    def __eq__(self, other: object) -> Any:  # type: ignore[override]
        return np.equal(np.asarray(self._data), _compared(other))

    def __ne__(self, other: object) -> Any:  # type: ignore[override]
        return np.not_equal(np.asarray(self._data), _compared(other))

    def __lt__(self, other: Any) -> Any:
        return np.less(np.asarray(self._data), _compared(other))

    def __le__(self, other: Any) -> Any:
        return np.less_equal(np.asarray(self._data), _compared(other))

    def __gt__(self, other: Any) -> Any:
        return np.greater(np.asarray(self._data), _compared(other))

    def __ge__(self, other: Any) -> Any:
        return np.greater_equal(np.asarray(self._data), _compared(other))

    __hash__ = object.__hash__

    def _leaf_only(self, what: str) -> None:
        if self.grad_fn is not None:
            raise RuntimeError(
                f"cbrtgrad: only leaf tensors support {what} (this one was made by "
                f"{type(self.grad_fn).__name__}); use .detach() first"
            )

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle a leaf: its values, ``requires_grad`` and ``.grad`` (never a graph)."""
        self._leaf_only("pickling")
        data = self._data if is_dask_array(self._data) else np.asarray(self._data)
        return (_restore, (data, self._requires_grad, self.grad))

    def __copy__(self) -> Tensor:
        """A new leaf with its own copy of the values (as ``copy.copy`` of an ndarray)."""
        return self.__deepcopy__({})

    def __deepcopy__(self, memo: dict[int, Any]) -> Tensor:
        self._leaf_only("copying")
        data = self._data if is_dask_array(self._data) else np.array(self._data, copy=True)
        grad = self.grad
        if isinstance(grad, np.ndarray):
            grad = grad.copy()
        return _restore(data, self._requires_grad, grad)

    # -- interoperability ---------------------------------------------------
    def __cbrtgrad_function__(
        self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        impl = ops.API_OPS.get(func)
        if impl is None:
            return NotImplemented
        return impl(*args, **kwargs) if kwargs else impl(*args)  # NOTE: hot path: no kwargs

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method != "__call__" or kwargs:
            return NotImplemented
        op = ops.UFUNC_OPS.get(ufunc)
        if op is None:
            return NotImplemented
        return op(*inputs)

    # -- ops ----------------------------------------------------------------
    def __add__(self, other: Any) -> Tensor:
        return ops.add(self, other)

    def __radd__(self, other: Any) -> Tensor:
        return ops.add(other, self)

    def __sub__(self, other: Any) -> Tensor:
        return ops.subtract(self, other)

    def __rsub__(self, other: Any) -> Tensor:
        return ops.subtract(other, self)

    def __mul__(self, other: Any) -> Tensor:
        return ops.multiply(self, other)

    def __rmul__(self, other: Any) -> Tensor:
        return ops.multiply(other, self)

    def __truediv__(self, other: Any) -> Tensor:
        return ops.divide(self, other)

    def __rtruediv__(self, other: Any) -> Tensor:
        return ops.divide(other, self)

    def __neg__(self) -> Tensor:
        return ops.negative(self)

    def __pos__(self) -> Tensor:
        return self

    def __pow__(self, exponent: Any) -> Tensor:
        return ops.power(self, exponent)

    def __rpow__(self, base: Any) -> Tensor:
        raise TypeError(
            f"cbrtgrad: only Tensor ** scalar is supported; got {type(base).__name__} ** Tensor"
        )

    def __iadd__(self, other: Any) -> Tensor:
        return self._inplace(ops.add, other)

    def __isub__(self, other: Any) -> Tensor:
        return self._inplace(ops.subtract, other)

    def __imul__(self, other: Any) -> Tensor:
        return self._inplace(ops.multiply, other)

    def __itruediv__(self, other: Any) -> Tensor:
        return self._inplace(ops.divide, other)

    def __ipow__(self, exponent: Any) -> Tensor:
        return self._inplace(ops.power, exponent)

    def _inplace(self, op: Any, other: Any) -> Tensor:
        if self.grad_fn is None and self._requires_grad and grad_mode.grad_enabled():
            raise RuntimeError(
                "cbrtgrad: a leaf Tensor that requires grad cannot be modified in place "
                "while grad is recorded; do it inside `with cbrtgrad.no_grad():`"
            )
        new = op(self, other)
        if new.shape != self.shape:
            raise ValueError(
                f"cbrtgrad: in-place result has shape {new.shape}; expected {self.shape}"
            )
        if is_dask_array(self._data) or is_dask_array(new._data):
            # A dask graph is never written to: the tensor is rebound to the
            # new lazy values (cast as copyto would), and the version bump
            # makes a backward through the old saved values fail loudly.
            if not np.can_cast(new.dtype, self.dtype, "same_kind"):
                raise TypeError(
                    f"cbrtgrad: cannot cast the in-place result of dtype {new.dtype} to "
                    f"{self.dtype} (casting rule 'same_kind')"
                )
            self._data = _lazy_like(new._data, self._data).astype(self.dtype, copy=False)
        else:
            np.copyto(self._data, new._data, casting="same_kind")
        self._version.value += 1
        if new.grad_fn is not None:
            self.grad_fn = new.grad_fn
            self._requires_grad = True
        return self

    def sum(
        self, axis: Any = None, dtype: Any = None, out: Any = None, *, keepdims: bool = False
    ) -> Tensor:
        """Sum over ``axis`` (all axes by default); ``np.sum(tensor)`` calls it.

        Parameters
        ----------
        axis : int or tuple of int, optional
            Axes to reduce.
        dtype, out : None
            Only for ``np.sum``'s signature: anything else is a ``TypeError``.
        keepdims : bool, default False
            Keep the reduced axes with size one.

        Returns
        -------
        Tensor

        Examples
        --------
        >>> import numpy as np, cbrtgrad as cg
        >>> cg.Tensor(np.ones((2, 3))).sum(axis=0)
        Tensor([2., 2., 2.])
        """
        return ops.reduce(ops.SumBackward, self, axis, dtype, out, keepdims)

    def mean(
        self, axis: Any = None, dtype: Any = None, out: Any = None, *, keepdims: bool = False
    ) -> Tensor:
        """Mean over ``axis`` (all axes by default); ``np.mean(tensor)`` calls it.

        Parameters
        ----------
        axis : int or tuple of int, optional
            Axes to reduce.
        dtype, out : None
            Only for ``np.mean``'s signature: anything else is a ``TypeError``.
        keepdims : bool, default False
            Keep the reduced axes with size one.

        Returns
        -------
        Tensor

        Examples
        --------
        >>> import numpy as np, cbrtgrad as cg
        >>> np.mean(cg.Tensor(np.array([1.0, 2.0, 6.0])))
        Tensor(3.)
        """
        return ops.reduce(ops.MeanBackward, self, axis, dtype, out, keepdims)

    def reshape(self, *shape: Any) -> Tensor:
        """The same values in a new shape (differentiable).

        Parameters
        ----------
        *shape : int or tuple of int
            The new shape, as ``reshape(2, 3)`` or ``reshape((2, 3))``.

        Returns
        -------
        Tensor

        Examples
        --------
        >>> import numpy as np, cbrtgrad as cg
        >>> cg.Tensor(np.arange(4.0)).reshape(2, 2).shape
        (2, 2)
        """
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return ops.reshape(self, shape)

    def astype(self, dtype: Any) -> Tensor:
        """A differentiable cast to a float dtype (the gradient is cast back).

        Parameters
        ----------
        dtype : numpy.dtype
            float16, float32 or float64.

        Returns
        -------
        Tensor

        Examples
        --------
        >>> import numpy as np, cbrtgrad as cg
        >>> cg.Tensor(np.array([8.0])).astype(np.float32).dtype
        dtype('float32')
        """
        return ops.cast(self, dtype)

    def backward(
        self, gradient: Any = None, *, retain_graph: bool | None = None, create_graph: bool = False
    ) -> None:
        """Accumulate ``d self / d leaf`` into every leaf's ``.grad``.

        Parameters
        ----------
        gradient : array_like, optional
            ``dL/dself``, of this tensor's shape; may be omitted only when the
            tensor has one element.
        retain_graph : bool, optional
            Keep the saved values for another backward (default: ``create_graph``).
        create_graph : bool, default False
            Record the backward itself, for second derivatives; ``.grad`` is
            then a ``Tensor``.

        Raises
        ------
        RuntimeError
            If the tensor does not require grad, if ``gradient`` is omitted for
            a tensor of several elements, if the graph was already freed by an
            earlier backward, or if a saved value was modified in place.
        ValueError, TypeError
            If ``gradient`` has the wrong shape or a non-float dtype.

        Examples
        --------
        >>> import numpy as np, cbrtgrad as cg
        >>> x = cg.Tensor(np.array([8.0]), requires_grad=True)
        >>> cg.cbrt(x).sum().backward()
        >>> x.grad
        array([0.08333333])
        """
        graph.backward(self, gradient, retain_graph, create_graph)


def _compared(other: Any) -> Any:
    return np.asarray(other._data) if isinstance(other, Tensor) else other


def _restore(data: Any, requires_grad: bool, grad: Any) -> Tensor:
    """A leaf from pickled or copied parts (see ``Tensor.__reduce__``)."""
    t = Tensor(data, requires_grad=requires_grad)
    t.grad = grad
    return t


def _lazy_like(value: Any, like: Any) -> Any:
    if is_dask_array(value):
        return value
    import dask.array as da

    return da.from_array(np.asarray(value), chunks=like.chunks)
