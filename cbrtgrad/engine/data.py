"""What a Tensor may hold: data checked (:func:`tensor_data`), masked arrays refused
(:func:`refuse_masked`), host values made lazy beside dask data (:func:`lazy_like`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..arrays import dtypes as _dtypes
from ..arrays.kinds import is_dask_array
from .array_api import StandardArray, is_standard_array


def refuse_masked(value: Any, name: str) -> None:
    """Raise a ``TypeError`` naming ``name`` if ``value`` is a numpy masked array.

    The engine has no masks: taking the values alone would let the masked
    ones into sums, means and gradients, silently.
    """
    if isinstance(value, np.ma.MaskedArray):
        raise TypeError(
            f"cbrtgrad: {name} is a masked array (numpy.ma.MaskedArray), and Tensors have no "
            f"mask: the masked values would enter the results. Pass {name}.filled(value) or "
            f"{name}.compressed() instead"
        )


def tensor_data(value: Any, name: str) -> Any:
    """``value`` as a Tensor's data: an ndarray (no copy when it is one), a dask array,
    or a device array (CuPy, PyTorch CUDA, numba: held as a :class:`StandardArray`).

    A float, integer or bool dtype; anything else (and a masked array) is a
    ``TypeError`` naming ``name``.
    """
    if type(value) is not np.ndarray:
        refuse_masked(value, name)
        if is_dask_array(value):
            _dtypes.compute_dtype(value.dtype, name)
            return value
        if type(value) is StandardArray:
            return value
        if is_standard_array(value):
            array = StandardArray(value)
            _dtypes.compute_dtype(array.dtype, name)
            return array
        value = np.asarray(value)
    _dtypes.compute_dtype(value.dtype, name)
    return value


def lazy_like(value: Any, like: Any) -> Any:
    """``value`` as a dask array in the chunks of dask array ``like`` (as it is if already one)."""
    if is_dask_array(value):
        return value
    import dask.array as da

    return da.from_array(np.asarray(value), chunks=like.chunks)
