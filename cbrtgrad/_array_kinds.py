"""What kind of array a value is, without importing dask or numba.cuda.

A leaf module: the api, the backends and the graph engine all ask it, and it
imports nothing of cbrtgrad's, so detecting a type never pulls in a backend.
"""

from __future__ import annotations

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
    if hasattr(x, "__cuda_array_interface__"):
        return True
    return cls.__name__ == "FakeCUDAArray" and cls.__module__.startswith("numba.cuda.simulator")
