"""Argument checks of :mod:`cbrtgrad.backends.device_math`: each error names its argument.

A bad argument is a ``TypeError`` (wrong kind: a host array where a device
array belongs, another library's array, a dtype device math does not
compute in) or a ``ValueError`` (right kind, wrong value: an axis out of
range), with the argument's name and what it got.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from .._array_kinds import device_dtype, is_device_array
from ._device_arrays import CUPY, NUMBA, TORCH, library_of

#: The dtypes device math computes with.
FLOATS = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))
#: Each library's arrays, in words.
KINDS = {
    CUPY: "a CuPy array",
    TORCH: "a PyTorch CUDA tensor",
    NUMBA: "a numba device array (or __cuda_array_interface__ object)",
}
NAMES = {CUPY: "CuPy", TORCH: "PyTorch", NUMBA: "numba"}


def describe(value: Any) -> str:
    """What ``value`` is, in words, for error messages.

    Examples
    --------
    >>> import numpy as np
    >>> describe(np.zeros(3, np.float32)), describe(2.0)
    ('a host numpy.ndarray of float32, shape (3,)', 'float')
    """
    if is_device_array(value):
        return KINDS[library_of(value)]
    if isinstance(value, np.ndarray):
        return f"a host numpy.ndarray of {value.dtype}, shape {value.shape}"
    cls = type(value)
    return cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__name__}"


def is_scalar(value: Any) -> bool:
    """Whether ``value`` is a real scalar, Python's or numpy's (bool too; not a 0-d array).

    Examples
    --------
    >>> import numpy as np
    >>> is_scalar(2), is_scalar(np.float16(1)), is_scalar(1j), is_scalar(np.array(1.0))
    (True, True, False, False)
    """
    return isinstance(value, numbers.Real | np.bool_) and not isinstance(value, np.ndarray)


def _integer(n: Any) -> bool:
    return isinstance(n, numbers.Integral) and not isinstance(n, bool | np.bool_)


def shape_arg(shape: Any, name: str = "shape") -> tuple[int, ...]:
    """``shape`` (an int, or a tuple or list of ints) as a tuple of ints.

    Examples
    --------
    >>> shape_arg(3), shape_arg([2, -1])
    ((3,), (2, -1))
    """
    if _integer(shape):
        return (int(shape),)
    if isinstance(shape, tuple | list) and all(_integer(n) for n in shape):
        return tuple(int(n) for n in shape)
    raise TypeError(f"cbrtgrad: {name} must be a tuple of ints, got {shape!r}")


def float_dtype(dtype: Any, name: str = "dtype") -> np.dtype:
    """``dtype`` as a numpy dtype, which must be float16, float32 or float64.

    Examples
    --------
    >>> float_dtype("float16")
    dtype('float16')
    """
    try:
        found = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"cbrtgrad: {name} must be a numpy dtype, got {dtype!r}") from None
    if found not in FLOATS:
        raise TypeError(f"cbrtgrad: {name} must be float16, float32 or float64, got {found}")
    return found


def axes_arg(axis: Any, ndim: int) -> tuple[int, ...]:
    """``axis`` (None, or a tuple of distinct axes in ``[0, ndim)``) as sorted axes.

    Examples
    --------
    >>> axes_arg(None, 2), axes_arg((2, 0), 3)
    ((0, 1), (0, 2))
    """
    if axis is None:
        return tuple(range(ndim))
    if not isinstance(axis, tuple) or not all(_integer(d) for d in axis):
        raise TypeError(f"cbrtgrad: axis must be None or a tuple of ints, got {axis!r}")
    if any(not 0 <= d < ndim for d in axis) or len(set(axis)) != len(axis):
        raise ValueError(f"cbrtgrad: axis must hold distinct axes in [0, {ndim}), got {axis!r}")
    return tuple(sorted(int(d) for d in axis))


def check_array(value: Any, name: str, library: str) -> None:
    """Raise unless ``value`` is a float16/32/64 device array of ``library``.

    Examples
    --------
    >>> import numpy as np
    >>> check_array(np.ones(2), "b", NUMBA)
    Traceback (most recent call last):
    ...
    TypeError: cbrtgrad: b must be a numba device array (...), got a host numpy.ndarray ...
    """
    if not is_device_array(value):
        raise TypeError(f"cbrtgrad: {name} must be {KINDS[library]}, got {describe(value)}")
    found = library_of(value)
    if found != library:
        raise TypeError(
            f"cbrtgrad: {name} is {KINDS[found]}, but this call computes on "
            f"{NAMES[library]} arrays; one call takes one library's arrays (copy between "
            "libraries explicitly)"
        )
    dtype = device_dtype(value)
    if dtype not in FLOATS:
        raise TypeError(
            f"cbrtgrad: {name} has dtype {dtype}; device math takes float16, float32 "
            "or float64 arrays"
        )


def check_devices(devices: dict[str, Any]) -> None:
    """Raise unless the named arrays' devices (``None``: numba's one context) are one.

    Examples
    --------
    >>> check_devices({"a": 0, "b": 1})
    Traceback (most recent call last):
    ...
    TypeError: cbrtgrad: the arrays of one call must be on one device, got a on GPU 0, b on GPU 1
    """
    if len(set(devices.values())) > 1:
        where = ", ".join(f"{n} on GPU {d}" for n, d in devices.items())
        raise TypeError(f"cbrtgrad: the arrays of one call must be on one device, got {where}")
