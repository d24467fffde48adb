"""ndarray subclasses in the api's calls, by numpy's rules.

On the cpu backend numpy's ufunc call does all of it (:mod:`cbrtgrad.backends.host`).
Off it, a subclass that overrides ``__array_ufunc__`` (``np.ma.MaskedArray``,
the engine's ``Tensor.data`` views) still decides a call itself, given the
cpu backend's numpy ufunc; any other subclass is computed on its
plain-ndarray view (:func:`plain`) and the result wrapped back by the
subclass numpy would pick (:func:`subclass`, :func:`wrap`).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def subclass(*values: Any) -> Any:
    """The ndarray-subclass argument that decides the result's type, as in numpy, or None.

    numpy lets the subclass of highest ``__array_priority__`` wrap a ufunc's
    result (``np.matrix``, ``np.memmap``, user subclasses).
    """
    found = None
    for v in values:
        if isinstance(v, np.ndarray) and type(v) is not np.ndarray:
            if found is None or v.__array_priority__ > found.__array_priority__:
                found = v
    return found


def overrides_ufuncs(value: Any) -> bool:
    return type(value).__array_ufunc__ is not np.ndarray.__array_ufunc__


def plain(value: Any) -> Any:
    return value.view(np.ndarray) if isinstance(value, np.ndarray) else value


def has_subclass(*values: Any) -> bool:
    for v in values:
        if isinstance(v, tuple):
            if has_subclass(*v):
                return True
        elif isinstance(v, np.ndarray) and type(v) is not np.ndarray:
            return True
    return False


def wrap(sub: Any, result: Any, args: tuple[Any, ...], index: int) -> Any:
    if sub is None or not isinstance(result, (np.ndarray, np.generic)):
        return result  # a lazy or device array
    scalar = isinstance(result, np.generic)  # a 0-d result: numpy asks for a scalar
    # The context numpy gives a ufunc's __array_wrap__ (np.ma takes the
    # inputs' masks from it): the cpu backend's ufunc stands for the function.
    from ..kernels.cpu import catalog as cpu_kernels

    ufuncs = cpu_kernels.ufuncs()
    ufunc = ufuncs.cube_root if len(args) == 1 else ufuncs.cube_root_grad
    return sub.__array_wrap__(np.asarray(result), (ufunc, args, index), scalar)
