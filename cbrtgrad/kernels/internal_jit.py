"""numba functions that only numba code calls: compiled without a Python entry.

numba compiles two wrappers around every function it compiles for the CPU:
one that Python calls (it unboxes the arguments and boxes the result) and a
C one (for first-class function values). The formulas and the block
functions the kernels are built from are only ever called from other numba
code, which calls the function itself, so both wrappers are compiled for
nothing, and cost the first call its compile time (docs/cache.md, "What a
kernel costs to compile").

NOTE: numba calls the missing Python entry anyway if Python calls such a
function, and the process crashes; :class:`NumbaOnlyDispatcher` refuses the
call with a ``TypeError`` instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from numba.core.registry import CPUDispatcher

#: numba's options that leave out both wrappers: for the functions here, and
#: as ``jit_options`` of an ``@overload`` (numba gives those no Python entry
#: already, but a C one). Typed ``Any``: numba's stubs type ``jit_options``
#: as a dict of the public options only.
WITHOUT_ENTRIES: Any = {"no_cpython_wrapper": True, "no_cfunc_wrapper": True}


class NumbaOnlyDispatcher(CPUDispatcher):  # type: ignore[misc]
    """A numba dispatcher without a Python entry: numba code calls it, Python cannot."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = getattr(self.py_func, "__qualname__", "this function")
        raise TypeError(
            f"{name} is compiled for numba code only (cbrtgrad.kernels.internal_jit): "
            "call it from an @numba.njit function"
        )


def numba_only(**options: Any) -> Callable[[Callable[..., Any]], Any]:
    """``numba.njit(**options)`` for a function only numba code calls: no wrappers, no Python call.

    Parameters
    ----------
    **options
        numba's options (``cbrtgrad.build.compile.FORMULA_OPTIONS`` and the like).

    Returns
    -------
    callable
        A decorator giving a :class:`NumbaOnlyDispatcher`.

    Examples
    --------
    >>> import numba
    >>> @numba_only(inline="never")
    ... def twice(v):
    ...     return 2.0 * v
    >>> @numba.njit
    ... def caller(v):
    ...     return twice(v) + 1.0
    >>> caller(3.0)
    7.0
    >>> twice(3.0)
    Traceback (most recent call last):
    ...
    TypeError: twice is compiled for numba code only ...
    """
    targetoptions = {**options, **WITHOUT_ENTRIES}
    if targetoptions.pop("cache", False):
        raise ValueError("numba_only: a function without a Python entry is cached in its callers")

    def decorate(function: Callable[..., Any]) -> Any:
        return NumbaOnlyDispatcher(py_func=function, locals={}, targetoptions=targetoptions)

    return decorate
