"""The old import paths of the measuring code: each name found at its new home, with a warning.

Before issue 25 the measuring code lived among the core modules, and
``cbrtgrad.benchmarking`` and ``cbrtgrad.plotting`` were documented
(docs/api.rst). Those two modules are now shims whose module-level
``__getattr__`` (PEP 562) comes from :func:`redirect`: each access of a
moved name gives the very object of :mod:`cbrtgrad.bench`, and warns at the
caller's line. No core module imports a shim.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Iterable
from typing import Any


def redirect(old: str, homes: dict[str, Iterable[str]]) -> tuple[Callable[[str], Any], list[str]]:
    """The ``__getattr__`` and ``__all__`` of the shim module ``old``.

    Parameters
    ----------
    old : str
        The shim's own name, e.g. ``"cbrtgrad.benchmarking"``.
    homes : dict of str to iterable of str
        Each new module (full name) and the public names it took from ``old``.

    Returns
    -------
    tuple
        ``__getattr__(name)``: the object at its new home, after a
        ``DeprecationWarning`` naming that home (an ``AttributeError`` for
        any other name); and ``__all__``, every moved name (for ``import *``).
        NOTE: no ``__dir__`` lists the moved names: tools that walk ``dir()``
        of every module (pytest's fixture discovery, completion) would warn
        for each.

    Examples
    --------
    >>> import warnings
    >>> getattr_, all_ = redirect("old_timing", {"cbrtgrad.bench.timing": ["best_time"]})
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     moved = getattr_("best_time")
    >>> from cbrtgrad.bench.timing import best_time
    >>> moved is best_time, caught[0].category.__name__
    (True, 'DeprecationWarning')
    >>> print(caught[0].message)
    old_timing.best_time moved to cbrtgrad.bench.timing.best_time; old_timing will be removed
    >>> all_
    ['best_time']
    """
    where = {name: module for module, names in homes.items() for name in names}

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        new = where[name]
        warnings.warn(
            f"{old}.{name} moved to {new}.{name}; {old} will be removed",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(new), name)

    return __getattr__, sorted(where)
