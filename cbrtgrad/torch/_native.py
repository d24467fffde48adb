"""The PyTorch entry (``_entry.cpp``): the bridge's small untracked calls in C++, where built.

The bridge runs every call in Python (:mod:`._functions`); a small call that
no autograd records costs some 3 µs there on one element, more than twice
``torch.exp``'s call, nearly all of it Python around the kernel. The entry
runs those calls in C++ (under 1 µs), with the same kernels: the numba loops
of :mod:`cbrtgrad.kernels.handlers.buffer_loops`, the ufuncs' block entries.

It must be compiled against the installed PyTorch, so it is built on this
machine (one compiler command, some 15 s on 2 cores) by ``cbrtgrad warm``
(or :func:`build`), and kept in cbrtgrad's cache folder
(:mod:`cbrtgrad.build.native`). A process uses it where that build is
there, and runs everything in Python otherwise: the entry is a speed-up,
never needed, so nothing builds it on a call (a first call would take 15 s
more).
"""

from __future__ import annotations

import sys
import sysconfig
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from ..build import native as _native_build
from ..build.native import BuildError, NativeExtension, compiler, run_logged

#: The file the entry is built from (package data of ``cbrtgrad.torch``).
SOURCES = ("_entry.cpp",)
#: The extension's module name (``PyInit__cbrtgrad_torch`` in ``_entry.cpp``).
MODULE = "_cbrtgrad_torch"
#: What ``cbrtgrad warm`` and ``_compile.built_kernels()`` call the build.
BUILT_NAME = "PyTorch entry"
#: ``set_loop``'s indices: the kernels, then the dtypes (``_entry.cpp``).
KERNELS = ("forward", "grad")
DTYPES = {torch.float32: ("float32", 0), torch.float64: ("float64", 1)}


def _versions() -> dict[str, str]:
    return {
        "torch": torch.__version__,
        "torch folder": str(Path(torch.__file__).resolve().parent),
        "cxx11 abi": str(torch.compiled_with_cxx11_abi()),
    }


def _missing_tools() -> list[str]:
    if compiler() is None:
        return ["a C++ compiler (g++ or clang++ with C++20; or set CXX)"]
    return []


def _build(work: Path, log: Path) -> Path:
    from torch.utils import cpp_extension

    cxx = compiler()
    assert cxx is not None  # _missing_tools said so
    built = work / f"{MODULE}{_native_build.SUFFIX}"
    command = [cxx, "-O2", "-std=c++20", "-shared", "-fPIC", "-w"]
    command += [f"-D_GLIBCXX_USE_CXX11_ABI={int(torch.compiled_with_cxx11_abi())}"]
    command += [f"-I{path}" for path in cpp_extension.include_paths()]
    command += [f"-I{sysconfig.get_paths()['include']}", str(work / SOURCES[0]), "-o", str(built)]
    for folder in cpp_extension.library_paths():
        command += [f"-L{folder}", f"-Wl,-rpath,{folder}"]
    command += ["-ltorch_python", "-ltorch", "-ltorch_cpu", "-lc10"]
    if sys.platform == "darwin":  # Python's symbols come from the interpreter that loads it
        command += ["-undefined", "dynamic_lookup"]
    run_logged([command], log, "cbrtgrad.torch: building the PyTorch entry")
    return built


EXTENSION = NativeExtension(
    package="cbrtgrad.torch",
    label=BUILT_NAME,
    module=MODULE,
    cache_name="torch-entry",
    sources=SOURCES,
    versions=_versions,
    missing_tools=_missing_tools,
    build=_build,
)


def build() -> ModuleType:
    """Build the entry on this machine now (once: later calls and processes load it).

    ``cbrtgrad warm`` does the same. Until then the bridge runs its small
    calls in Python; from now on this process runs them with it.

    Raises
    ------
    BuildError
        Where no C++ compiler is found, or the build fails (naming its log).

    Examples
    --------
    >>> sorted(n for n in dir(build()) if not n.startswith("_"))
    ['cube_root', 'cube_root_and_grad', 'cube_root_grad', 'set_loop']
    """
    NATIVE[0] = EXTENSION.load()
    return NATIVE[0]


def entry() -> ModuleType | None:
    """The entry where this machine has built it, else None (never builds).

    Examples
    --------
    >>> entry() is None or entry() is build()
    True
    """
    try:
        return EXTENSION.built()
    except (BuildError, OSError, ImportError):  # a broken build: the Python route
        return None


def set_loops(native: Any, dtype: torch.dtype) -> None:
    """Give the entry the loops of ``dtype`` (compiled, or loaded from the kernel cache).

    Examples
    --------
    >>> native = build()
    >>> set_loops(native, torch.float32)
    >>> native.cube_root(torch.tensor([-27.0]), 2)
    tensor([-3.])
    """
    from ..kernels.handlers import buffer_loops

    name, column = DTYPES[dtype]
    for index, kernel in enumerate(KERNELS):
        native.set_loop(index, column, int(buffer_loops.loop(kernel, name, False).address))


#: The entry the bridge calls: where this machine has built it, else None (:func:`build` sets it).
NATIVE: list[Any] = [entry()]

__all__ = ["BUILT_NAME", "BuildError", "EXTENSION", "NATIVE", "build", "entry", "set_loops"]
