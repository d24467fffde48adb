"""What ``cbrtgrad warm`` builds: every kernel of this machine, in groups, by name.

The kernels are the same ones the library builds on demand, by the same
functions: a warmed cache is what the library would have written itself.
:mod:`cbrtgrad.warming` runs them in worker processes.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterable
from typing import Any

from ._native_build import compiler
from .kernels.kernel_ops import ELEMENTARY, KERNEL_OPS

#: The dtypes in the order their kernels are listed. NOTE: the heaviest
#: first (the float64 gradients, the threaded loops): the workers take the
#: kernels in this order, so the long ones start early and the short ones
#: fill in at the end.
_ORDER = ("float64", "float32")


def _ufunc(op: str, dtype: str) -> Callable[[], object]:
    def build() -> object:
        from .kernels import cpu

        return cpu.ufunc(op, dtype)

    return build


def _parallel(name: str, dtype: str) -> Callable[[], object]:
    def build() -> object:
        from .kernels import cpu

        return cpu.parallel_loop(name, dtype)

    return build


def _user_block(kernel: str, dtype: str) -> Callable[[], object]:
    def build() -> object:
        from .kernels import user_loops

        if dtype == "float64":
            user_loops.forms(dtype)  # the rare paths the float64 forms call
        return user_loops.block_function(kernel, dtype)

    return build


def _xla_handler(kernel: str, dtype: str, threaded: bool) -> Callable[[], object]:
    def build() -> object:
        from .kernels import xla_ffi

        return xla_ffi.handler(kernel, dtype, threaded)

    return build


def _buffer_loop(kernel: str, dtype: str, threaded: bool) -> Callable[[], object]:
    def build() -> object:
        from .kernels import buffer_loops

        return buffer_loops.loop(kernel, dtype, threaded)

    return build


def _mlx_primitive() -> object:
    from .mlx import _build

    return _build.extension()


class OptionalUnitFailed(Exception):
    """An optional unit's build failed: warm reports it and goes on (the library needs none)."""


def _torch_entry() -> object:
    from .torch import _native

    try:
        return _native.EXTENSION.load()
    except _native.BuildError as error:  # a speed-up only: the bridge's Python route remains
        raise OptionalUnitFailed(f"the bridge runs in Python: {error}") from error


def use_built(names: Iterable[str]) -> None:
    """Let this process use what the workers built for it: the PyTorch entry, once warmed.

    The workers build into the cache; a process that had imported
    :mod:`cbrtgrad.torch` before found no entry there, and would run its
    small calls in Python until it ends.
    """
    if "PyTorch entry" in names and "cbrtgrad.torch._native" in sys.modules:
        from .torch import _native

        if _native.NATIVE[0] is None:
            _native.NATIVE[0] = _native.entry()


def _buffer_loops(dtypes: tuple[str, ...], threads: tuple[bool, ...]) -> dict[str, Any]:
    return {
        f"buffer loop {op.kernel} {dtype}{' threads' if threaded else ''}": _buffer_loop(
            op.kernel, dtype, threaded
        )
        for threaded in threads
        for dtype in dtypes
        for op in reversed(ELEMENTARY)
    }


def _units() -> dict[str, dict[str, Callable[[], object]]]:
    # The kernels of each group, by the name _compile.built_kernels() gives
    # them, with the function that builds each (one may build several: the
    # numba API's float64 block functions also build its rare paths): every
    # kernel op's, from its entry (kernels/kernel_ops.py). NOTE: the ops in
    # reverse, so that the gradients and the fused loops, the longest to
    # compile, come first.
    elementary = tuple(reversed(ELEMENTARY))
    ufuncs = {
        f"ufunc {op.name} {dtype}": _ufunc(op.name, dtype) for dtype in _ORDER for op in elementary
    }
    parallel = {
        f"parallel {name} {dtype}": _parallel(name, dtype)
        for dtype in _ORDER
        for op in reversed(KERNEL_OPS.values())
        for name in op.parallel_loops
    }
    numba_api = {
        f"user block {op.kernel} {dtype}": _user_block(op.kernel, dtype)
        for dtype in _ORDER
        for op in elementary
    }
    jax = {
        f"XLA FFI {op.kernel} {dtype}{' threads' if threaded else ''}": _xla_handler(
            op.kernel, dtype, threaded
        )
        for threaded in (True, False)
        for dtype in _ORDER
        for op in elementary
    }
    # The C++ builds first, the longest units (15 to 25 s on 2 cores, a
    # compiler's one process each): the numba kernels fill in beside them.
    units: dict[str, dict[str, Callable[[], object]]] = {}
    has_mlx = importlib.util.find_spec("mlx") is not None
    # The PyTorch entry is a speed-up only: where no compiler could build it,
    # there is nothing to warm (the bridge runs without it).
    has_torch = importlib.util.find_spec("torch") is not None and compiler() is not None
    if has_torch:
        units["torch"] = {"PyTorch entry": _torch_entry}
    if has_mlx:
        units["mlx"] = {"MLX primitive": _mlx_primitive}
    units |= {"ufunc": ufuncs, "parallel": parallel, "numba": numba_api, "jax": jax}
    if has_mlx:  # every loop the MLX primitive calls, where it runs
        every = ("float32", "float64", "float16", "bfloat16")
        units["buffers"] = _buffer_loops(every, (False, True))
    elif has_torch:  # those the PyTorch entry calls (serial, float32 and float64)
        units["buffers"] = _buffer_loops(("float32", "float64"), (False,))
    return units


#: What each group holds, for ``cbrtgrad warm --help`` and the docs.
GROUPS = {
    "ufunc": "the single-thread ufuncs (the cpu backend, dask blocks)",
    "parallel": "the multi-threaded prange loops (the parallel backend)",
    "numba": "the block functions cbrtgrad.numba gives users' own loops",
    "jax": "the XLA FFI handlers of cbrtgrad.jax on the CPU",
    "mlx": "cbrtgrad.mlx's C++ primitive (where MLX is installed)",
    "torch": "cbrtgrad.torch's C++ entry for small calls (where PyTorch and a C++ compiler are)",
    "buffers": "the loops on raw buffers the MLX primitive and the PyTorch entry call",
}
#: What a group that is not here needs.
_NEEDS = {
    "mlx": "MLX: pip install 'cbrtgrad[mlx]'",
    "torch": "PyTorch and a C++ compiler: pip install 'cbrtgrad[torch]'",
    "buffers": "MLX or PyTorch: pip install 'cbrtgrad[mlx]' or 'cbrtgrad[torch]'",
}


def kernel_names(only: Iterable[str] | str | None = None) -> list[str]:
    """The kernels :func:`cbrtgrad.warm` builds, heaviest first.

    Parameters
    ----------
    only : iterable of str, or str, optional
        Groups (keys of ``cbrtgrad.warming.GROUPS``) or kernels by name, or one string of
        them separated by commas; default every kernel.

    Returns
    -------
    list of str

    Raises
    ------
    TypeError, ValueError
        For something else than names, or a name that is neither.

    Examples
    --------
    >>> kernel_names("ufunc")[:2]
    ['ufunc cube_root_grad float64', 'ufunc cube_root float64']
    >>> kernel_names(["parallel fused float32", "ufunc cube_root float32"])
    ['parallel fused float32', 'ufunc cube_root float32']
    """
    units = _units()
    if only is None:
        return [name for group in units.values() for name in group]
    if isinstance(only, str):
        only = [part.strip() for part in only.split(",") if part.strip()]
    try:
        wanted = list(only)
    except TypeError:
        raise TypeError(f"only must be group or kernel names, got {type(only).__name__}") from None
    everything = [name for group in units.values() for name in group]
    names: list[str] = []
    for item in wanted:
        if not isinstance(item, str):
            raise TypeError(f"only must be group or kernel names, got an item {item!r}")
        if item in units:
            names += units[item]
        elif item in everything:
            names.append(item)
        elif item in GROUPS:  # a group whose library is not installed here
            raise ValueError(f"only: the group {item!r} needs {_NEEDS[item]}")
        else:
            raise ValueError(
                f"only: {item!r} is neither a group ({', '.join(GROUPS)}) nor a kernel "
                f"(cbrtgrad.warming.kernel_names() lists them)"
            )
    if not names:
        raise ValueError(f"only must name at least one group ({', '.join(GROUPS)}) or kernel")
    return list(dict.fromkeys(names))
