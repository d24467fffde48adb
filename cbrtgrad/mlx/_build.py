"""Build cbrtgrad's MLX primitives (``_primitive.cpp``) once per machine, and load them.

The extension is built on first use, not at install time: it must be
compiled against the MLX that is installed (its headers, ``libmlx`` and the
nanobind domain of its bindings), which a wheel of cbrtgrad cannot know, and
``pip install cbrtgrad`` must not need MLX or a compiler. The build is
``cmake`` with nanobind's CMake package (the route MLX documents for its
extensions, ``mlx.extension``), about 10 to 20 s on 2 cores, and its result is
kept in cbrtgrad's cache folder under a key of everything it was built from
(the two sources, the MLX, nanobind and Python versions, the platform), so a
later process loads it in milliseconds. Two processes that build at once
(pytest-xdist workers) take turns on a lock file; the second finds the first's
result. With the cache off (``CBRTGRAD_CACHE=0``, or a folder that cannot be
written) each process builds into a temporary folder of its own.

A machine without CMake or a C++ compiler gets :class:`BuildError` at the
first call, naming what is missing; a failed build names its log.
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
from pathlib import Path
from types import ModuleType
from typing import Any

from .. import _cache, _compile, _config

_HERE = Path(__file__).resolve().parent
#: The files the extension is built from (package data of ``cbrtgrad.mlx``).
SOURCES = ("_primitive.cpp", "CMakeLists.txt")
#: The extension's module name (``NB_MODULE`` in ``_primitive.cpp``).
MODULE = "_cbrtgrad_mlx"
#: What ``cbrtgrad warm`` and ``_compile.built_kernels()`` call the build.
BUILT_NAME = "MLX primitive"
_LOCK = threading.Lock()
_LOADED: dict[str, ModuleType] = {}


class BuildError(RuntimeError):
    """The MLX primitives could not be built here (a missing tool, or a failed build).

    Examples
    --------
    >>> issubclass(BuildError, RuntimeError)
    True
    """


def compiler() -> str | None:
    """The C++ compiler CMake will use: ``$CXX`` if set, else the first of c++, g++, clang++.

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


def _versions() -> dict[str, str]:
    import mlx.core as mx

    try:
        import nanobind
    except ImportError:
        raise BuildError(
            "cbrtgrad.mlx builds its MLX primitive with nanobind, which is not installed: "
            "python -m pip install 'cbrtgrad[mlx]'"
        ) from None

    return {
        "mlx": str(getattr(mx, "__version__", "")),
        "nanobind": str(getattr(nanobind, "__version__", "")),
        "python": sys.version,
        "platform": f"{sys.platform} {platform.machine()}",
    }


def key() -> str:
    """The digest of everything the extension is built from (16 hex digits).

    Examples
    --------
    >>> len(key())
    16
    """
    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update((_HERE / name).read_bytes())
    for item in sorted(_versions().items()):
        digest.update(repr(item).encode())
    return digest.hexdigest()[:16]


def _folder(digest: str) -> Path:
    if _config.settings().cache:
        folder = _cache.root() / "mlx-extension" / digest
        try:
            folder.mkdir(parents=True, exist_ok=True)
            tempfile.TemporaryFile(dir=folder).close()
            return folder
        except OSError:
            pass
    return Path(tempfile.mkdtemp(prefix="cbrtgrad-mlx-"))


def _missing_tools() -> list[str]:
    missing = []
    if shutil.which("cmake") is None:
        missing.append("CMake (cmake, 3.24 or later: pip install cmake, or the system's package)")
    if compiler() is None:
        missing.append("a C++ compiler (g++ or clang++ with C++20; or set CXX)")
    return missing


def _build(folder: Path) -> Path:
    missing = _missing_tools()
    if missing:
        raise BuildError(
            "cbrtgrad.mlx builds its MLX primitive (cbrtgrad/mlx/_primitive.cpp) once, on "
            f"first use, and needs {' and '.join(missing)}: none found on PATH"
        )
    work = Path(tempfile.mkdtemp(prefix="build-", dir=folder))
    for name in SOURCES:
        shutil.copy(_HERE / name, work / name)
    configure = ["cmake", "-S", str(work), "-B", str(work / "build")]
    configure += ["-DCMAKE_BUILD_TYPE=Release", f"-DPython_EXECUTABLE={sys.executable}"]
    if shutil.which("ninja"):
        configure += ["-G", "Ninja"]
    log = folder / "build.log"
    with open(log, "w") as stream:
        jobs = str(os.cpu_count() or 2)
        for command in (configure, ["cmake", "--build", str(work / "build"), "-j", jobs]):
            stream.write("$ " + " ".join(command) + "\n")
            stream.flush()
            done = subprocess.run(command, stdout=stream, stderr=subprocess.STDOUT, check=False)
            if done.returncode != 0:
                tail = log.read_text().splitlines()[-15:]
                raise BuildError(
                    f"cbrtgrad.mlx: building the MLX primitive failed ({' '.join(command[:2])} "
                    f"exited with {done.returncode}); the log is {log}:\n" + "\n".join(tail)
                )
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    built = next((work / "build").glob(f"{MODULE}*{suffix}"), None)
    if built is None:
        raise BuildError(f"cbrtgrad.mlx: the build made no {MODULE}{suffix}; the log is {log}")
    target = folder / f"{MODULE}{suffix}"
    os.replace(built, target)  # atomic: a reader sees no file or a whole one
    shutil.rmtree(work, ignore_errors=True)
    return target


def _locked_build(folder: Path) -> Path:
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    target = folder / f"{MODULE}{suffix}"
    if target.exists():
        _compile.record(BUILT_NAME, loaded=True)
        return target
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not on the platforms MLX's CPU build runs on
        return _recorded_build(folder)
    with open(folder / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process building waits here...
        try:
            if target.exists():  # ...and finds its result
                _compile.record(BUILT_NAME, loaded=True)
                return target
            return _recorded_build(folder)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _recorded_build(folder: Path) -> Path:
    built = _build(folder)
    _compile.record(BUILT_NAME, loaded=False)
    return built


def extension() -> Any:
    """The built extension module (built on the first call of a process that finds none).

    Raises
    ------
    BuildError
        Where CMake or a C++ compiler is missing, or the build fails.

    Examples
    --------
    >>> sorted(n for n in dir(extension()) if not n.startswith("_"))
    ['cube_root', 'cube_root_grad']
    """
    found = _LOADED.get("module")
    if found is not None:
        return found
    with _LOCK:
        if "module" not in _LOADED:
            path = _locked_build(_folder(key()))
            spec = importlib.util.spec_from_file_location(f"cbrtgrad.mlx.{MODULE}", path)
            if spec is None or spec.loader is None:  # pragma: no cover - a path we just built
                raise BuildError(f"cbrtgrad.mlx: cannot load {path}")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            _LOADED["module"] = module
        return _LOADED["module"]
