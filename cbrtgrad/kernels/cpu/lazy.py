"""Build each CPU kernel once per process, on first use, under one lock.

The ufuncs, the ``prange`` loops and the reduction (:mod:`cbrtgrad.kernels.cpu.ufuncs`,
:mod:`cbrtgrad.kernels.cpu.prange_loops`, :mod:`cbrtgrad.kernels.cpu.reduce`) are
compiled, or loaded from the on-disk cache, the first time a call needs them,
and kept in :data:`BUILT` for the rest of the process. Callers on a hot path
look their kernel up in :data:`BUILT` directly (one dict lookup) and call
:func:`once` only when it is missing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

#: Held while a kernel is built, so two threads never build the same one.
LOCK = threading.RLock()
#: Every kernel built so far, by key (``"ufunc.cube_root.float64"`` and so on).
BUILT: dict[Any, Any] = {}


def once(key: Any, build: Callable[[], Any]) -> Any:
    """``BUILT[key]``, calling ``build()`` for it the first time (under :data:`LOCK`).

    Examples
    --------
    >>> once("lazy-doctest", lambda: [1, 2]) is once("lazy-doctest", lambda: [3])
    True
    >>> BUILT.pop("lazy-doctest")
    [1, 2]
    """
    found = BUILT.get(key)
    if found is not None:
        return found
    with LOCK:
        if key not in BUILT:
            BUILT[key] = build()
        return BUILT[key]


def dtype_name(dtype: Any) -> str:
    """``"float32"`` or ``"float64"``, the dtypes the CPU kernels are compiled for.

    Raises
    ------
    TypeError
        For any other dtype.

    Examples
    --------
    >>> import numpy as np
    >>> dtype_name(np.float32), dtype_name("float64")
    ('float32', 'float64')
    """
    name = np.dtype(dtype).name if not isinstance(dtype, str) else dtype
    if name not in ("float32", "float64"):
        raise TypeError(f"dtype must be float32 or float64, got {dtype!r}")
    return name
