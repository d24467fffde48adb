"""Arrays of other libraries in the engine: the array API standard, under numpy's operators.

A Tensor made from a CuPy array, a PyTorch tensor (CUDA or CPU), a JAX array
or an ``array_api_strict`` array holds it as a :class:`StandardArray`: a thin
wrapper whose ``+ - * / **``, ``np.add``-style ufuncs, ``np.add.reduce``,
``astype``, ``reshape``, ``sum`` and ``mean`` call the functions of the
array's array API namespace (``array_api_compat.array_namespace``), so they
run in that library, on its device. The ops' forwards and vjps are written
once with numpy's operators, so the same code serves numpy, dask and every
array API library; the cube root and its gradient are cbrtgrad's kernels
(:func:`kernel_input`, :meth:`StandardArray.from_kernel`). Users never see the
wrapper: ``Tensor.data``, ``.grad`` and ``grad()``'s results are the library's
own arrays (:func:`raw`). A numba device array is viewed as a CuPy array
(no copy) and given back as a numba device array; without CuPy it is refused
(:func:`cbrtgrad.arrays.namespaces.standard_view`).

Nothing is converted implicitly: ``np.asarray`` of such data is a
``TypeError`` (as CuPy's is), and so is an op mixing a numpy array with an
array of another library, naming which is which. ``Tensor.numpy()`` is the
explicit copy.
"""

from __future__ import annotations

import math
from typing import Any, NoReturn

import numpy as np

from ..arrays import namespaces as _namespaces
from ..arrays.kinds import is_dask_array, is_device_array

_BINARY = {
    np.add: "add",
    np.subtract: "subtract",
    np.multiply: "multiply",
    np.true_divide: "divide",
}
_SCALARS = (int, float, np.integer, np.floating, np.bool_, bool)
_F32 = np.dtype(np.float32)


class StandardArray(np.lib.mixins.NDArrayOperatorsMixin):
    """An array of an array API library, as the engine computes with it.

    Parameters
    ----------
    raw : array
        A CuPy array, a PyTorch tensor, a JAX array, an ``array_api_strict``
        array (any array ``array_api_compat`` has a namespace for), or a
        numba device array where CuPy is installed.
    xp : namespace, optional
        Its namespace, where the caller has it.

    Examples
    --------
    >>> import array_api_strict as xp
    >>> a = StandardArray(xp.asarray([1.0, 2.0]))
    >>> b = a * 3.0 + a
    >>> b.shape, b.dtype, b.to_host()
    ((2,), dtype('float64'), array([4., 8.]))
    >>> type(b.raw).__module__.split(".")[0]
    'array_api_strict'
    >>> try:
    ...     np.asarray(a)
    ... except TypeError as error:
    ...     print(str(error)[:52])
    cbrtgrad: a Tensor's array_api_strict data is not co
    """

    __slots__ = ("_array", "xp", "shape", "dtype", "one", "on_device", "_numba", "device")

    def __init__(self, raw: Any, xp: Any = None) -> None:
        array, self._numba = _namespaces.standard_view(raw)
        self._array = array
        self.xp = _namespaces.namespace(array) if xp is None else xp
        self.shape = tuple(array.shape)
        self.dtype = _namespaces.numpy_dtype(array.dtype)
        self.on_device = is_device_array(array)
        self.device = _namespaces.device(array)
        #: For a broadcast of one element (see :meth:`broadcast_to`): that
        #: element's array, which the cube root's gradient kernel reads
        #: instead of the whole (``None`` otherwise).
        self.one: Any = None

    def _like(self, array: Any) -> StandardArray:
        """A new wrapper of ``array``, a result of this one's namespace."""
        new = StandardArray.__new__(StandardArray)
        new._array, new._numba, new.xp, new.one = array, self._numba, self.xp, None
        new.shape = tuple(array.shape)
        new.dtype = _namespaces.numpy_dtype(array.dtype)
        new.on_device, new.device = self.on_device, self.device
        return new

    @property
    def array(self) -> Any:
        """The namespace's array (a broadcast of one element made here, on first use)."""
        if self._array is None:
            self._array = self.xp.broadcast_to(self.one, self.shape)
        return self._array

    @property
    def raw(self) -> Any:
        """The array as its user gave its kind: the namespace's, or a numba device array."""
        if self._numba:
            from numba import cuda

            return cuda.as_cuda_array(self.array)
        return self.array

    @property
    def is_lazy_broadcast(self) -> bool:
        """Whether this is a broadcast of :attr:`one` not yet made into an array."""
        return self._array is None

    @property
    def library(self) -> str:
        """The library's name, for messages."""
        return "numba" if self._numba else type(self.array).__module__.split(".")[0]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("cbrtgrad: len() of a 0-d array")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"StandardArray({self.library}, shape={self.shape}, dtype={self.dtype})"

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        refuse_host_copy(self.library)

    # -- numpy's protocol: the ufuncs the ops' forwards call, and through
    # NDArrayOperatorsMixin the operators (+ - * / ** and unary -) the vjps use.
    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        xp = self.xp
        if method == "reduce" and ufunc is np.add:
            (a,) = inputs
            axis = kwargs.get("axis", 0)
            return a.sum(axis, keepdims=bool(kwargs.get("keepdims", False)))
        if method != "__call__" or kwargs:
            return NotImplemented
        if ufunc is np.positive:
            return self
        # Broadcasts of one element (a sum's gradient) stay one element
        # through element-wise ops with scalars or with each other: op(one)
        # broadcast is op of the broadcast, element by element.
        lazy = _lazy_shape(inputs)
        operands = [_operand(v, i, self, lazy is not None) for i, v in enumerate(inputs)]
        name = _BINARY.get(ufunc)
        if name is not None:
            result = getattr(xp, name)(*operands)
        elif ufunc is np.negative:
            result = xp.negative(*operands)
        elif ufunc is np.power:
            base, exponent = operands
            if not isinstance(exponent, (int, float)):
                raise TypeError("cbrtgrad: the exponent of ** on a Tensor's array must be a scalar")
            result = xp.pow(base, float(exponent))
        else:
            return NotImplemented
        wrapped = self._like(result)
        return wrapped if lazy is None else wrapped.broadcast_to(lazy)

    # -- the ndarray methods the engine calls ---------------------------------
    def astype(self, dtype: Any, copy: bool = True) -> StandardArray:
        """``dtype`` values (a new array unless ``copy=False`` and the dtype is the same)."""
        if not copy and np.dtype(dtype) == self.dtype:
            return self
        return self._like(self.xp.astype(self.array, _namespaces.library_dtype(self.xp, dtype)))

    def copy(self) -> StandardArray:
        """A new array with the same values."""
        return self._like(self.xp.asarray(self.array, copy=True))

    def reshape(self, *shape: Any, order: str = "C") -> StandardArray:
        """The same values in ``shape`` (a view where the library gives one); C order only."""
        if order != "C":
            raise ValueError(f"cbrtgrad: a Tensor's {self.library} data reshapes in C order only")
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return self._like(self.xp.reshape(self.array, tuple(int(n) for n in shape)))

    def broadcast_to(self, shape: tuple[int, ...]) -> StandardArray:
        """The values broadcast to ``shape`` (made on first use, for one element).

        NOTE: the gradient of a sum (``loss.sum().backward()``) is one value
        broadcast to the input's shape; on a GPU the cube root's gradient
        kernel reads it once per thread (the cuda backend's one-element
        ``g``), so a broadcast of one element stays one element (:attr:`one`)
        until its :attr:`array` is asked for.
        """
        shape = tuple(int(n) for n in shape)
        if self.size != 1 or shape == self.shape or len(shape) < self.ndim:
            return self._like(self.xp.broadcast_to(self.array, shape))
        lazy = self._like(self.array)
        lazy._array, lazy.shape, lazy.one = None, shape, self.array
        return lazy

    def sum(
        self, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False
    ) -> StandardArray:
        """The sum over ``axis`` by the library (half precision accumulated in float32)."""
        axes = None if axis is None else _axes(axis, self.ndim)
        if self.dtype.itemsize == 2:
            wide = self.xp.sum(self.array, axis=axes, keepdims=bool(keepdims), dtype=self._f32())
            return self._like(self.xp.astype(wide, self.array.dtype))
        return self._like(self.xp.sum(self.array, axis=axes, keepdims=bool(keepdims)))

    def mean(
        self, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False
    ) -> StandardArray:
        """The mean over ``axis`` by the library (what ``np.mean`` calls for a non-ndarray)."""
        axes = None if axis is None else _axes(axis, self.ndim)
        if self.dtype.itemsize == 2:
            wide = self.xp.astype(self.array, self._f32())
            mean = self.xp.mean(wide, axis=axes, keepdims=bool(keepdims))
            return self._like(self.xp.astype(mean, self.array.dtype))
        return self._like(self.xp.mean(self.array, axis=axes, keepdims=bool(keepdims)))

    def _f32(self) -> Any:
        return _namespaces.library_dtype(self.xp, _F32)

    def all_finite(self) -> bool:
        """Whether no value is inf or nan (one flag copied to the host)."""
        return bool(self.xp.all(self.xp.isfinite(self.array)))

    def to_host(self) -> np.ndarray:
        """An explicit copy to a numpy array."""
        return _namespaces.to_host(self.array)

    def from_host(self, values: np.ndarray) -> StandardArray:
        """Host ``values`` copied to this array's library and device."""
        dtype = _namespaces.library_dtype(self.xp, values.dtype)
        return self._like(self.xp.asarray(values, dtype=dtype, device=self.device))

    def full_like(self, value: float, shape: tuple[int, ...] | None = None) -> StandardArray:
        """A new array of ``value`` in this dtype, on this array's device."""
        shape = self.shape if shape is None else shape
        dtype = _namespaces.library_dtype(self.xp, self.dtype)
        return self._like(self.xp.full(shape, value, dtype=dtype, device=self.device))

    def kernel_input(self) -> Any:
        """What cbrtgrad's backends take: the array on a GPU, a numpy view of host memory."""
        if self.on_device:
            return self.raw
        return _namespaces.host_view(self.array)

    def from_kernel(self, result: Any) -> StandardArray:
        """A backend's result for inputs like this one, as this one's library's array."""
        if type(result) is np.ndarray or isinstance(result, np.generic):
            dtype = _namespaces.library_dtype(self.xp, result.dtype)
            return self._like(self.xp.asarray(result, dtype=dtype, device=self.device))
        return self._like(_namespaces.standard_view(result)[0])


def refuse_host_copy(library: str) -> NoReturn:
    """Raise the ``TypeError`` for another library's data asked for as a numpy array."""
    raise TypeError(
        f"cbrtgrad: a Tensor's {library} data is not converted to numpy implicitly; use "
        "Tensor.numpy() (an explicit copy) or keep every operand in that library"
    )


def _axes(axis: Any, ndim: int) -> tuple[int, ...]:
    axes = axis if isinstance(axis, tuple) else (axis,)
    return tuple(sorted(int(a) % ndim if ndim else int(a) for a in axes))


def _lazy_shape(inputs: tuple[Any, ...]) -> tuple[int, ...] | None:
    """The shape, where every wrapped input is a broadcast of one element to it (else None)."""
    shape = None
    for value in inputs:
        if type(value) is StandardArray:
            if not value.is_lazy_broadcast or (shape is not None and value.shape != shape):
                return None
            shape = value.shape
    return shape


def _operand(value: Any, index: int, like: StandardArray, one: bool = False) -> Any:
    """A ufunc operand for ``like``'s namespace: its array (its one element if ``one``), or
    a Python scalar; numpy arrays and other libraries' arrays refused."""
    if type(value) is StandardArray:
        if value.xp is not like.xp or value._numba is not like._numba:
            raise TypeError(
                f"cbrtgrad: operand {index} is a {value.library} array and another a "
                f"{like.library} array: an op takes the arrays of one library; convert one "
                "explicitly"
            )
        return value.one if one else value.array
    if isinstance(value, (np.generic, np.ndarray)) and value.ndim == 0:
        return value.item()  # the namespace's functions take Python scalars
    if isinstance(value, _SCALARS):
        return value
    raise TypeError(
        f"cbrtgrad: operand {index} is {_kind(value)} and another a {like.library} array: an "
        "op takes the arrays of one library; convert explicitly (Tensor.numpy() to numpy, "
        "or the library's own asarray)"
    )


def _kind(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return "a numpy array"
    return f"a {type(value).__module__.split('.')[0]}.{type(value).__name__}"


def is_standard_array(value: Any) -> bool:
    """Whether the engine holds ``value`` as a :class:`StandardArray`: an array of an array
    API library other than numpy and dask, or a numba device array.

    Examples
    --------
    >>> import numpy as np, array_api_strict as xp
    >>> is_standard_array(np.ones(2)), is_standard_array(xp.ones(2)), is_standard_array(2.0)
    (False, True, False)
    """
    cls = type(value)
    if cls is np.ndarray or isinstance(value, (np.ndarray, np.generic)) or is_dask_array(value):
        return False  # NOTE: hot path: the engine's numpy arrays ask first
    if cls.__module__.startswith("torch"):
        return hasattr(value, "dtype") and hasattr(value, "shape")
    return hasattr(cls, "__array_namespace__") or is_device_array(value)


def wrap(value: Any) -> Any:
    """``value`` as the engine holds it: another library's array wrapped, anything else as is."""
    if type(value) is not np.ndarray and is_standard_array(value):
        return StandardArray(value)
    return value


def raw(value: Any) -> Any:
    """``value`` as users see it: a :class:`StandardArray` unwrapped."""
    return value.raw if type(value) is StandardArray else value


def kernel_input(value: Any) -> Any:
    """``value`` as cbrtgrad's backends take it (:meth:`StandardArray.kernel_input`)."""
    return value.kernel_input() if type(value) is StandardArray else value


def check_one_side(values: tuple[Any, ...], names: str) -> None:
    """Raise ``TypeError`` if some of ``values`` are another library's arrays and others numpy's.

    Scalars (and 0-d numpy arrays) go anywhere.
    """
    standard = [type(v) is StandardArray for v in values]
    if not any(standard) or all(standard):
        return
    for name, value, other in zip(names.split(", "), values, standard, strict=True):
        if not other and isinstance(value, np.ndarray) and value.ndim:
            others = [n for n, d in zip(names.split(", "), standard, strict=True) if d]
            library = next(v.library for v in values if type(v) is StandardArray)
            raise TypeError(
                f"cbrtgrad: {name} is a numpy array and {', '.join(others)} a {library} array: "
                "an op takes the arrays of one library; convert one explicitly"
            )
