"""Device data in the engine: a GPU array that computes with numpy's operators and ufuncs.

A Tensor made from a CuPy array, a PyTorch CUDA tensor or a numba device
array (numba's CUDA simulator in CI) holds it as a :class:`DeviceArray`: a
thin wrapper whose ``+ - * / **``, ``np.add``-style ufuncs, ``np.add.reduce``,
``astype``, ``reshape``, ``sum`` and ``mean`` run on the device through the
library's :func:`~cbrtgrad.backends.device_math.namespace`. The ops' forwards
and vjps are written once with those operators, so the same code serves
host, dask and device data. Users never see the wrapper: ``Tensor.data``,
``.grad`` and ``grad()``'s results are the library's own arrays (:func:`raw`).

Nothing is copied to the host implicitly: ``np.asarray`` of device data is a
``TypeError`` (as CuPy's is), and so is an op mixing a host array with a
device one, naming which is which. ``Tensor.numpy()`` is the explicit copy.
"""

from __future__ import annotations

import math
from typing import Any, NoReturn

import numpy as np

from .._array_kinds import device_dtype, is_device_array
from ..backends.device_math import namespace

_BINARY = {
    np.add: "add",
    np.subtract: "subtract",
    np.multiply: "multiply",
    np.true_divide: "divide",
}
_SCALARS = (int, float, np.integer, np.floating, np.bool_, bool)


class DeviceArray(np.lib.mixins.NDArrayOperatorsMixin):
    """A device array of any supported library, as the engine computes with it.

    Parameters
    ----------
    raw : device array
        A CuPy array, a PyTorch CUDA tensor, a numba device array (or any
        object with ``__cuda_array_interface__``).

    Examples
    --------
    >>> import numpy as np
    >>> from numba import cuda
    >>> a = DeviceArray(cuda.to_device(np.array([1.0, 2.0])))
    >>> b = a * 3.0 + a
    >>> b.shape, b.dtype, b.xp.to_host(b.raw)
    ((2,), dtype('float64'), array([4., 8.]))
    >>> try:
    ...     np.asarray(a)
    ... except TypeError as error:
    ...     print(str(error)[:60])
    cbrtgrad: device data is not copied to the host implicitly;
    """

    __slots__ = ("_raw", "xp", "shape", "dtype", "one")

    def __init__(self, raw: Any, xp: Any = None) -> None:
        self.xp = namespace(raw) if xp is None else xp
        self._raw = raw
        shape = getattr(raw, "shape", None)
        if shape is None:  # a bare __cuda_array_interface__
            shape = raw.__cuda_array_interface__["shape"]
        self.shape = tuple(shape)
        self.dtype = device_dtype(raw)
        #: For a broadcast of one element (see :meth:`broadcast_to`): that
        #: element's array, which the cube root's gradient kernel reads
        #: instead of the whole (``None`` otherwise).
        self.one: Any = None

    @property
    def raw(self) -> Any:
        """The library's own array (a broadcast of one element made here, on first use)."""
        if self._raw is None:
            self._raw = self.xp.broadcast_to(self.one, self.shape)
        return self._raw

    @property
    def is_lazy_broadcast(self) -> bool:
        """Whether this is a broadcast of :attr:`one` not yet made into an array."""
        return self._raw is None

    def _wrap(self, raw: Any) -> DeviceArray:
        return DeviceArray(raw, self.xp)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("cbrtgrad: len() of a 0-d device array")
        return self.shape[0]

    def __repr__(self) -> str:
        kind = f"{type(self.raw).__module__}.{type(self.raw).__name__}"
        return f"DeviceArray({kind}, shape={self.shape}, dtype={self.dtype})"

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        refuse_host_copy()

    # -- numpy's protocol: the ufuncs the ops' forwards call, and through
    # NDArrayOperatorsMixin the operators (+ - * / ** and unary -) the vjps use.
    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        xp = self.xp
        if method == "reduce" and ufunc is np.add:
            (a,) = inputs
            axis = kwargs.get("axis", 0)
            keepdims = bool(kwargs.get("keepdims", False))
            axes = None if axis is None else _axes(axis, a.ndim)
            return self._wrap(xp.sum(a.raw, axes, keepdims))
        if method != "__call__" or kwargs:
            return NotImplemented
        if ufunc is np.positive:
            return self
        # Broadcasts of one element (a sum's gradient) stay one element
        # through element-wise ops with scalars or with each other: op(one)
        # broadcast is op of the broadcast, element by element.
        lazy = _lazy_shape(inputs)
        operands = [_operand(v, i, lazy is not None) for i, v in enumerate(inputs)]
        name = _BINARY.get(ufunc)
        if name is not None:
            result = getattr(xp, name)(*operands)
        elif ufunc is np.negative:
            result = xp.negative(*operands)
        elif ufunc is np.power:
            base, exponent = operands
            if not isinstance(exponent, _SCALARS):
                raise TypeError("cbrtgrad: the exponent of a device ** must be a real scalar")
            result = xp.power(base, float(exponent))
        else:
            return NotImplemented
        wrapped = self._wrap(result)
        return wrapped if lazy is None else wrapped.broadcast_to(lazy)

    # -- the ndarray methods the engine calls ---------------------------------
    def astype(self, dtype: Any, copy: bool = True) -> DeviceArray:
        """``dtype`` values (a new array unless ``copy=False`` and the dtype is the same)."""
        if not copy and np.dtype(dtype) == self.dtype:
            return self
        return self._wrap(self.xp.astype(self.raw, dtype))

    def copy(self) -> DeviceArray:
        """A new array with the same values."""
        return self._wrap(self.xp.astype(self.raw, self.dtype))

    def reshape(self, *shape: Any, order: str = "C") -> DeviceArray:
        """The same values in ``shape`` (a view where the library gives one); C order only."""
        if order != "C":
            raise ValueError(f"cbrtgrad: device arrays are reshaped in C order, not {order!r}")
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return self._wrap(self.xp.reshape(self.raw, tuple(int(n) for n in shape)))

    def broadcast_to(self, shape: tuple[int, ...]) -> DeviceArray:
        """The values broadcast to ``shape`` (a new array, made on first use for one element).

        NOTE: the gradient of a sum (``loss.sum().backward()``) is one value
        broadcast to the input's shape; made into an array, the cube root's
        gradient kernel would read as many bytes as it writes once more. So a
        broadcast of one element stays one element (:attr:`one`) until its
        :attr:`raw` is asked for, and the gradient kernel reads that element
        once per thread (the cuda backend's one-element ``g``).
        """
        shape = tuple(int(n) for n in shape)
        if self.size != 1 or shape == self.shape or len(shape) < self.ndim:
            return self._wrap(self.xp.broadcast_to(self.raw, shape))
        lazy = DeviceArray.__new__(DeviceArray)
        lazy.xp, lazy._raw, lazy.shape, lazy.dtype = self.xp, None, shape, self.dtype
        lazy.one = self.raw
        return lazy

    def sum(
        self, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False
    ) -> DeviceArray:
        """The sum over ``axis``, accumulated wider than the data (device_math's ``sum``)."""
        axes = None if axis is None else _axes(axis, self.ndim)
        return self._wrap(self.xp.sum(self.raw, axes, bool(keepdims)))

    def mean(
        self, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False
    ) -> DeviceArray:
        """The mean over ``axis`` (what ``np.mean`` calls for a non-ndarray)."""
        axes = None if axis is None else _axes(axis, self.ndim)
        return self._wrap(self.xp.mean(self.raw, axes, bool(keepdims)))

    def all_finite(self) -> bool:
        """Whether no value is inf or nan (one flag copied to the host)."""
        return bool(self.xp.all_finite(self.raw))

    def to_host(self) -> np.ndarray:
        """An explicit copy to a numpy array."""
        return self.xp.to_host(self.raw)

    def full_like(self, value: float, shape: tuple[int, ...] | None = None) -> DeviceArray:
        """A new array of ``value`` in this dtype, on this array's device."""
        shape = self.shape if shape is None else shape
        return self._wrap(self.xp.full(shape, value, self.dtype, self.raw))


def refuse_host_copy() -> NoReturn:
    """Raise the ``TypeError`` for device data asked for as a host array."""
    raise TypeError(
        "cbrtgrad: device data is not copied to the host implicitly; use Tensor.numpy() "
        "(an explicit copy) or keep every operand on the device"
    )


def _axes(axis: Any, ndim: int) -> tuple[int, ...]:
    axes = axis if isinstance(axis, tuple) else (axis,)
    return tuple(sorted(int(a) % ndim if ndim else int(a) for a in axes))


def _lazy_shape(inputs: tuple[Any, ...]) -> tuple[int, ...] | None:
    """The shape, where every device input is a broadcast of one element to it (else None)."""
    shape = None
    for value in inputs:
        if type(value) is DeviceArray:
            if not value.is_lazy_broadcast or (shape is not None and value.shape != shape):
                return None
            shape = value.shape
    return shape


def _operand(value: Any, index: int, one: bool = False) -> Any:
    """A ufunc operand for device_math: the raw array (its one element if ``one``), or a
    scalar; host arrays refused."""
    if type(value) is DeviceArray:
        return value.one if one else value.raw
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return value[()]
    raise TypeError(
        f"cbrtgrad: operand {index} is host data ({type(value).__name__}) and another is a "
        "device array: an op takes all its arrays on one side; copy explicitly "
        "(Tensor.numpy() to the host, or the library's own to-device call)"
    )


def wrap(value: Any) -> Any:
    """``value`` as the engine holds it: a device array wrapped, anything else as is."""
    if type(value) is not np.ndarray and is_device_array(value):
        return DeviceArray(value)
    return value


def raw(value: Any) -> Any:
    """``value`` as users and backends see it: a :class:`DeviceArray` unwrapped."""
    return value.raw if type(value) is DeviceArray else value


def check_one_side(values: tuple[Any, ...], names: str) -> None:
    """Raise ``TypeError`` if some of ``values`` are on the device and others are host arrays.

    Scalars (and 0-d host arrays) go anywhere.
    """
    device = [type(v) is DeviceArray for v in values]
    if not any(device) or all(device):
        return
    for name, value, on_device in zip(names.split(", "), values, device, strict=True):
        if not on_device and isinstance(value, np.ndarray) and value.ndim:
            others = [n for n, d in zip(names.split(", "), device, strict=True) if d]
            raise TypeError(
                f"cbrtgrad: {name} is a host array and {', '.join(others)} on the device: "
                "an op takes all its arrays on one side; copy one explicitly"
            )
