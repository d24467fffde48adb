"""Build a C++ extension of cbrtgrad's once per machine, keep it in the cache folder, load it.

Two bridges hold C++: the MLX primitive (:mod:`cbrtgrad.mlx._build`, which
the MLX bridge needs) and the PyTorch entry (:mod:`cbrtgrad.torch._native`,
which makes the bridge's small calls faster). Each must be compiled against
the framework that is installed (its headers and libraries), which a wheel
of cbrtgrad cannot know, and ``pip install cbrtgrad`` must need neither the
framework nor a compiler; so each is built on this machine, not at install
time. :class:`NativeExtension` describes one (its sources, the versions that
make a build another, how to build it); this module keeps the result in
cbrtgrad's cache folder under a key of all that, so a later process loads it
in milliseconds. Two processes that build at once (pytest-xdist workers)
take turns on a lock file; the second finds the first's result. With the
cache off (``CBRTGRAD_CACHE=0``, or a folder that cannot be written) each
process builds into a temporary folder of its own, and so it does where
another user could change the cache folder (:mod:`cbrtgrad.build.private_folder`).

NOTE: a shared library cut short (a full disk, a copy interrupted, a crash
before the file system wrote it out) kills the process that loads it with
SIGBUS, since the loader maps past the end of the file; no exception can
catch that. So each build is written whole (to a temporary name, synced,
then renamed), its size and SHA-256 are recorded beside it the same way
once it is in place, and a build is loaded only where both match: a missing
or different record means a build cut short or damaged since, which is
built again where the caller builds (:meth:`NativeExtension.load`) and
otherwise not loaded (:meth:`NativeExtension.built`), with a warning
naming the file.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from .. import _config
from . import cache as _cache
from . import compile as _compile
from . import private_folder as _private_folder

#: The file name ending of this Python's extension modules (``.cpython-311-x86_64-linux-gnu.so``).
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]
#: The ending of the record beside a build: its size and SHA-256, written once it is in place.
RECORD = ".record.json"
#: Part of every build's key: builds made before records were written have
#: none, and are left in their old folders rather than refused with a warning.
_LAYOUT = "a record of size and SHA-256 beside each build"


class BuildError(RuntimeError):
    """A C++ extension of cbrtgrad's could not be built here (a missing tool, or a failed build).

    Examples
    --------
    >>> issubclass(BuildError, RuntimeError)
    True
    """


def compiler() -> str | None:
    """The C++ compiler a build uses: ``$CXX`` if set, else the first of c++, g++, clang++.

    Examples
    --------
    >>> compiler() is None or len(compiler()) > 0
    True
    """
    chosen = os.environ.get("CXX", "").strip()
    if chosen:
        return shutil.which(chosen.split()[0])
    for name in ("c++", "g++", "clang++"):
        found = shutil.which(name)
        if found:
            return found
    return None


def python_versions() -> dict[str, str]:
    """What every extension is built for besides its framework: Python and the platform.

    Examples
    --------
    >>> sorted(python_versions())
    ['platform', 'python']
    """
    return {"python": sys.version, "platform": f"{sys.platform} {platform.machine()}"}


@dataclass(frozen=True)
class NativeExtension:
    """One C++ extension: what it is built from, and how.

    Attributes
    ----------
    package : str
        The subpackage that holds its sources and loads it (``cbrtgrad.mlx``).
    label : str
        What ``cbrtgrad warm`` and ``_compile.built_kernels()`` call the build.
    module : str
        The extension module's name (its ``PyInit_`` name).
    cache_name : str
        Its folder in cbrtgrad's cache folder (one subfolder per key).
    sources : tuple of str
        The files it is built from, in the package's folder (package data).
    versions : callable
        The versions a build depends on, by name (raises :class:`BuildError`
        where a build tool the package needs is not installed).
    missing_tools : callable
        The tools the build needs that are not on this machine, as sentences.
    build : callable
        ``build(work, log)``: builds in ``work`` (a copy of the sources),
        writing its commands' output to ``log``; returns the built file.
    """

    package: str
    label: str
    module: str
    cache_name: str
    sources: tuple[str, ...]
    versions: Callable[[], dict[str, str]]
    missing_tools: Callable[[], list[str]]
    build: Callable[[Path, Path], Path]
    _loaded: dict[str, ModuleType] = field(default_factory=dict, compare=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)

    @property
    def here(self) -> Path:
        """The package's folder, where the sources are."""
        spec = importlib.util.find_spec(self.package)
        if spec is None or spec.origin is None:  # pragma: no cover - a package of ours
            raise BuildError(f"{self.package}: not found")
        return Path(spec.origin).resolve().parent

    def key(self) -> str:
        """The digest of everything the extension is built from (16 hex digits)."""
        digest = hashlib.sha256()
        for name in self.sources:
            digest.update((self.here / name).read_bytes())
        for item in sorted((self.versions() | python_versions()).items()):
            digest.update(repr(item).encode())
        digest.update(_LAYOUT.encode())
        return digest.hexdigest()[:16]

    def _cache_folder(self, digest: str) -> Path | None:
        if not _config.settings().cache:
            return None
        folder = _private_folder.private_folder(_cache.root(), self.cache_name, digest)
        if folder is None:
            return None
        try:
            tempfile.TemporaryFile(dir=folder).close()
        except OSError:
            return None
        return folder

    def built(self) -> ModuleType | None:
        """The extension if this machine's cache holds it whole (never builds, creates nothing).

        A build whose record of size and SHA-256 is missing or differs is
        not loaded: a ``RuntimeWarning`` names the file, and None is returned.
        """
        found = self._loaded.get("module")
        if found is not None or not _config.settings().cache:
            return found
        root = _cache.root()
        folder = _private_folder.private_folder(root, self.cache_name, self.key(), create=False)
        if folder is None or not (folder / f"{self.module}{SUFFIX}").exists():
            return None
        return self._load(folder, build=False)

    def load(self) -> ModuleType:
        """The extension, built first where this machine has none (once per process).

        Raises
        ------
        BuildError
            Where a tool the build needs is missing, or the build fails.
        """
        found = self._loaded.get("module")
        if found is not None:
            return found
        folder = self._cache_folder(self.key())
        if folder is None:
            folder = Path(tempfile.mkdtemp(prefix=f"cbrtgrad-{self.module}-"))
        module = self._load(folder, build=True)
        assert module is not None  # built where missing or damaged
        return module

    def _load(self, folder: Path, build: bool) -> ModuleType | None:
        # The extension in ``folder``, checked against its record; with
        # ``build``, built there first where it is missing or damaged.
        with self._lock:
            if "module" not in self._loaded:
                path = self._whole_or_built(folder, build)
                if path is None:
                    return None
                name = f"{self.package}.{self.module}"
                spec = importlib.util.spec_from_file_location(name, path)
                if spec is None or spec.loader is None:  # pragma: no cover - a path just built
                    raise BuildError(f"{self.package}: cannot load {path}")
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                self._loaded["module"] = module
            return self._loaded["module"]

    def _whole_or_built(self, folder: Path, build: bool) -> Path | None:
        target = folder / f"{self.module}{SUFFIX}"
        if damage(target) is None:
            _compile.record(self.label, loaded=True)
            return target
        # Missing or damaged, or a build of another process under way: ask
        # again holding the lock, which a building process holds throughout.
        with _build_lock(folder, wait=build) as held:
            if not held:  # built(): another process is building it; not now
                return None
            why = damage(target)
            if why is None:  # another process's build, finished while we waited
                _compile.record(self.label, loaded=True)
                return target
            if target.exists() or _record(target).exists():
                action = (
                    "building it again"
                    if build
                    else f"not loaded (`cbrtgrad warm --only {self.package.split('.')[-1]}` "
                    "builds it again)"
                )
                warnings.warn(
                    f"cbrtgrad: the {self.label} build {target} {why}: {action}",
                    RuntimeWarning,
                    stacklevel=5,
                )
            return self._recorded_build(folder) if build else None

    def _recorded_build(self, folder: Path) -> Path:
        missing = self.missing_tools()
        if missing:
            raise BuildError(
                f"{self.package} builds its {self.label} "
                f"({self.package.replace('.', '/')}/{self.sources[0]}) once per machine, "
                f"and needs {' and '.join(missing)}: none found on PATH"
            )
        target = folder / f"{self.module}{SUFFIX}"
        _record(target).unlink(missing_ok=True)  # the old file's, which the new one replaces
        work = Path(tempfile.mkdtemp(prefix="build-", dir=folder))
        for name in self.sources:
            shutil.copy(self.here / name, work / name)
        built = self.build(work, folder / "build.log")
        size, sha256 = _measure(built, sync=True)
        os.replace(built, target)  # atomic: a reader sees no file or a whole one
        _write_atomically(_record(target), json.dumps({"size": size, "sha256": sha256}) + "\n")
        shutil.rmtree(work, ignore_errors=True)
        _compile.record(self.label, loaded=False)
        return target


def _record(target: Path) -> Path:
    return target.with_name(target.name + RECORD)


def _measure(path: Path, sync: bool = False) -> tuple[int, str]:
    # The size and SHA-256 of what is in the file (synced to disk first: a
    # crash after the rename must not leave the name on a file cut short).
    with open(path, "rb") as stream:
        if sync:
            os.fsync(stream.fileno())
        data = stream.read()
    return len(data), hashlib.sha256(data).hexdigest()


def _write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(f"{path.name}.tmp.{os.getpid()}")
    with open(temporary, "w") as stream:
        stream.write(text)
        stream.flush()
        os.fsync(stream.fileno())
    os.replace(temporary, path)


def damage(target: Path) -> str | None:
    """Why the build ``target`` must not be loaded, or None where it is whole.

    Whole: its record (beside it, written when the build finished) exists
    and gives its size and SHA-256.

    Examples
    --------
    >>> import tempfile
    >>> damage(Path(tempfile.mkdtemp()) / "none.so")
    'does not exist'
    """
    try:
        size = target.stat().st_size
    except FileNotFoundError:
        return "does not exist"
    try:
        record = json.loads(_record(target).read_text())
        expected = (int(record["size"]), str(record["sha256"]))
    except FileNotFoundError:
        return "has no record of its build (a build cut short?)"
    except (OSError, ValueError, TypeError, KeyError) as error:
        return f"has a record that cannot be read ({type(error).__name__})"
    if size != expected[0]:
        return f"is {size} bytes where its build wrote {expected[0]} (cut short or damaged)"
    if _measure(target)[1] != expected[1]:
        return "has another SHA-256 than its build wrote (damaged)"
    return None


@contextlib.contextmanager
def _build_lock(folder: Path, wait: bool) -> Iterator[bool]:
    # The folder's build lock, which a building process holds throughout.
    # ``wait``: take it (creating the lock file), waiting out a build under
    # way; else only try it, creating nothing, and yield False where a build
    # is under way. Windows has no fcntl: no lock, a build per process at worst.
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield True
        return
    path = folder / "build.lock"
    if not wait and not path.exists():
        yield True  # no process ever built here
        return
    with open(path, "a" if wait else "r") as lock:
        if wait:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another process building waits here
        else:
            try:
                fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
        try:
            yield True
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def run_logged(commands: list[list[str]], log: Path, what: str) -> None:
    """Run build commands in turn, their output into ``log``; a failure is a :class:`BuildError`.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> log = pathlib.Path(tempfile.mkdtemp()) / "build.log"
    >>> run_logged([[sys.executable, "-c", "print('built')"]], log, "a demo")
    >>> log.read_text().splitlines()[-1]
    'built'
    """
    with open(log, "w") as stream:
        for command in commands:
            stream.write("$ " + " ".join(command) + "\n")
            stream.flush()
            done = subprocess.run(command, stdout=stream, stderr=subprocess.STDOUT, check=False)
            if done.returncode != 0:
                tail = log.read_text().splitlines()[-15:]
                raise BuildError(
                    f"{what}: the build failed ({' '.join(command[:2])} exited with "
                    f"{done.returncode}); the log is {log}:\n" + "\n".join(tail)
                )
