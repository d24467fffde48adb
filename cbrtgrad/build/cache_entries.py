"""numba's cache files of cbrtgrad's kernels, loaded so that a damaged one is compiled again.

numba keeps each cached function in an index (``.nbi``: numba's version, the
source stamp, and which data file holds each signature) and a data file per
signature (``.nbc``: the pickled compile result with its object code), and
loads both with ``pickle``, letting every failure through. A file cut short
(a full disk, an interrupted copy of a cache folder, a file system that lost
the last writes) or overwritten makes the kernel's every later call raise
``UnpicklingError`` or ``EOFError`` from inside numba, in every process,
naming neither the file nor the cache, until someone finds and deletes it.

:class:`KernelCache` is numba's own ``FunctionCache`` for one kernel, but
that a file that fails to load, whatever the failure (a pickle cut short or
of something else, a data file numba cannot rebuild a kernel from, a file
that cannot be read), is removed, named in one
:class:`cbrtgrad.build.cache.KernelCacheWarning`, and taken as absent: numba then
compiles the kernel and saves a fresh entry, which the next process loads.
The damaged file is removed *before* the warning, so that a program running
with warnings as errors finds a clean cache on its next call too.

NOTE: numba creates a function's cache object itself (``enable_caching``:
``FunctionCache(py_func)``), with no hook for another class, so
:func:`attach` sets it where ``enable_caching`` does, on the dispatcher's or
the C callback's ``_cache`` (tests/test_kernel_cache.py checks that numba
still keeps it there).
"""

from __future__ import annotations

import os
import warnings
from typing import Any

from numba.core.caching import FunctionCache, IndexDataCacheFile

from .cache import KernelCacheWarning


def _drop(path: str, error: BaseException) -> bool:
    """Remove the damaged file ``path`` and warn naming it; whether it is gone."""
    try:
        os.remove(path)
        gone = True
    except FileNotFoundError:  # another process removed (or replaced) it first
        gone = True
    except OSError:
        gone = False
    then = (
        "it was removed, and the kernel is compiled again and saved"
        if gone
        else "it could not be removed, so the kernel is compiled in this process, not saved"
    )
    warnings.warn(
        f"cbrtgrad: the kernel cache file {path} is damaged "
        f"({type(error).__name__}: {error}); {then}",
        KernelCacheWarning,
        stacklevel=2,
    )
    return gone


class _EntryFiles(IndexDataCacheFile):  # type: ignore[misc]  # (numba is untyped)
    """numba's index and data files of one kernel; a damaged one is dropped and reads as absent."""

    def __init__(self, cache_path: str, filename_base: str, source_stamp: Any) -> None:
        super().__init__(cache_path, filename_base, source_stamp)
        #: The data file read last: what a failure to rebuild the kernel names.
        self.data_read: str | None = None
        #: False once a damaged file could not be removed: nothing is saved then.
        self.writable = True

    def _load_index(self) -> dict[Any, str]:
        # numba reads the index both to load and to save (it extends it): a
        # damaged one reads as empty either way, and the save rewrites it.
        try:
            overloads = super()._load_index()
            if not isinstance(overloads, dict):
                raise TypeError(f"the index holds a {type(overloads).__name__}, not a dict")
        except Exception as error:  # noqa: BLE001 (any failure: the file is unusable)
            self.writable &= _drop(self._index_path, error)
            return {}
        return overloads

    def _load_data(self, name: str) -> Any:
        path = self._data_path(name)
        self.data_read = path
        try:
            return super()._load_data(name)
        except FileNotFoundError:
            raise  # numba's load: an index may outlive its data file; a miss
        except Exception as error:  # noqa: BLE001 (any failure: the file is unusable)
            self.writable &= _drop(path, error)
            return None


class KernelCache(FunctionCache):  # type: ignore[misc]  # (numba is untyped)
    """numba's ``FunctionCache`` of one cbrtgrad kernel: a damaged entry is compiled again.

    Parameters
    ----------
    py_func : function
        The kernel, marked by :func:`cbrtgrad.build.locator.kernel_function`.
    """

    def __init__(self, py_func: Any) -> None:
        super().__init__(py_func)
        self._cache_file = _EntryFiles(
            self._cache_path,
            self._impl.filename_base,
            self._impl.locator.get_source_stamp(),
        )

    def _load_overload(self, sig: Any, target_context: Any) -> Any:
        files = self._cache_file
        files.data_read = None
        try:
            return super()._load_overload(sig, target_context)
        except Exception as error:
            # The files were read whole: the data file holds a pickle numba
            # cannot rebuild the kernel from (another thing, another layout).
            if files.data_read is None:
                raise
            files.writable &= _drop(files.data_read, error)
            return None

    def _save_overload(self, sig: Any, data: Any) -> None:
        if self._cache_file.writable:
            super()._save_overload(sig, data)


def attach(compiled: Any, py_func: Any) -> None:
    """Give ``compiled`` (a numba dispatcher or C callback) a :class:`KernelCache` of ``py_func``.

    What numba's ``enable_caching`` does with its own ``FunctionCache``.

    Examples
    --------
    >>> import numba
    >>> from cbrtgrad.build import locator as _locator
    >>> def kernel(x):
    ...     return x
    >>> marked = _locator.kernel_function(kernel, "float64")
    >>> dispatcher = numba.njit(marked or kernel)
    >>> if marked is not None:
    ...     attach(dispatcher, marked)
    >>> dispatcher(2.0)
    2.0
    """
    compiled._cache = KernelCache(py_func)
