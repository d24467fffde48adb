"""The on-disk cache of compiled kernels: where it lives, what it is keyed on, whether it is warm.

Every kernel a call runs (a ufunc's inner loop, a parallel loop) is one numba
function compiled for one signature with numba's own ``cache=True``.
:mod:`cbrtgrad.build.compile` marks each one
(:func:`cbrtgrad.build.locator.kernel_function`), and numba's documented
locator hook (``NUMBA_CACHE_LOCATOR_CLASSES``, set in ``numba.config``) asks
:class:`cbrtgrad.build.locator.KernelLocator` first, which puts a marked kernel
in one folder per *key*: the digest of everything that changes the machine
code (:func:`key`): the CPU's name and features as numba compiles for them
(numba's ``magic_tuple``, which follows ``NUMBA_CPU_NAME`` and
``NUMBA_CPU_FEATURES``), ``CBRTGRAD_VECTOR_WIDTH`` and ``CBRTGRAD_FASTMATH``,
the numba, llvmlite, LLVM and Python versions, cbrtgrad's version and the text
of every module the kernels are built from. The digest is also the entries'
source stamp, so numba itself drops an index written under another key. A
cache written under one key is never read under another; old folders are
left for the user to delete. Every other function (a user's ``cache=True``)
goes on to numba's own locators, unchanged.

Where: ``CBRTGRAD_CACHE_DIR`` if set, else ``$NUMBA_CACHE_DIR/cbrtgrad`` if
numba's variable is set, else the user's cache folder (numba's ``appdirs``:
``~/.cache/cbrtgrad`` on Linux, ``~/Library/Caches/cbrtgrad`` on macOS,
``%LOCALAPPDATA%\\cbrtgrad\\Cache`` on Windows). ``CBRTGRAD_CACHE=0`` turns it
off; a folder that cannot be written turns it off too (the kernels are then
compiled in each process), and so does one that another user could change
(:mod:`cbrtgrad.build.private_folder`, which warns once naming it and why).

NOTE: numba issue 4807 (segfaults with ``cache=True`` when processes compile
at once). numba 0.68 writes each index and data file to a temporary name and
renames it, so no reader sees half a file. What remains is a mismatch
*between* files: a ``@guvectorize`` function caches two files (the kernel and
its gufunc wrapper) that two processes may write with different ABI tags
(numba issue 10128, the reproducers of 4807); a cached caller linked against
a separately cached callee has the same hazard; and two signatures of one
function in one index can be given the same data file by two processes that
save at once (``IndexDataCacheFile.save`` reads, extends and rewrites the
index without a lock), so one signature's entry may point at the other's
code. None of these can happen here: each cached function is one
``cfunc``/``njit`` function with one signature and one data file, each
(function, signature) has its own index (the tag in its file name), and
callees are compiled into their caller's library, never cached on their own.
Two processes that compile the same kernel at once write the same entry;
the last rename wins and both files are whole (tests/test_kernel_cache.py
runs four processes at once on one folder, repeatedly).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from .. import _config
from . import private_folder as _private_folder

#: What decides the machine code: every module of the kernels and of their
#: compile policy (the folders, walked, so that a new module is in the key as
#: soon as it exists) and the settings they read. A change to any is a new key.
_PACKAGE = Path(__file__).resolve().parents[1]
_SOURCE_FOLDERS = ("build", "kernels")
_SOURCE_MODULES = ("_config.py",)


def _source_files() -> list[Path]:
    walked = sorted(p for folder in _SOURCE_FOLDERS for p in (_PACKAGE / folder).rglob("*.py"))
    return [_PACKAGE / name for name in _SOURCE_MODULES] + walked


@lru_cache(maxsize=1)
def _source_digest() -> str:
    digest = hashlib.sha256()
    for path in _source_files():
        digest.update(path.relative_to(_PACKAGE).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _magic_tuple() -> tuple[str, ...]:
    # numba's own description of the code it generates: the target triple,
    # the CPU name and its features (NUMBA_CPU_NAME/NUMBA_CPU_FEATURES apply).
    from numba.core.registry import cpu_target

    return tuple(cpu_target.target_context.codegen().magic_tuple())


def key() -> dict[str, str]:
    """What the cache is keyed on, in this process.

    Returns
    -------
    dict of str to str
        One entry per thing that changes the compiled kernels.

    Examples
    --------
    >>> sorted(key())[:3]
    ['cbrtgrad', 'cpu', 'fastmath']
    """
    import llvmlite
    import llvmlite.binding as llvm
    import numba

    from .._version import __version__

    triple, cpu, features = _magic_tuple()
    settings = _config.settings()
    return {
        "cbrtgrad": __version__,
        "source": _source_digest(),
        "numba": numba.__version__,
        "llvmlite": llvmlite.__version__,
        "llvm": ".".join(map(str, llvm.llvm_version_info)),
        "python": f"{platform.python_implementation()} {sys.version.split()[0]}"
        + getattr(sys, "abiflags", ""),
        "target": triple,
        "cpu": cpu,
        "features": features,
        "vector_width": str(settings.vector_width),
        "fastmath": str(settings.fastmath),
    }


def digest(described: dict[str, str] | None = None) -> str:
    """The folder name of one key: 16 hex digits of its SHA-256.

    Examples
    --------
    >>> len(digest({"cpu": "znver3"}))
    16
    """
    text = json.dumps(key() if described is None else described, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def root() -> Path:
    """The folder that holds one sub-folder per key (whether or not the cache is on).

    Examples
    --------
    >>> root().name
    'cbrtgrad'
    """
    settings = _config.settings()
    if settings.cache_dir:
        return Path(settings.cache_dir).expanduser() / "cbrtgrad"
    if settings.numba_cache_dir:
        return Path(settings.numba_cache_dir).expanduser() / "cbrtgrad"
    from numba.misc.appdirs import AppDirs

    return Path(AppDirs(appname="cbrtgrad", appauthor=False).user_cache_dir)


@lru_cache(maxsize=1)
def _writable(folder: str) -> bool:
    try:
        os.makedirs(folder, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError:
        return False
    return True


def directory() -> Path | None:
    """This process's cache folder, or None when the cache is off, cannot be written or is unsafe.

    Unsafe: another user could change it (:mod:`cbrtgrad.build.private_folder`,
    which warns once naming it); its path is returned resolved.

    Examples
    --------
    >>> folder = directory()
    >>> folder is None or folder.parent == root().resolve()
    True
    """
    if not _config.settings().cache:
        return None
    described = key()
    # Only a folder no other user can change: numba loads pickled code from it.
    folder = _private_folder.private_folder(root(), digest(described))
    if folder is None or not _writable(str(folder)):
        return None
    _write_key_file(folder, described)
    return folder


def _write_key_file(folder: Path, described: dict[str, str]) -> None:
    # For people (and ``cbrtgrad info``): what this folder was keyed on.
    # Written through a temporary file and a rename, as numba writes its own.
    path = folder / "key.json"
    if path.exists():
        return
    temporary = folder / f"key.json.tmp.{os.getpid()}"
    temporary.write_text(json.dumps(described, indent=2, sort_keys=True) + "\n")
    os.replace(temporary, path)


def check_tag(tag: Any) -> None:
    """Refuse a tag that cannot name a cache file (an identifier: ``float64``).

    Examples
    --------
    >>> check_tag("float 64")
    Traceback (most recent call last):
    ...
    ValueError: tag must be an identifier, got 'float 64'
    """
    if not isinstance(tag, str) or not tag.isidentifier():
        raise ValueError(f"tag must be an identifier, got {tag!r}")


def index_path(py_func: Any, tag: str, folder: Path) -> Path:
    """Where numba keeps the index of ``py_func`` compiled for ``tag`` in ``folder``.

    numba's file name: the module's file name, the qualified name, the
    locator's disambiguator, the Python version and ABI flags
    (``CacheImpl.get_filename_base``; tests/test_kernel_cache.py checks it
    against the file numba writes).

    Examples
    --------
    >>> def kernel(x):
    ...     return x
    >>> index_path(kernel, "float64", Path("/c")).suffix
    '.nbi'
    """
    check_tag(tag)
    module = Path(py_func.__code__.co_filename).stem
    name = f"{module}.{py_func.__qualname__}".replace("<", "").replace(">", "")
    lineno = py_func.__code__.co_firstlineno
    version = f"{sys.version_info[0]}{sys.version_info[1]}{getattr(sys, 'abiflags', '')}"
    return folder / f"{name}-{lineno}-{tag}.py{version}.nbi"


@dataclass(frozen=True)
class CacheStatus:
    """The cache as ``cbrtgrad info`` shows it.

    Attributes
    ----------
    enabled : bool
        False when ``CBRTGRAD_CACHE=0``, or the folder cannot be written or is not safe.
    folder : str
        This process's key folder (where it would be, when disabled).
    cached : tuple of str
        The kernels with an entry there.
    missing : tuple of str
        The kernels without one (compiled on first use, then saved).
    """

    enabled: bool
    folder: str
    cached: tuple[str, ...]
    missing: tuple[str, ...]

    def describe(self) -> str:
        """One line: on or off, where, and how warm.

        Examples
        --------
        >>> CacheStatus(True, "/c", ("a",), ("b",)).describe()
        'on, /c: partly warm, 1 of 2 kernels cached'
        >>> CacheStatus(False, "/c", (), ("a",)).describe()
        'off (CBRTGRAD_CACHE=0, or the folder cannot be written or is not safe), /c'
        """
        if not self.enabled:
            return (
                "off (CBRTGRAD_CACHE=0, or the folder cannot be written or is not safe), "
                f"{self.folder}"
            )
        total = len(self.cached) + len(self.missing)
        state = "warm" if not self.missing else "cold" if not self.cached else "partly warm"
        return f"on, {self.folder}: {state}, {len(self.cached)} of {total} kernels cached"


def status(kernels: dict[str, tuple[tuple[Any, ...], str]]) -> CacheStatus:
    """Which of ``kernels`` (``{name: (py_funcs, tag)}``) have every entry in this process's folder.

    Examples
    --------
    >>> status({}).missing
    ()
    """
    folder = directory()
    if folder is None:
        where = root() / digest()
        return CacheStatus(False, str(where), (), tuple(kernels))
    cached: list[str] = []
    missing: list[str] = []
    for name, (py_funcs, tag) in kernels.items():
        whole = all(index_path(f, tag, folder).exists() for f in py_funcs)
        (cached if whole else missing).append(name)
    return CacheStatus(True, str(folder), tuple(cached), tuple(missing))


class KernelCacheWarning(RuntimeWarning):
    """A kernel cache file was damaged: it was removed and the kernel compiled again.

    Raised once per damaged file (an ``.nbi`` index or ``.nbc`` data file
    cut short, overwritten or unreadable), naming it. The call goes on with
    the kernel compiled anew, and the fresh entry saved for the next process.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", KernelCacheWarning)
    ...     warnings.warn("cbrtgrad: the kernel cache file x.nbc is damaged", KernelCacheWarning)
    """
