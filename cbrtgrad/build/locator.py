"""cbrtgrad's kernels in numba's own ``cache=True``: the locator numba asks first, and the marks.

numba's documented locator hook, ``NUMBA_CACHE_LOCATOR_CLASSES`` (read from
``numba.config`` each time numba creates a cache), lists the classes numba
asks, in order, where a ``cache=True`` function is kept. cbrtgrad puts
:class:`KernelLocator` first and numba's own after it: the locator answers for
the functions :func:`kernel_function` marked (cbrtgrad's kernels, each for
one signature) and keeps them in this process's key folder
(:func:`cbrtgrad.build.cache.directory`), with the key's digest as their source
stamp; every other function goes on to numba's locators, as without
cbrtgrad. :mod:`cbrtgrad.build.cache` says what the key covers and why.
"""

from __future__ import annotations

import os
import types
from pathlib import Path
from typing import Any

from .cache import check_tag, directory, index_path

#: numba's own cache locators, in numba's order (``numba.core.caching``): the
#: list ``NUMBA_CACHE_LOCATOR_CLASSES`` replaces. cbrtgrad's goes first and
#: these follow unchanged, so a user's ``cache=True`` function is cached
#: where numba would put it (tests/test_kernel_cache.py checks this list
#: against numba's).
NUMBA_LOCATORS = (
    "UserProvidedCacheLocator",
    "InTreeCacheLocator",
    "UserWideCacheLocator",
    "IPythonCacheLocator",
    "ZipCacheLocator",
)

#: The attribute that marks a function as a cbrtgrad kernel for
#: :class:`KernelLocator`: ``(folder, tag)``.
_MARK = "_cbrtgrad_cache"


class KernelLocator:
    """numba's cache locator for cbrtgrad's kernels, given to numba through its documented hook.

    numba's ``cache=True`` asks each class named in ``NUMBA_CACHE_LOCATOR_CLASSES``
    (``numba.config.CACHE_LOCATOR_CLASSES``), in order, for a locator of the
    function it caches (``from_function``). This one answers only for
    functions :func:`kernel_function` marked, and puts them in this
    process's key folder (:func:`directory`); every other function goes on to
    numba's own locators.

    Parameters
    ----------
    py_func : function
        The marked kernel.
    folder : pathlib.Path
        The key folder it is cached in.
    tag : str
        Names the one signature it is compiled for.

    Examples
    --------
    >>> def kernel(x):
    ...     return x
    >>> KernelLocator.from_function(kernel, __file__) is None  # not marked
    True
    """

    def __init__(self, py_func: Any, folder: Path, tag: str) -> None:
        self._lineno = py_func.__code__.co_firstlineno
        self._folder = str(folder)
        self._tag = tag

    @classmethod
    def from_function(cls, py_func: Any, py_file: str) -> KernelLocator | None:
        """A locator for a kernel :func:`kernel_function` marked, else None (numba's turn)."""
        mark = getattr(py_func, _MARK, None)
        return None if mark is None else cls(py_func, *mark)

    def ensure_cache_path(self) -> None:
        """Create the key folder (numba calls this before it writes)."""
        os.makedirs(self._folder, exist_ok=True)

    def get_cache_path(self) -> str:
        """The key folder."""
        return self._folder

    def get_source_stamp(self) -> str:
        """The key's digest: numba drops an index written under another stamp.

        The key covers the text of every kernel module, where numba's own
        stamp (the defining file's time and size) covers one file.
        """
        return Path(self._folder).name

    def get_disambiguator(self) -> str:
        """The function's first line and its signature's tag: one index per signature.

        NOTE: numba names a function's index after its module, name and this
        string, and keeps all its signatures in that one index, which two
        processes saving at once can mix up (see the module's NOTE). The tag
        gives each (function, signature) an index of its own.
        """
        return f"{self._lineno}-{self._tag}"


def _register_locator() -> None:
    # NOTE: numba reads the variable each time it creates a cache, and keeps
    # a value set in numba.config unless a NUMBA_ environment variable
    # changes (config.reload_config): so it is set again before every
    # kernel's cache is created. A list the user gave keeps its order, after
    # cbrtgrad's.
    from numba.core import config

    # (config's names are set from the environment at run time: mypy sees none)
    current = getattr(config, "CACHE_LOCATOR_CLASSES", "")
    given = [name.strip() for name in current.split(",") if name.strip()]
    ours = f"{__name__}.{KernelLocator.__name__}"
    if given[:1] != [ours]:
        rest = [name for name in given if name != ours] or list(NUMBA_LOCATORS)
        setattr(config, "CACHE_LOCATOR_CLASSES", ",".join([ours, *rest]))  # noqa: B010


def kernel_function(py_func: Any, tag: str, *, copy: bool = True) -> Any | None:
    """``py_func`` marked for numba's ``cache=True`` to keep in the key folder, or None.

    Parameters
    ----------
    py_func : function
        A module-level function (numba hashes its bytecode and closure into
        the entry's key; a numba function in a closure pickles differently in
        each process, so it would never be found again).
    tag : str
        Names the one signature it is compiled for (``float64``): each
        (function, tag) has its own index file (see the module's NOTE).
    copy : bool
        Mark a copy of ``py_func`` (one per signature), not ``py_func``
        itself; False for a numba function that others call by name, which
        must then be compiled for one signature only.

    Returns
    -------
    function or None
        None when the cache is off (``CBRTGRAD_CACHE=0``) or its folder
        cannot be written: compile with ``cache=False``.

    Examples
    --------
    >>> def kernel(x):
    ...     return x
    >>> marked = kernel_function(kernel, "float64")
    >>> marked is None or (marked is not kernel and marked(2.0) == 2.0)
    True
    """
    check_tag(tag)
    folder = directory()
    if folder is None:
        return None
    if copy:
        marked = types.FunctionType(
            py_func.__code__,
            py_func.__globals__,
            py_func.__name__,
            py_func.__defaults__,
            py_func.__closure__,
        )
        marked.__qualname__ = py_func.__qualname__
        marked.__module__ = py_func.__module__
    else:
        marked = py_func
        mark = getattr(marked, _MARK, None)
        if mark is not None and mark[1] != tag:
            raise ValueError(
                f"{py_func.__qualname__} is cached for {mark[1]} already: "
                "a function others call by name has one signature"
            )
    setattr(marked, _MARK, (folder, tag))
    _register_locator()
    return marked


def has_entry(py_func: Any, tag: str) -> bool:
    """Whether this process's key folder holds ``py_func`` compiled for ``tag``.

    Examples
    --------
    >>> def kernel(x):
    ...     return x
    >>> has_entry(kernel, "float64")
    False
    """
    folder = directory()
    return folder is not None and index_path(py_func, tag, folder).exists()
