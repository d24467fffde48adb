"""Array plumbing shared by the host backends' fused kernels."""

from __future__ import annotations

from typing import Any

import numpy as np


def _check_out(name: str, arr: Any, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"cbrtgrad: out[{name}] must be a numpy.ndarray, got {type(arr).__name__}")
    if arr.shape != shape:
        raise ValueError(f"cbrtgrad: out[{name}] has shape {arr.shape}; expected {shape}")
    if arr.dtype != dtype:
        raise TypeError(f"cbrtgrad: out[{name}] has dtype {arr.dtype}; expected {dtype}")
    if not arr.flags.writeable:
        raise ValueError(f"cbrtgrad: out[{name}] is read-only")
    return arr


def fused_outputs(
    x: Any, g: Any, out: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, ...] | None]:
    """Broadcast ``x`` and ``g``, validate or allocate ``out = (y, dx)``.

    Returns ``x, g, y, dx`` (broadcast, one float dtype) and, when all four can
    be viewed as 1-D contiguous arrays without a copy, those flat views
    (else ``None``).
    """
    x, g = np.broadcast_arrays(np.asarray(x), np.asarray(g))
    dtype = np.result_type(x.dtype, g.dtype)
    x = x.astype(dtype, copy=False)
    g = g.astype(dtype, copy=False)
    if out is None:
        y = np.empty(x.shape, dtype)
        dx = np.empty(x.shape, dtype)
    else:
        if not isinstance(out, tuple) or len(out) != 2:
            raise TypeError("cbrtgrad: out must be a tuple (y, dx) of two arrays")
        y = _check_out("y", out[0], x.shape, dtype)
        dx = _check_out("dx", out[1], x.shape, dtype)
    arrays = (x, g, y, dx)
    if all(a.flags.c_contiguous for a in arrays):
        return x, g, y, dx, tuple(a.reshape(-1) for a in arrays)
    return x, g, y, dx, None


def call_ufunc(
    ufunc: np.ufunc, *args: Any, out: Any = None, where: Any = True, dtype: Any = None
) -> Any:
    """Call a numba-built ufunc with numpy's ``out=``/``where=`` meaning.

    NOTE: numba's ufuncs fail with ``where=`` under numpy 2 ("An iterator
    operand was flagged as the ARRAYMASK, but no WRITEMASKED operands were
    given"), so a mask is applied here: compute everywhere, then copy where
    the mask is true. Elements where it is false keep ``out``'s values (or
    are uninitialised when no ``out`` is given, as in numpy).
    """
    if where is True:
        return ufunc(*args, out=out, dtype=dtype)
    result = ufunc(*args, dtype=dtype)
    if out is None:
        shape = np.broadcast_shapes(np.shape(result), np.shape(where))
        out = np.empty(shape, np.asarray(result).dtype)
    elif isinstance(out, tuple):
        if len(out) != 1:
            raise ValueError(f"cbrtgrad: out must be one array, got a tuple of {len(out)}")
        out = out[0]
    if not isinstance(out, np.ndarray):
        raise TypeError(f"cbrtgrad: out must be a numpy.ndarray, got {type(out).__name__}")
    np.copyto(out, result, casting="same_kind", where=where)
    return out
