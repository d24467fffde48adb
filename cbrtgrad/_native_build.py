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
process builds into a temporary folder of its own.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from . import _cache, _compile, _config

#: The file name ending of this Python's extension modules (``.cpython-311-x86_64-linux-gnu.so``).
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


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
        return digest.hexdigest()[:16]

    def _cache_folder(self, digest: str) -> Path | None:
        if not _config.settings().cache:
            return None
        folder = _cache.root() / self.cache_name / digest
        try:
            folder.mkdir(parents=True, exist_ok=True)
            tempfile.TemporaryFile(dir=folder).close()
        except OSError:
            return None
        return folder

    def built(self) -> ModuleType | None:
        """The extension if this machine's cache holds it (never builds, creates nothing)."""
        found = self._loaded.get("module")
        if found is not None or not _config.settings().cache:
            return found
        folder = _cache.root() / self.cache_name / self.key()
        return self._load(folder) if (folder / f"{self.module}{SUFFIX}").exists() else None

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
        return self._load(folder)

    def _load(self, folder: Path) -> ModuleType:
        # The extension in ``folder``, built there first if it is not (once per process).
        with self._lock:
            if "module" not in self._loaded:
                path = self._locked_build(folder)
                name = f"{self.package}.{self.module}"
                spec = importlib.util.spec_from_file_location(name, path)
                if spec is None or spec.loader is None:  # pragma: no cover - a path just built
                    raise BuildError(f"{self.package}: cannot load {path}")
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                self._loaded["module"] = module
            return self._loaded["module"]

    def _locked_build(self, folder: Path) -> Path:
        target = folder / f"{self.module}{SUFFIX}"
        if target.exists():
            _compile.record(self.label, loaded=True)
            return target
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no lock, a build per process at worst
            return self._recorded_build(folder)
        with open(folder / "build.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another process building waits here...
            try:
                if target.exists():  # ...and finds its result
                    _compile.record(self.label, loaded=True)
                    return target
                return self._recorded_build(folder)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _recorded_build(self, folder: Path) -> Path:
        missing = self.missing_tools()
        if missing:
            raise BuildError(
                f"{self.package} builds its {self.label} "
                f"({self.package.replace('.', '/')}/{self.sources[0]}) once per machine, "
                f"and needs {' and '.join(missing)}: none found on PATH"
            )
        work = Path(tempfile.mkdtemp(prefix="build-", dir=folder))
        for name in self.sources:
            shutil.copy(self.here / name, work / name)
        built = self.build(work, folder / "build.log")
        target = folder / f"{self.module}{SUFFIX}"
        os.replace(built, target)  # atomic: a reader sees no file or a whole one
        shutil.rmtree(work, ignore_errors=True)
        _compile.record(self.label, loaded=False)
        return target


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
