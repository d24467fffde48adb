"""The engine's array type: :class:`Tensor`, with a version counter for in-place writes."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..arrays.kinds import is_dask_array
from . import grad_mode
from .array_api import StandardArray, is_standard_array, refuse_host_copy
from .data import lazy_like, tensor_data
from .methods import Methods
from .op_table import API_OPS, UFUNC_OPS
from .operators import Operators
from .versions import (
    DataView,
    Version,
    alias,
    counter_of,
    set_tensor_counter,
    tensor_counter,
    write_target,
)

# The operators that record ops run the functions the op modules
# entered in the op table (op_table.py): those modules import this one, so
# this one imports none of them.
_UFUNC = UFUNC_OPS


_new = object.__new__
_FLOATS = frozenset({np.dtype(np.float32), np.dtype(np.float64)})


def adopt(value: Any, name: str) -> tuple[Any, Version | None]:
    """``value`` as a Tensor's data, and the counter of the tensor whose memory it is (or None).

    Memory is never shared under two counters (a write counted by one would
    be unseen by the other's saved values): a Tensor gives its data and its
    counter (as ``detach()``); its ``.data`` view gives a writable array over
    the same memory (writable as the tensor is) and its counter; any other
    ndarray over a tensor's memory (``t.numpy()``, ``np.asarray(t.data)``,
    their views) is read-only, and gives its counter too (:func:`counter_of`).
    """
    if isinstance(value, Tensor):
        return value._data, value._version
    if isinstance(value, DataView) and value._version is not None:
        return write_target(value), value._version
    data = tensor_data(value, name)
    if type(data) is np.ndarray and data.base is not None:
        return data, counter_of(data)
    return data, None


class Tensor(Operators, Methods):
    """An array that records the ops applied to it, for reverse-mode gradients.

    Parameters
    ----------
    data : array_like, Tensor, dask.array.Array or device array
        The values; float16, float32, float64, bool or integers. A numpy array
        is wrapped without a copy; a dask array stays lazy (so do the results
        and gradients computed from it, until the user computes them); a CuPy
        array, PyTorch CUDA tensor or numba device array stays on its device.
        A Tensor, its ``.data`` or an array over its memory is shared with it,
        version counter included (a write through either is seen by the
        other's saved values). A masked array is refused: a Tensor has no mask.
    requires_grad : bool, default False
        Whether backward computes ``.grad`` for this tensor (float dtypes only).

    Attributes
    ----------
    grad : array or None
        The gradient accumulated by :meth:`backward`, an array of the data's
        kind (numpy, dask, or the device library's); a ``Tensor`` after
        ``backward(create_graph=True)``.
    grad_fn : Node or None
        The node that made this tensor (``None`` for a leaf).

    Raises
    ------
    TypeError
        For data of a non-real dtype or a masked array, and for
        ``requires_grad`` on a non-float tensor.

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

    __slots__ = ("_data", "_requires_grad", "grad", "grad_fn", "_counter", "__weakref__")

    _data: Any  # an ndarray, a dask array or a StandardArray
    _requires_grad: bool
    grad: Any
    grad_fn: Any  # a Node or None (node.py imports this module, not the reverse)
    _counter: Version | None  # None until the counter is first read
    #: The version counter (made on its first read: versions.tensor_counter).
    _version = property(tensor_counter, set_tensor_counter)

    #: What ``cbrtgrad.cbrt(tensor)`` without keywords calls directly (see
    #: api.cbrt): the op table :meth:`__cbrtgrad_function__` reads too.
    __cbrtgrad_functions__ = API_OPS

    # Tensor wins over ndarray in mixed binary operators.
    __array_priority__ = 1000

    def __init__(self, data: Any, *, requires_grad: bool = False) -> None:
        self.grad = None
        self.grad_fn = None
        self._requires_grad = False
        if type(data) is np.ndarray and data.base is None and data.dtype in _FLOATS:
            # NOTE: hot path: a float32/float64 ndarray that owns its memory is
            # no other tensor's (adopt's other cases) and of a dtype that can
            # require grad (the setter's checks).
            self._data = data
            self._counter = None
            if requires_grad is True or requires_grad is False:
                self._requires_grad = requires_grad
                return
        else:
            self._data, self._counter = adopt(data, "data")
        self.requires_grad = requires_grad

    @staticmethod
    def _make(data: np.ndarray, grad_fn: Any) -> Tensor:
        # NOTE: hot path: no validation, the engine made ``data`` itself; a
        # static method and a bound ``object.__new__`` (no class argument to pass).
        t: Tensor = _new(Tensor)
        t._data = data
        t._requires_grad = grad_fn is not None
        t.grad = None
        t.grad_fn = grad_fn
        t._counter = None
        return t

    # -- attributes ---------------------------------------------------------
    @property
    def data(self) -> np.ndarray:
        """The values, as an ndarray view whose writes bump :attr:`version`.

        For dask data: the (lazy) dask array itself.
        """
        data = self._data
        if type(data) is StandardArray:
            return data.raw  # the library's own array: its writes are not counted
        if is_dask_array(data):
            return data
        # Read-only, for good (see DataView: only the writes it counts).
        view = alias(data, self._version, writable=False).view(DataView)
        view._version = self._version
        view._owner = data
        return view

    @data.setter
    def data(self, value: Any) -> None:
        if isinstance(value, DataView) and value._owner is self._data and _whole(value):
            return  # ``t.data += 1`` wrote in place and already bumped the version
        data, version = adopt(value, "data")
        self._data = data
        self._version.value += 1  # what was saved of this tensor is not its data now
        if version is not None:
            self._version = version  # the memory's counter from now on

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
        data = self._data
        if type(data) is StandardArray or is_dask_array(data):
            view = data.to_host() if type(data) is StandardArray else np.asarray(data)
            view.flags.writeable = False
            return view
        return alias(data, self._version, writable=False)

    def item(self) -> Any:
        """The single value as a Python scalar (dask data is computed)."""
        return self.numpy().item()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        # Never a writable alias (a write through it would bypass the version
        # counter): a read-only view, or a new array when a copy or another
        # dtype is asked for.
        if type(self._data) is StandardArray:
            refuse_host_copy(self._data.library)
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
        elif type(self._data) is StandardArray:
            data = self._data  # printing must not copy it to the host
            where = f" on {data.device}" if data.on_device else ""
            body = f"<{data.library} array of shape {self.shape}{where}>"
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

    def _leaf_only(self, what: str) -> None:
        if self.grad_fn is not None:
            raise RuntimeError(
                f"cbrtgrad: only leaf tensors support {what} (this one was made by "
                f"{type(self.grad_fn).__name__}); use .detach() first"
            )

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle a leaf: its values, ``requires_grad`` and ``.grad`` (never a graph)."""
        self._leaf_only("pickling")
        data = self._data
        if type(data) is StandardArray:
            data = data.raw  # pickled by its library (CuPy's and PyTorch's can be)
        elif not is_dask_array(data):
            data = np.asarray(data)
        return (_restore, (data, self._requires_grad, self.grad))

    def __copy__(self) -> Tensor:
        """A new leaf with its own copy of the values (as ``copy.copy`` of an ndarray)."""
        return self.__deepcopy__({})

    def __deepcopy__(self, memo: dict[int, Any]) -> Tensor:
        self._leaf_only("copying")
        data = self._data
        if type(data) is StandardArray:
            data = data.copy().raw
        elif not is_dask_array(data):
            data = np.array(data, copy=True)
        grad = self.grad
        if isinstance(grad, np.ndarray):
            grad = grad.copy()
        elif grad is not None and is_standard_array(grad):
            grad = StandardArray(grad).copy().raw
        return _restore(data, self._requires_grad, grad)

    # -- interoperability ---------------------------------------------------
    def __cbrtgrad_function__(
        self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        impl = API_OPS.get(func)
        if impl is None:
            return NotImplemented
        return impl(*args, **kwargs) if kwargs else impl(*args)  # NOTE: hot path: no kwargs

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method != "__call__" or kwargs:
            return NotImplemented
        op = _UFUNC.get(ufunc)
        if op is None:
            return NotImplemented
        return op(*inputs)

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
        if type(self._data) is StandardArray or type(new._data) is StandardArray:
            # Device data is rebound too (no copy into the old buffer, whose
            # other users the engine does not know); the version bump guards
            # the saved values.
            if not np.can_cast(new.dtype, self.dtype, "same_kind"):
                raise TypeError(
                    f"cbrtgrad: cannot cast the in-place result of dtype {new.dtype} to "
                    f"{self.dtype} (casting rule 'same_kind')"
                )
            self._data = new._data.astype(self.dtype, copy=False)
        elif is_dask_array(self._data) or is_dask_array(new._data):
            # A dask graph is never written to: the tensor is rebound to the
            # new lazy values (cast as copyto would), and the version bump
            # makes a backward through the old saved values fail loudly.
            if not np.can_cast(new.dtype, self.dtype, "same_kind"):
                raise TypeError(
                    f"cbrtgrad: cannot cast the in-place result of dtype {new.dtype} to "
                    f"{self.dtype} (casting rule 'same_kind')"
                )
            self._data = lazy_like(new._data, self._data).astype(self.dtype, copy=False)
        else:
            np.copyto(self._data, new._data, casting="same_kind")
        self._version.value += 1
        if new.grad_fn is not None:
            self.grad_fn = new.grad_fn
            self._requires_grad = True
        return self


def _whole(view: DataView) -> bool:
    """Whether ``view`` is its tensor's whole data as it is (not a slice, transpose or reshape)."""
    owner = view._owner
    assert owner is not None
    return (
        view.shape == owner.shape
        and view.strides == owner.strides
        and view.__array_interface__["data"][0] == owner.__array_interface__["data"][0]
    )


def _restore(data: Any, requires_grad: bool, grad: Any) -> Tensor:
    """A leaf from pickled or copied parts (see ``Tensor.__reduce__``)."""
    t = Tensor(data, requires_grad=requires_grad)
    t.grad = grad
    return t
