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

from ..build.native import compiler
from ..kernels.kernel_ops import ELEMENTARY, KERNEL_OPS

#: The dtypes in the order their kernels are listed. NOTE: the heaviest
#: first (the float64 gradients, the threaded loops): the workers take the
#: kernels in this order, so the long ones start early and the short ones
#: fill in at the end.
_ORDER = ("float64", "float32")


def _ufunc(op: str, dtype: str) -> Callable[[], object]:
    def build() -> object:
        from ..kernels.cpu import catalog as cpu

        return cpu.ufunc(op, dtype)

    return build


def _parallel(name: str, dtype: str) -> Callable[[], object]:
    def build() -> object:
        from ..kernels.cpu import catalog as cpu

        return cpu.parallel_loop(name, dtype)

    return build


def _user_block(kernel: str, dtype: str) -> Callable[[], object]:
    def build() -> object:
        from ..kernels.cpu import user_loops

        if dtype == "float64":
            user_loops.forms(dtype)  # the rare paths the float64 forms call
        return user_loops.block_function(kernel, dtype)

    return build


def _xla_handler(kernel: str, dtype: str, threaded: bool) -> Callable[[], object]:
    def build() -> object:
        from ..kernels.handlers import xla_ffi

        return xla_ffi.handler(kernel, dtype, threaded)

    return build


def _buffer_loop(kernel: str, dtype: str, threaded: bool) -> Callable[[], object]:
    def build() -> object:
        from ..kernels.handlers import buffer_loops

        return buffer_loops.loop(kernel, dtype, threaded)

    return build


def _mlx_primitive() -> object:
    from ..mlx import _build

    return _build.extension()


class OptionalUnitFailed(Exception):
    """An optional unit's build failed: warm reports it and goes on (the library needs none)."""


def _torch_entry() -> object:
    from ..torch import _native

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
        from ..torch import _native

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


def _subnormal_mode() -> object:
    from ..kernels.cpu import denormals

    return denormals.mode_functions()


def _every_unit() -> dict[str, Callable[[], object]]:
    # Every kernel of this machine, by the name _compile.built_kernels()
    # gives it, with the function that builds it (one may build several: the
    # numba API's float64 block functions also build its rare paths; the
    # subnormal mode's keep also builds its restore): every kernel op's, from
    # its entry (kernels/kernel_ops.py). In the order warm hands them out,
    # heaviest first: the C++ builds (15 to 25 s on 2 cores, a compiler's one
    # process each), so that the numba kernels fill in beside them; then the
    # ops in reverse, so that the gradients and the fused loops, the longest
    # to compile, come first.
    elementary = tuple(reversed(ELEMENTARY))
    units: dict[str, Callable[[], object]] = {}
    if _has_entry():
        units["PyTorch entry"] = _torch_entry
    if _has_mlx():
        units["MLX primitive"] = _mlx_primitive
    units |= {
        f"ufunc {op.name} {dtype}": _ufunc(op.name, dtype) for dtype in _ORDER for op in elementary
    }
    units |= {
        f"parallel {name} {dtype}": _parallel(name, dtype)
        for dtype in _ORDER
        for op in reversed(KERNEL_OPS.values())
        for name in op.parallel_loops
    }
    units |= {
        f"user block {op.kernel} {dtype}": _user_block(op.kernel, dtype)
        for dtype in _ORDER
        for op in elementary
    }
    units |= {
        f"XLA FFI {op.kernel} {dtype}{' threads' if threaded else ''}": _xla_handler(
            op.kernel, dtype, threaded
        )
        for threaded in (True, False)
        for dtype in _ORDER
        for op in elementary
    }
    if _has_mlx():  # every loop the MLX primitive calls, where it runs
        units |= _buffer_loops(("float32", "float64", "float16", "bfloat16"), (False, True))
    elif _has_entry():  # those the PyTorch entry calls (serial, float32 and float64)
        units |= _buffer_loops(("float32", "float64"), (False,))
    units["keep subnormals"] = _subnormal_mode
    return units


def _has_torch() -> bool:
    return importlib.util.find_spec("torch") is not None


def _has_entry() -> bool:
    # The PyTorch entry is a speed-up only: where no compiler could build it,
    # there is nothing of it to warm (the bridge runs without it).
    return _has_torch() and compiler() is not None


def _has_mlx() -> bool:
    return importlib.util.find_spec("mlx") is not None


def _groups() -> dict[str, tuple[str, ...]]:
    # The names in each group, a kernel in as many groups as run it. A
    # bridge's group is everything the bridge runs on the CPU, so that
    # ``warm --only <bridge>`` leaves its first call nothing to compile:
    # what its own code calls, and the api's kernels for the calls it hands
    # to cbrtgrad's api (the ufuncs; the parallel loops the automatic choice
    # takes for large arrays; the subnormal mode the bridges' calls run in).
    every = _every_unit()

    def named(*prefixes: str) -> tuple[str, ...]:
        return tuple(name for name in every if name.startswith(prefixes))

    host_api = named("ufunc ", "parallel ", "keep subnormals")
    groups = {
        "ufunc": named("ufunc "),
        "parallel": named("parallel "),
        "numba": named("user block "),
        # The XLA FFI handlers for float32 and float64, the api through
        # jax.pure_callback for half precision (and route="callback").
        "jax": named("XLA FFI ") + host_api,
    }
    if _has_mlx():  # its C++ primitive, which calls the buffer loops of every dtype
        groups["mlx"] = named("MLX primitive", "buffer loop ")
    if _has_torch():
        # Its C++ entry where a compiler built it, for small calls outside
        # autograd, and the serial float32 and float64 loops the entry calls;
        # the api for the rest.
        entry = named("PyTorch entry")
        loops = named(*(f"buffer loop {op.kernel} {d}" for op in ELEMENTARY for d in _ORDER))
        loops = tuple(name for name in loops if entry and not name.endswith(" threads"))
        groups["torch"] = entry + loops + host_api
    if _has_mlx() or _has_entry():
        groups["buffers"] = named("buffer loop ")
    # Each group in warm's order (heaviest first).
    return {group: tuple(n for n in every if n in names) for group, names in groups.items()}


def build_of(name: str) -> Callable[[], object]:
    """The function that builds the kernel ``name`` (one of :func:`kernel_names`)."""
    return _every_unit()[name]


#: What each group holds, one line each, for ``cbrtgrad warm --help`` and the docs.
GROUPS = {
    "ufunc": "the single-thread ufuncs (the cpu backend, dask blocks)",
    "parallel": "the multi-threaded prange loops (the parallel backend)",
    "numba": "the block functions cbrtgrad.numba gives users' own loops",
    "jax": "all cbrtgrad.jax runs on the CPU: XLA FFI handlers, the api's kernels",
    "mlx": "all cbrtgrad.mlx runs on the CPU: its C++ primitive and its loops",
    "torch": "all cbrtgrad.torch runs on the CPU: C++ entry, loops, api's kernels",
    "buffers": "the loops on raw buffers the MLX primitive and PyTorch entry call",
}
#: What a group that is not here needs.
_NEEDS = {
    "mlx": "MLX: pip install 'cbrtgrad[mlx]'",
    "torch": "PyTorch: pip install 'cbrtgrad[torch]'",
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
    units = _groups()
    if only is None:
        return list(_every_unit())
    if isinstance(only, str):
        only = [part.strip() for part in only.split(",") if part.strip()]
    try:
        wanted = list(only)
    except TypeError:
        raise TypeError(f"only must be group or kernel names, got {type(only).__name__}") from None
    everything = _every_unit()
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
