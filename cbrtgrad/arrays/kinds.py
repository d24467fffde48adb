"""What kind of array a value is, without importing dask or numba.cuda.

A leaf module: the api, the backends and the graph engine all ask it, and it
imports nothing of cbrtgrad's, so detecting a type never pulls in a backend.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np


def is_dask_array(x: Any) -> bool:
    """Whether ``x`` is a ``dask.array.Array``, without importing dask.

    Parameters
    ----------
    x : object
        Any value.

    Returns
    -------
    bool
        True for a dask array.

    Examples
    --------
    >>> import numpy as np
    >>> is_dask_array(np.ones(2)), is_dask_array([1.0])
    (False, False)
    """
    cls = type(x)
    return cls.__name__ == "Array" and cls.__module__.startswith("dask.array")


def is_device_array(x: Any) -> bool:
    """Whether ``x`` lives in GPU memory (CUDA array interface or the simulator).

    NOTE: the CUDA simulator's ``FakeCUDAArray`` has no
    ``__cuda_array_interface__``; it is recognised by its class, without
    importing ``numba.cuda`` (which is slow and optional).

    Parameters
    ----------
    x : object
        Any value.

    Returns
    -------
    bool
        True for a CUDA device array (or the simulator's).

    Examples
    --------
    >>> import numpy as np
    >>> is_device_array(np.ones(2)), is_device_array(3.0)
    (False, False)
    """
    cls = type(x)
    if cls is np.ndarray:
        # NOTE: hot path (every host call): a failed hasattr costs an
        # AttributeError raised and caught, several times a type check.
        return False
    module = cls.__module__
    if module.startswith("cupy"):
        # NOTE: hot path (every GPU call asks more than once): a CuPy array is
        # on the device, and its interface is a new dict on each access.
        return hasattr(x, "__cuda_array_interface__") if cls.__name__ != "ndarray" else True
    if module.startswith("torch"):
        # NOTE: a tensor that requires grad raises RuntimeError (not
        # AttributeError) for __cuda_array_interface__, which hasattr passes on.
        return bool(getattr(x, "is_cuda", False))
    if hasattr(x, "__cuda_array_interface__"):
        return True
    return cls.__name__ == "FakeCUDAArray" and module.startswith("numba.cuda.simulator")


def computes_ufuncs(x: Any) -> bool:
    """Whether ``x`` is a container that computes numpy ufuncs itself (NEP 13), for the api.

    A value whose type defines ``__array_ufunc__`` and is not an ndarray
    (xarray, pint, pandas, a user's container): numpy hands it the ufunc of
    a call and lets it compute, keeping its type, coordinates and units, and
    the api hands it cbrtgrad's ufunc the same way. ``__array_ufunc__ =
    None`` counts too: numpy's refusal is then the answer. Not such a
    container: ndarrays and their subclasses (numpy's ufunc call already
    consults a subclass), dask and device arrays (CuPy's, which defines the
    protocol, included), which keep their own backends, and a type with
    cbrtgrad's own hook, ``__cbrtgrad_function__`` (the engine's Tensor).

    Examples
    --------
    >>> import numpy as np
    >>> class Box:
    ...     def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
    ...         return NotImplemented
    >>> computes_ufuncs(Box()), computes_ufuncs(np.ones(2)), computes_ufuncs([1.0])
    (True, False, False)
    """
    cls = type(x)
    if cls is np.ndarray or not hasattr(cls, "__array_ufunc__"):
        return False
    if isinstance(x, np.ndarray) or hasattr(cls, "__cbrtgrad_function__"):
        return False
    return not (is_dask_array(x) or is_device_array(x))


TORCH_DTYPES: dict[Any, np.dtype] = {}
NUMPY_TO_TORCH: dict[np.dtype, Any] = {}


def torch_dtypes() -> dict[Any, np.dtype]:
    """PyTorch's dtypes that numpy has too, as numpy dtypes (PyTorch must be imported)."""
    if not TORCH_DTYPES:
        torch = sys.modules["torch"]
        for name in ("float16", "float32", "float64", "bool", "uint8", "int8", "int16",
                     "int32", "int64"):  # fmt: skip
            dtype = np.dtype(name)
            TORCH_DTYPES[getattr(torch, name)] = dtype
            NUMPY_TO_TORCH[dtype] = getattr(torch, name)
    return TORCH_DTYPES


def device_dtype(value: Any) -> np.dtype:
    """The numpy dtype of a device array of any supported library.

    Raises
    ------
    TypeError
        For a PyTorch dtype numpy has no equivalent of (``bfloat16``, complex
        half, ...), naming it.
    """
    dtype = getattr(value, "dtype", None)
    if isinstance(dtype, np.dtype):
        return dtype
    if dtype is None:  # a bare __cuda_array_interface__: its typestr says
        return np.dtype(value.__cuda_array_interface__["typestr"])
    if type(value).__module__.startswith("torch"):
        found = torch_dtypes().get(dtype)
        if found is None:
            raise TypeError(
                f"cbrtgrad: the cuda backend does not take PyTorch tensors of dtype {dtype}; "
                "convert it to float32 or float64 first (t.float())"
            )
        return found
    return np.dtype(dtype)


#: Libraries whose arrays come back as their own kind.
CUPY, TORCH, NUMBA = "cupy", "torch", "numba"


def library_of(value: Any) -> str:
    """Which library's array ``value`` is: ``"cupy"``, ``"torch"`` or ``"numba"``.

    Examples
    --------
    >>> library_of(object())
    'numba'
    """
    module = type(value).__module__
    if module.startswith("cupy"):
        return CUPY
    if module.startswith("torch"):
        return TORCH
    return NUMBA
