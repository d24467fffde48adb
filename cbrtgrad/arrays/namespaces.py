"""Arrays of other array-API libraries: their namespace, device and dtypes as numpy's.

The graph engine computes on CuPy arrays, PyTorch tensors (CUDA or CPU),
JAX arrays and ``array_api_strict`` arrays through the array API standard:
:func:`namespace` is ``array_api_compat.array_namespace`` of the array, and
the engine's arithmetic is that namespace's functions. numpy names dtypes
for the whole package (the kernels', the compute dtype rule), so the
library's dtypes are read as numpy dtypes here and back.

A numba device array has no namespace: CuPy views it without a copy
(``cupy.asarray``, through ``__cuda_array_interface__``), and without CuPy it
is refused with what to install (:func:`standard_view`).

NOTE: ``array_api_compat`` is imported on first use, only once an array of
another library exists: importing cbrtgrad imports none of this.
"""

from __future__ import annotations

import sys
from functools import cache
from typing import Any

import numpy as np

from .kinds import NUMBA, is_device_array, library_of

#: The dtype names numpy shares with the array API standard (and bfloat16,
#: PyTorch's and JAX's, as ml_dtypes names it for numpy).
_NAMES = (
    "float16", "bfloat16", "float32", "float64", "bool", "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64", "complex64", "complex128",
)  # fmt: skip


def standard_view(value: Any) -> tuple[Any, bool]:
    """``value`` as an array of an array-API library, and whether CuPy had to view it.

    A numba device array, or any other object whose only interface is
    ``__cuda_array_interface__``, is viewed as a CuPy array, without a copy
    (results are given back as numba device arrays, as the cuda backend
    gives them for such inputs).

    Raises
    ------
    TypeError
        For such an array where CuPy is not installed.

    Examples
    --------
    >>> import array_api_strict as xp
    >>> standard_view(xp.ones(2))[1]
    False
    """
    cls = type(value)
    # NOTE: the cuda backend's own test (kinds.library_of): a device
    # array of neither CuPy nor PyTorch; one with a namespace (JAX's) has its own.
    if hasattr(cls, "__array_namespace__") or not is_device_array(value):
        return value, False
    if library_of(value) != NUMBA:
        return value, False
    try:
        import cupy
    except ImportError:
        raise TypeError(
            f"cbrtgrad: a Tensor holds a {cls.__module__.split('.')[0]}.{cls.__name__} (a "
            "numba device array or another bare __cuda_array_interface__) through CuPy, "
            "which views it without a copy, and CuPy is not installed: python -m pip install "
            "cupy-cuda12x (or cupy-cuda13x), or pass a CuPy array or a PyTorch CUDA tensor"
        ) from None
    return cupy.asarray(value), True


def namespace(array: Any) -> Any:
    """The array API namespace of ``array`` (``array_api_compat.array_namespace``).

    Examples
    --------
    >>> import array_api_strict as xp
    >>> namespace(xp.ones(2)).__name__
    'array_api_strict'
    """
    from array_api_compat import array_namespace

    return array_namespace(array)


def device(array: Any) -> Any:
    """The device ``array`` is on, as its library names it (``array_api_compat.device``)."""
    from array_api_compat import device as device_of

    return device_of(array)


@cache
def numpy_dtype(dtype: Any) -> np.dtype:
    """A library's dtype as the numpy dtype of the same name.

    Raises
    ------
    TypeError
        For a dtype numpy has no equivalent of, naming it.

    Examples
    --------
    >>> import array_api_strict as xp
    >>> numpy_dtype(xp.float32)
    dtype('float32')
    """
    if isinstance(dtype, np.dtype):
        return dtype
    name = str(dtype).rsplit(".", 1)[-1]  # torch.float32, array_api_strict.float32
    if name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise TypeError(
                "cbrtgrad: bfloat16 arrays need ml_dtypes (numpy's bfloat16): "
                "python -m pip install ml_dtypes"
            ) from None
        return np.dtype(ml_dtypes.bfloat16)
    if name in _NAMES:
        return np.dtype(name)
    raise TypeError(f"cbrtgrad: arrays of dtype {dtype} have no numpy dtype the kernels take")


def library_dtype(xp: Any, dtype: np.dtype) -> Any:
    """numpy's ``dtype`` as namespace ``xp`` names it.

    Raises
    ------
    TypeError
        Where ``xp`` has no such dtype (``array_api_strict`` has no float16).

    Examples
    --------
    >>> import numpy as np, array_api_strict as xp
    >>> library_dtype(xp, np.dtype(np.float64))
    array_api_strict.float64
    """
    found = getattr(xp, np.dtype(dtype).name, None)
    if found is None:
        raise TypeError(f"cbrtgrad: {xp.__name__} has no dtype {np.dtype(dtype).name}")
    return found


def to_host(array: Any) -> np.ndarray:
    """A new numpy array with ``array``'s values: the explicit copy from any library.

    Examples
    --------
    >>> import array_api_strict as xp
    >>> to_host(xp.asarray([1.0, 2.0]))
    array([1., 2.])
    """
    module = type(array).__module__
    if module.startswith("cupy"):
        return array.get()
    if module.startswith("torch"):
        return host_view(array.detach().cpu()).copy()
    try:
        return np.array(np.from_dlpack(array), copy=True)
    except (TypeError, BufferError, RuntimeError):
        return np.array(array, copy=True)


def host_view(array: Any) -> np.ndarray:
    """The numpy array over a host array's memory, without a copy (DLPack), for the kernels.

    Examples
    --------
    >>> import array_api_strict as xp
    >>> host_view(xp.asarray([8.0]))
    array([8.])
    """
    if type(array).__module__.startswith("torch") and _is_bfloat16(array):
        # NOTE: DLPack and PyTorch's .numpy() have no bfloat16: its bits,
        # viewed as int16 by PyTorch and as ml_dtypes' bfloat16 by numpy.
        torch = sys.modules["torch"]
        return array.detach().view(torch.int16).numpy().view(numpy_dtype(array.dtype))
    try:
        return np.from_dlpack(array)
    except (TypeError, BufferError, RuntimeError):  # a dtype DLPack lacks
        return np.asarray(array)


def _is_bfloat16(array: Any) -> bool:
    return str(array.dtype).endswith("bfloat16")
