"""The multi-threaded CPU kernels: ``prange`` loops over blocks of the block functions.

NOTE: numba's parallel ``vectorize`` target does not vectorise its inner loop
and was slower than the single-thread ufunc (docs/kernels.md, "Measured
choices"), so the multi-threaded kernels are ``prange`` loops over blocks of
``PARALLEL_BLOCK`` elements, each running the same vectorised block functions
(:mod:`cbrtgrad.kernels.cpu.blocks`) as the ufuncs, so with the same bits. They
take 1-D C-contiguous arrays; array layout is handled by the caller
(:mod:`cbrtgrad.backends.parallel`).

NOTE: each loop calls the ufuncs' block entries (``cpu_ufuncs.block_entry``:
the block functions compiled once as C functions of their own) by name
(:mod:`cbrtgrad.kernels.handlers.linked_entries`, linked before the loop is compiled
or loaded), as the XLA FFI and MLX handlers do, rather than linking the
block functions' code: numba would optimise and compile that again inside
every loop (kernels/cpu/ufunc_loops.py).

Each loop returns the IEEE flags its blocks raised, in numpy's bit order
(:mod:`cbrtgrad.kernels.cpu.fpstatus`), for the caller to signal.

The kernels are ``forward``, ``grad``, ``fused`` and ``grad_constant`` (the
grad for one scalar ``g``, the gradient of a sum).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from ...build import compile as _compile
from ..handlers.linked_entries import forward_entry_of, grad_entry_of, link_entry
from ..kernel_ops import KERNEL_OPS
from . import lazy
from .denormals import FLUSH_BITS, keep_subnormals, read_mode, write_mode
from .fpstatus import FENV_MASK, block_status, clear_flags, raised_flags
from .ufuncs import run_forward_entry, run_grad_entry, ufunc_loop_shape

#: Elements per block of every loop: the fused loop's y block, just written,
#: must still be in cache when its grad reads it back, so memory is crossed
#: once; the other loops use the same blocks, so each thread's share is alike.
PARALLEL_BLOCK = 2048

FORWARD_SIGNATURES = ["int32(float32[::1], float32[::1])", "int32(float64[::1], float64[::1])"]
GRAD_SIGNATURES = [
    "int32(float32[::1], float32[::1], float32[::1])",
    "int32(float64[::1], float64[::1], float64[::1])",
]
FUSED_SIGNATURES = [
    "int32(float32[::1], float32[::1], float32[::1], float32[::1])",
    "int32(float64[::1], float64[::1], float64[::1], float64[::1])",
]
GRAD_CONSTANT_SIGNATURES = [
    "int32(float32, float32[::1], float32[::1])",
    "int32(float64, float64[::1], float64[::1])",
]


@numba.njit(**_compile.SCALAR_OPTIONS)
def _start_block():  # type: ignore[no-untyped-def]
    # NOTE: a worker thread's flags are sticky: cleared before each block
    # (only when one is set, as feclearexcept costs more than fetestexcept)
    # so that a block reports what it raised itself (fpstatus.py).
    # NOTE: and its mode may flush subnormals: numba's workers keep the mode
    # of the thread that started the thread team (under
    # torch.set_flush_denormal(True), or on one of XLA's threads) for the rest
    # of the process. Each block runs with subnormals kept, as every other
    # route computes; _end_block puts the flush bits back.
    old = keep_subnormals()
    if raised_flags(FENV_MASK):
        clear_flags(FENV_MASK)
    return old


@numba.njit(**_compile.SCALAR_OPTIONS)
def _end_block(old):  # type: ignore[no-untyped-def]
    # The flush bits as they were before the block; the flags it raised kept.
    mode = read_mode()
    if (mode ^ old) & FLUSH_BITS:
        write_mode((mode & ~FLUSH_BITS) | (old & FLUSH_BITS))


@numba.njit(**_compile.SCALAR_OPTIONS)
def _union(status):  # type: ignore[no-untyped-def]
    raised = 0
    for s in status:
        raised |= s
    return np.int32(raised)


# NOTE: the four loops are module-level functions, written out apiece, so
# that numba can cache each (a closure's cells would be part of its cache
# key). Each calls its block entries by name (see the module's NOTE).
def _forward_loop(x, y):  # type: ignore[no-untyped-def]
    entry = forward_entry_of(x)
    n = x.shape[0]
    blocks = (n + PARALLEL_BLOCK - 1) // PARALLEL_BLOCK
    status = np.zeros(blocks, np.int32)
    for block in numba.prange(blocks):
        old = _start_block()
        start = block * PARALLEL_BLOCK
        stop = min(start + PARALLEL_BLOCK, n)
        run_forward_entry(entry, x[start:stop], y[start:stop])
        status[block] = block_status(raised_flags(FENV_MASK))
        _end_block(old)
    return _union(status)


def _grad_loop(g, y, dx):  # type: ignore[no-untyped-def]
    # dx may be g or y (the block entry keeps its inputs); the backend copies
    # any other overlap first.
    entry = grad_entry_of(y)
    n = g.shape[0]
    blocks = (n + PARALLEL_BLOCK - 1) // PARALLEL_BLOCK
    status = np.zeros(blocks, np.int32)
    for block in numba.prange(blocks):
        old = _start_block()
        start = block * PARALLEL_BLOCK
        stop = min(start + PARALLEL_BLOCK, n)
        # The flags are clear here (_start_block): the entry reads them after
        # its work, and sets the float64 gradient's to its rule.
        raised = run_grad_entry(entry, g[start:stop], y[start:stop], dx[start:stop], 0)
        status[block] = block_status(raised)
        _end_block(old)
    return _union(status)


def _fused_loop(x, g, y, dx):  # type: ignore[no-untyped-def]
    forward_entry = forward_entry_of(x)
    grad_entry = grad_entry_of(y)
    n = x.shape[0]
    blocks = (n + PARALLEL_BLOCK - 1) // PARALLEL_BLOCK
    status = np.zeros(blocks, np.int32)
    for block in numba.prange(blocks):
        old = _start_block()
        start = block * PARALLEL_BLOCK
        stop = min(start + PARALLEL_BLOCK, n)
        run_forward_entry(forward_entry, x[start:stop], y[start:stop])
        before = raised_flags(FENV_MASK)  # a signaling nan x raises invalid
        raised = run_grad_entry(grad_entry, g[start:stop], y[start:stop], dx[start:stop], before)
        status[block] = block_status(raised)
        _end_block(old)
    return _union(status)


def _grad_constant_loop(g, y, dx):  # type: ignore[no-untyped-def]
    # One value g (the gradient of a sum), read from a block-sized array so
    # that the block entry runs the same code, so the same bits, as for an
    # array g. dx is a new array, an out= of its own memory, or y itself (the
    # block entry keeps its inputs): see _layout.constant_operand.
    entry = grad_entry_of(y)
    n = y.shape[0]
    blocks = (n + PARALLEL_BLOCK - 1) // PARALLEL_BLOCK
    status = np.zeros(blocks, np.int32)
    for block in numba.prange(blocks):
        old = _start_block()
        start = block * PARALLEL_BLOCK
        stop = min(start + PARALLEL_BLOCK, n)
        gs = np.full(stop - start, g, y.dtype)
        raised = run_grad_entry(entry, gs, y[start:stop], dx[start:stop], 0)
        status[block] = block_status(raised)
        _end_block(old)
    return _union(status)


#: The block entries each parallel loop calls: its op's kernel, or a fused
#: op's parts' (kernel_ops.py).
ENTRIES_BY_LOOP = {name: op.kernels for op in KERNEL_OPS.values() for name in op.parallel_loops}

#: The loops by name: (signatures, function).
LOOPS: dict[str, tuple[list[str], Any]] = {
    "forward": (FORWARD_SIGNATURES, _forward_loop),
    "grad": (GRAD_SIGNATURES, _grad_loop),
    "fused": (FUSED_SIGNATURES, _fused_loop),
    "grad_constant": (GRAD_CONSTANT_SIGNATURES, _grad_constant_loop),
}

#: The names the loops had before (``parallel_loop`` still takes them).
OLD_NAMES = {"backward": "grad", "backward_constant": "grad_constant"}


def dtype_of(signature: str) -> str:
    """The dtype a loop signature is for.

    Examples
    --------
    >>> dtype_of(GRAD_CONSTANT_SIGNATURES[0])
    'float32'
    """
    return "float32" if "float32" in signature else "float64"


def parallel_loop_shape(name: str, signature: str) -> _compile.LoopShape:
    """The SIMD shape one parallel loop (``forward``, ``fused``...) is compiled at, on this CPU.

    The ufunc's for the loop's first block entry: a threaded loop's vector
    code is its entries' (the module's NOTE), so its own shape only sets the
    target features it is compiled for. The XLA FFI and MLX threaded
    handlers take theirs from here too.

    Examples
    --------
    >>> from cbrtgrad.kernels.cpu.ufuncs import ufunc_loop_shape
    >>> parallel_loop_shape("fused", "void(float32[::1])") == ufunc_loop_shape("float32")
    True
    """
    dtype = signature.split("(", 1)[1].split("[", 1)[0].split(",", 1)[0]
    return ufunc_loop_shape(dtype, ENTRIES_BY_LOOP[name][0])


def parallel_loop(name: str, dtype: Any) -> Any:
    """One multi-threaded loop (``forward``, ``grad``, ``fused``, ``grad_constant``).

    Compiled (or loaded from the on-disk cache) for one dtype on its first
    use, each dtype at its own SIMD shape.

    Parameters
    ----------
    name : str
        A key of :data:`LOOPS` (or its old name, ``backward`` or
        ``backward_constant``).
    dtype : dtype
        float32 or float64.

    Returns
    -------
    numba dispatcher
        Compiled for that dtype's signature only.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([-8.0, 27.0]); y = np.empty_like(x)
    >>> parallel_loop("forward", x.dtype)(x, y), y  # the IEEE flags raised, and the result
    (0, array([-2.,  3.]))
    """
    name = OLD_NAMES.get(name, name)
    if name not in LOOPS:
        raise ValueError(f"name must be one of {', '.join(LOOPS)}, got {name!r}")
    dt = lazy.dtype_name(dtype)
    found = lazy.BUILT.get(f"parallel.{name}.{dt}")  # the hot path: one dict lookup
    if found is not None:
        return found
    signatures, function = LOOPS[name]
    (signature,) = [s for s in signatures if dtype_of(s) == dt]

    def build() -> Any:
        for kernel in ENTRIES_BY_LOOP[name]:  # before the loop that names it is compiled or loaded
            link_entry(kernel, dt)
        return _compile.compile_njit(
            function,
            signature,
            parallel_loop_shape(name, signature),
            f"parallel {name} {dt}",
            dt,
            parallel=True,
        )

    return lazy.once(f"parallel.{name}.{dt}", build)


def check_behaved(kernel: str, arrays: tuple[Any, ...]) -> None:
    """Refuse an array a numba dispatcher could mistype: unaligned, read-only or byte-swapped.

    NOTE: numba's dispatchers cache the numba type of every array that is
    not "behaved" (aligned, writable, native byte order) under a fingerprint
    of its ndim, contiguity, writability and dtype number alone, in one
    table shared by every dispatcher in the process. An unaligned float64
    array and a byte-swapped ('>f8') one have the same fingerprint, so the
    first of them any dispatcher sees decides the type of all the others for
    the rest of the process: a byte-swapped array first (typed ``pyobject``)
    makes every later unaligned call fail with "No matching definition", an
    unaligned one first makes a later byte-swapped array be read as if it
    were native (wrong values, no error). So no such array may reach a numba
    loop: the backends hand the loops behaved arrays
    (:mod:`cbrtgrad.backends._layout` copies or casts the others), and this
    check, before every call, keeps any other caller from poisoning the table.

    Raises
    ------
    TypeError
        Naming the kernel and what is wrong with the array.

    Examples
    --------
    >>> check_behaved("forward", (np.ones(2), np.float64(1.0)))
    >>> check_behaved("forward", (np.ones(2, ">f8"),))
    Traceback (most recent call last):
    ...
    TypeError: cbrtgrad: the parallel forward loop takes aligned, writable arrays ...
    """
    for a in arrays:
        if isinstance(a, np.ndarray) and not (a.flags.behaved and a.dtype.isnative):
            problems = [
                name
                for name, bad in (
                    ("unaligned", not a.flags.aligned),
                    ("read-only", not a.flags.writeable),
                    (f"byte order {a.dtype.str[0]!r}", not a.dtype.isnative),
                )
                if bad
            ]
            raise TypeError(
                f"cbrtgrad: the parallel {kernel} loop takes aligned, writable arrays "
                f"in native byte order, got a {a.dtype} array that is {', '.join(problems)}"
            )


class _ByDtype:
    """One parallel loop: compiled (or loaded) for the dtype of its last array, on first use."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *arrays: Any) -> Any:
        check_behaved(self.name, arrays)  # before numba types them (see check_behaved)
        # The loop's IEEE flags (fpstatus.py), for the backend to signal.
        return parallel_loop(self.name, arrays[-1].dtype)(*arrays)


class ParallelLoops:
    """The multi-threaded loops, each for the dtype of the arrays it is given.

    NOTE: each loop is compiled (all its signatures) on its first use, not
    all four at once: a parallel loop takes seconds to compile, and most
    callers (``cbrtgrad verify``, a forward pass) need one or two.

    Attributes
    ----------
    forward : callable
        ``f(x, y)``.
    grad : callable
        ``f(g, y, dx)``.
    fused : callable
        ``f(x, g, y, dx)``.
    grad_constant : callable
        ``f(g, y, dx)`` for one scalar ``g`` (the gradient of a sum).
    cube_root, cube_root_grad, cube_root_and_grad, cube_root_grad_constant : callable
        The same four by their old names.

    Each returns the IEEE flags its blocks raised, in numpy's bit order
    (:mod:`cbrtgrad.kernels.cpu.fpstatus`), for the caller to signal.
    """

    @staticmethod
    def loop(name: str) -> Callable[..., Any]:
        """The loop ``name`` (a key of ``LOOPS``: an op's ``parallel_loops``)."""
        if name not in LOOPS:
            raise ValueError(f"cbrtgrad: no parallel loop {name!r}; the loops are {sorted(LOOPS)}")
        return _ByDtype(name)

    @property
    def forward(self) -> Callable[..., Any]:
        return _ByDtype("forward")

    @property
    def grad(self) -> Callable[..., Any]:
        return _ByDtype("grad")

    @property
    def fused(self) -> Callable[..., Any]:
        return _ByDtype("fused")

    @property
    def grad_constant(self) -> Callable[..., Any]:
        return _ByDtype("grad_constant")

    cube_root = forward
    cube_root_grad = grad
    cube_root_and_grad = fused
    cube_root_grad_constant = grad_constant


def parallel_loops() -> ParallelLoops:
    """Return the multi-threaded loops, each compiled on its first use.

    Returns
    -------
    ParallelLoops

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([-8.0, 27.0]); y = np.empty_like(x)
    >>> parallel_loops().forward(x, y), y
    (0, array([-2.,  3.]))
    """
    result: ParallelLoops = lazy.once("parallel", ParallelLoops)
    return result
