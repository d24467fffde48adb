"""Which dtype a kernel computes in: the one place the dtype rules live.

* float32 and float64 are computed as they are.
* Half precision (float16, and ml_dtypes' bfloat16) is computed in float32
  and returned as float32, by the api and the graph engine alike: the
  ``cube_root`` op's force-fp32 AMP policy (half precision loses accuracy
  near zero and for large magnitudes). Only an ``out=`` array of a half
  dtype holds a half-precision result, correctly rounded in it
  (:mod:`cbrtgrad.arrays.half`).
* bool and integers are computed in float64, as ``np.cbrt`` does for
  ``int32``/``int64`` (numpy would pick float16/float32 for the small ones;
  cbrtgrad has no half-precision kernel and keeps every integer exact up to
  2^53).
* Everything else (complex, object, strings, datetimes, long double) is a
  ``TypeError`` that names the dtype.
* A ``dtype=`` keyword, when given, decides instead (float16 and bfloat16
  meaning float32).

:func:`compute_dtype_of` applies them to a call: the api asks it once per
call and passes the answer down, and the backends take it as given.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .kinds import device_dtype, is_dask_array, is_device_array

SUPPORTED = "float16, bfloat16, float32, float64, bool or an integer dtype"
_KINDS_EXACT = {"f"}
_KINDS_TO_F64 = {"b", "i", "u"}


_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
#: The native dtypes map to themselves: the hot path is one dict lookup.
_NATIVE: dict[np.dtype, np.dtype] = {_F32: _F32, _F64: _F64}


def native(dtype: np.dtype) -> np.dtype | None:
    """``dtype`` itself when it is float32 or float64 (a kernel's own dtypes), else ``None``.

    Examples
    --------
    >>> native(np.dtype(np.float32)), native(np.dtype(np.float16))
    (dtype('float32'), None)
    """
    return _NATIVE.get(dtype)


def _describe(dtype: np.dtype) -> str:
    return f"{dtype} (kind {dtype.kind!r})"


def compute_dtype(dtype: Any, argument: str = "x") -> np.dtype:
    """Return the float dtype a kernel computes in for an input of ``dtype``.

    Parameters
    ----------
    dtype : dtype-like
        The input's dtype.
    argument : str
        The argument's name, for the error message.

    Returns
    -------
    numpy.dtype
        float32 or float64.

    Raises
    ------
    TypeError
        For complex, object, string, datetime and other non-real dtypes, and
        for long double.

    Examples
    --------
    >>> compute_dtype(np.float16), compute_dtype(np.int8), compute_dtype(np.float32)
    (dtype('float32'), dtype('float64'), dtype('float32'))
    >>> compute_dtype(np.complex128)
    Traceback (most recent call last):
    ...
    TypeError: cbrtgrad: x has dtype complex128 (kind 'c'); expected float16, ...
    """
    if isinstance(dtype, np.dtype):
        native = _NATIVE.get(dtype)
        if native is not None:
            return native
    dt = np.dtype(dtype)
    if dt.kind in _KINDS_TO_F64:
        return np.dtype(np.float64)
    if dt.kind == "V" and dt.itemsize == 2 and dt.name == "bfloat16":
        return _F32  # ml_dtypes' bfloat16: half precision, as float16
    if dt.kind in _KINDS_EXACT:
        if dt.itemsize == 2:
            return np.dtype(np.float32)
        if dt.itemsize in (4, 8):
            return np.dtype(dt.type)
    raise TypeError(f"cbrtgrad: {argument} has dtype {_describe(dt)}; expected {SUPPORTED}")


def requested_dtype(dtype: Any) -> np.dtype | None:
    """Validate a ``dtype=`` keyword and apply the force-fp32 policy to it.

    Parameters
    ----------
    dtype : dtype-like or None

    Returns
    -------
    numpy.dtype or None
        ``None`` when no dtype was requested; float16 becomes float32; always
        in native byte order.

    Raises
    ------
    TypeError
        When the requested dtype is not float16, float32 or float64.

    Examples
    --------
    >>> requested_dtype(None) is None, requested_dtype("float16"), requested_dtype(">f8")
    (True, dtype('float32'), dtype('float64'))
    """
    if dtype is None:
        return None
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"cbrtgrad: dtype must be a float dtype, got {dtype!r}") from None
    if dt.itemsize == 2 and dt.name == "bfloat16":
        return _F32
    if dt.kind != "f" or dt.itemsize not in (2, 4, 8):
        raise TypeError(
            "cbrtgrad: dtype must be float16, float32 or float64 (or bfloat16), "
            f"got {_describe(dt)}"
        )
    # The kernels compute in native byte order: a request names a float type,
    # not a layout (numpy's ufuncs take ``dtype=`` the same way, as "only the
    # general DType"), so ``'>f8'`` means float64.
    return np.dtype(np.float32) if dt.itemsize == 2 else np.dtype(dt.type)


def dtype_of(value: Any) -> np.dtype:
    """Return the dtype numpy would give ``value`` (arrays, scalars, lists).

    Examples
    --------
    >>> dtype_of(2), dtype_of([1.5]), dtype_of(np.float32(1))
    (dtype('int64'), dtype('float64'), dtype('float32'))
    """
    dt = getattr(value, "dtype", None)
    if isinstance(dt, np.dtype):
        return dt
    if is_device_array(value):
        return device_dtype(value)  # a PyTorch tensor's dtype is PyTorch's own
    return np.asarray(value).dtype


def result_dtype(*values: Any, argument: str = "g, y") -> np.dtype:
    """Return the compute dtype for several inputs (numpy promotion first).

    Examples
    --------
    >>> result_dtype(np.float32(1), np.float64(2))
    dtype('float64')
    """
    dtypes = [dtype_of(v) for v in values]
    first = dtypes[0]
    if first in _NATIVE and all(dt == first for dt in dtypes):
        return first  # the hot path: one native float dtype throughout
    for name, dt in zip(argument.split(", "), dtypes, strict=False):
        compute_dtype(dt, name)
    # Python scalars stay "weak" (NEP 50), as in a numpy ufunc call: a float
    # gradient of 1.0 does not turn a float32 computation into float64.
    weak = [
        v if type(v) in (bool, int, float) else dt for v, dt in zip(values, dtypes, strict=False)
    ]
    return compute_dtype(np.result_type(*weak), argument)


def compute_dtype_of(*values: Any, argument: str = "x", dtype: Any = None) -> np.dtype:
    """Return the dtype a call on ``values`` computes in: the one decision of a call.

    The api asks it once per call and passes the answer down (``dtype=`` of
    every backend method); a backend called without one asks it here too.

    Parameters
    ----------
    *values : array_like
        The call's inputs (``x``; ``g, y``; ``x, g``): arrays, device and dask
        arrays, numpy and Python scalars, lists.
    argument : str
        Their names, comma-separated, for the error message.
    dtype : dtype-like, optional
        The call's ``dtype=``: when given it decides (:func:`requested_dtype`).

    Returns
    -------
    numpy.dtype
        float32 or float64.

    Raises
    ------
    TypeError
        For an input of a dtype no kernel computes in, naming the argument,
        or a ``dtype=`` that is not a float dtype.

    Examples
    --------
    >>> compute_dtype_of(np.ones(2, np.float16))
    dtype('float32')
    >>> compute_dtype_of(np.float32(1), 2.0, argument="g, y")
    dtype('float32')
    >>> compute_dtype_of([1, 2], dtype="float16")
    dtype('float32')
    """
    if dtype is not None:
        if isinstance(dtype, np.dtype):
            found = _NATIVE.get(dtype)
            if found is not None:
                return found  # NOTE: hot path: the api's own answer, passed down
        return requested_dtype(dtype)  # type: ignore[return-value]
    first = values[0]
    if type(first) is np.ndarray:  # NOTE: hot path: plain arrays of one native dtype
        found = _NATIVE.get(first.dtype)
        if found is not None:
            for value in values[1:]:
                if type(value) is not np.ndarray or value.dtype is not found:
                    break
            else:
                return found
    return result_dtype(*values, argument=argument)


def as_compute(value: Any, dtype: np.dtype) -> Any:
    """A host input as a plain ndarray in the compute ``dtype`` (the api's cast).

    Examples
    --------
    >>> as_compute([1, 2], np.dtype(np.float64))
    array([1., 2.])
    """
    # Host inputs as plain ndarrays in the compute dtype: numpy values cast
    # only when they differ (float16, integers, mixed precision); Python
    # scalars, lists and every other array_like numpy takes (range,
    # memoryview, array.array, objects with __array__) made arrays, so every
    # backend sees an ndarray. Left to their backend: dask arrays (cast inside
    # each chunk's task) and device arrays (numba device arrays have no
    # ``astype``, and a cast would leave the device; the cuda kernels cast
    # while they read).
    if type(value) is np.ndarray and value.dtype is dtype:
        return value  # NOTE: hot path: already in the compute dtype
    if isinstance(value, (np.ndarray, np.generic)):
        return value if value.dtype == dtype else np.asarray(value, dtype=dtype)
    if is_dask_array(value) or is_device_array(value):
        return value
    return np.asarray(value, dtype=dtype)
