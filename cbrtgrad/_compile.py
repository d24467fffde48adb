"""Compile policy for every numba kernel in cbrtgrad, in one place.

NOTE: no fast-math flag is set. Even ``contract`` alone lets LLVM fuse a
product into a later subtraction (``x - y*a`` into one ``fma``), which would
count the rounding error of ``y*a`` twice in the error-free transformations of
:mod:`cbrtgrad.kernels.formulas` and break correct rounding. The formulas call
an exact ``fma`` where they need one.

NOTE: ``cache=False``: on-disk caching can crash under multiprocessing
(numba issue 4807) and ties cached machine code to the CPU it was built on.
Kernels are compiled lazily, on first use, instead.
"""

from __future__ import annotations

import warnings
from typing import Any

from . import _config

#: Options passed to every ``numba.vectorize``/``numba.njit`` call.
CPU_OPTIONS: dict[str, Any] = {"fastmath": False, "cache": False}

#: Options for the scalar device functions the ufuncs are built from.
SCALAR_OPTIONS: dict[str, Any] = {"inline": "always", "fastmath": False, "cache": False}


def cpu_options() -> dict[str, Any]:
    """Return the numba options for CPU kernels, warning about risky overrides.

    ``CBRTGRAD_FASTMATH=1`` turns LLVM fast-math on (for experiments only):
    results are then no longer guaranteed correctly rounded, and special
    values may be wrong, so a ``RuntimeWarning`` says so.

    Returns
    -------
    dict
        Keyword arguments for ``numba.vectorize`` and ``numba.njit``.

    Examples
    --------
    >>> cpu_options()["fastmath"]
    False
    """
    options = dict(CPU_OPTIONS)
    if _config.settings().fastmath:
        warnings.warn(
            "CBRTGRAD_FASTMATH is set: cbrtgrad kernels are compiled with LLVM fast-math, "
            "which breaks correct rounding and special values",
            RuntimeWarning,
            stacklevel=2,
        )
        options["fastmath"] = True
    return options
