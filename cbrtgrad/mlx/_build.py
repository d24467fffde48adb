"""Build cbrtgrad's MLX primitives (``_primitive.cpp``) once per machine, and load them.

The extension is built on first use, not at install time: it must be
compiled against the MLX that is installed (its headers, ``libmlx`` and the
nanobind domain of its bindings), which a wheel of cbrtgrad cannot know, and
``pip install cbrtgrad`` must not need MLX or a compiler. The build is
``cmake`` with nanobind's CMake package (the route MLX documents for its
extensions, ``mlx.extension``), about 10 to 20 s on 2 cores; where it is kept
and how processes share it is :mod:`cbrtgrad.build.native`'s.

CMake is the one on ``PATH``, else the one pip's ``cmake`` package brings
(the ``mlx`` extra installs it: :func:`cmake`), so a machine with only
Python, pip and a C++ compiler builds it. A machine without CMake or a C++
compiler gets :class:`BuildError` at the first call, naming what is missing
and how to install it; a failed build names its log.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

from ..build.native import SUFFIX, BuildError, NativeExtension, compiler, run_logged

__all__ = [
    "BUILT_NAME",
    "BuildError",
    "MODULE",
    "SOURCES",
    "cmake",
    "compiler",
    "extension",
    "key",
]

_HERE = Path(__file__).resolve().parent
#: The files the extension is built from (package data of ``cbrtgrad.mlx``).
SOURCES = ("_primitive.cpp", "CMakeLists.txt")
#: The extension's module name (``NB_MODULE`` in ``_primitive.cpp``).
MODULE = "_cbrtgrad_mlx"
#: What ``cbrtgrad warm`` and ``_compile.built_kernels()`` call the build.
BUILT_NAME = "MLX primitive"


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
    }


def cmake() -> str | None:
    """The ``cmake`` a build runs: the one on ``PATH``, else pip's ``cmake`` package's.

    pip installs the ``cmake`` package's console script beside the
    interpreter, which is not on ``PATH`` where the environment is not
    activated (``venv/bin/python -m ...``, a ``--user`` install): the
    package's own binary folder (``cmake.CMAKE_BIN_DIR``) is asked next, then
    the interpreter's folder (an environment that holds a CMake of another
    origin, as conda's). None where there is none.

    Examples
    --------
    >>> found = cmake()
    >>> found is None or Path(found).name.startswith("cmake")
    True
    """
    found = shutil.which("cmake")
    if found:
        return found
    folders = []
    try:
        import cmake as wheel  # pip's cmake package (the mlx extra's)

        folders.append(str(wheel.CMAKE_BIN_DIR))
    except (ImportError, AssertionError, AttributeError, OSError):
        # Not installed, or an install whose files are gone (its import asserts them).
        pass
    folders.append(str(Path(sys.executable).parent))
    for folder in folders:
        found = shutil.which("cmake", path=folder)
        if found:
            return found
    return None


def _missing_tools() -> list[str]:
    missing = []
    if cmake() is None:
        missing.append(
            "CMake (cmake 3.24 or later; neither on PATH nor from pip's cmake package: "
            "python -m pip install cmake, which 'cbrtgrad[mlx]' installs, or the system's package)"
        )
    if compiler() is None:
        missing.append(
            "a C++ compiler (g++ or clang++ with C++20, which pip cannot install: the system's "
            "package, e.g. g++, or Xcode's command line tools; or set CXX)"
        )
    return missing


def _build(work: Path, log: Path) -> Path:
    program = cmake()
    if program is None:  # gone since _missing_tools looked
        raise BuildError("cbrtgrad.mlx: CMake is no longer found; python -m pip install cmake")
    configure = [program, "-S", str(work), "-B", str(work / "build")]
    configure += ["-DCMAKE_BUILD_TYPE=Release", f"-DPython_EXECUTABLE={sys.executable}"]
    if shutil.which("ninja"):
        configure += ["-G", "Ninja"]
    jobs = str(os.cpu_count() or 2)
    build = [program, "--build", str(work / "build"), "-j", jobs]
    run_logged([configure, build], log, "cbrtgrad.mlx: building the MLX primitive")
    built = next((work / "build").glob(f"{MODULE}*{SUFFIX}"), None)
    if built is None:
        raise BuildError(f"cbrtgrad.mlx: the build made no {MODULE}{SUFFIX}; the log is {log}")
    return built


EXTENSION = NativeExtension(
    package="cbrtgrad.mlx",
    label=BUILT_NAME,
    module=MODULE,
    cache_name="mlx-extension",
    sources=SOURCES,
    versions=_versions,
    missing_tools=_missing_tools,
    build=_build,
)


def key() -> str:
    """The digest of everything the extension is built from (16 hex digits).

    Examples
    --------
    >>> len(key())
    16
    """
    return EXTENSION.key()


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
    return EXTENSION.load()
