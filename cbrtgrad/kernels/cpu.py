"""numba CPU kernels: the ufuncs (single-thread and parallel) and the fused loop.

Everything here is built from :mod:`cbrtgrad.kernels.formulas`; this module only
chooses, per numba type, which scalar formula a loop calls, and compiles the
loops lazily (on first use, once per process, under a lock).

The ufuncs have exactly two loops each, ``float32`` and ``float64``, so numpy's
own loop selection gives the force-fp32 policy for free: a float16 input is
cast to float32 (the first loop it can be cast to safely) and the result is
float32. Integer and bool inputs are sent to the float64 loop by
:mod:`cbrtgrad._dtypes` before the call, as ``np.cbrt`` would (numpy itself
would pick float32 for int8 and int16).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np
from numba import types
from numba.extending import overload

from .. import _compile
from ._primitives import CPU_PRIMITIVES, f64_as_i64
from .formulas import MAGNITUDE_MASK64, PLAIN_F64_BEYOND, PLAIN_F64_LOWEST, make_formulas
from .fpstatus import FENV_MASK, block_status, clear_flags, raised_flags
from .ufunc_loops import LOOP_SIGNATURE, binary_block_loop, ufunc_from_loops, unary_block_loop

FORMULAS = make_formulas(CPU_PRIMITIVES, numba.njit(**_compile.SCALAR_OPTIONS))

_cube_root_f32 = FORMULAS.cube_root_f32
_cube_root_f64 = FORMULAS.cube_root_f64
_cube_root_f64_fast = FORMULAS.cube_root_f64_fast
_cube_root_f64_exact = FORMULAS.cube_root_f64_exact
_cube_root_f64_plain = FORMULAS.cube_root_f64_plain
_cube_root_grad_f32 = FORMULAS.cube_root_grad_f32
_cube_root_grad_f64 = FORMULAS.cube_root_grad_f64
_cube_root_grad_f32_fast = FORMULAS.cube_root_grad_f32_fast
_cube_root_grad_f64_fast = FORMULAS.cube_root_grad_f64_fast
_cube_root_grad_f64_exact = FORMULAS.cube_root_grad_f64_exact

FUSED_SIGNATURES = [
    "int32(float32[::1], float32[::1], float32[::1], float32[::1])",
    "int32(float64[::1], float64[::1], float64[::1], float64[::1])",
]
# The parallel loops return the IEEE flags their blocks raised (fpstatus.py).
LOOP_SIGNATURES_1 = ["int32(float32[::1], float32[::1])", "int32(float64[::1], float64[::1])"]
LOOP_SIGNATURES_2 = [
    "int32(float32[::1], float32[::1], float32[::1])",
    "int32(float64[::1], float64[::1], float64[::1])",
]
CONSTANT_SIGNATURES = [
    "int32(float32, float32[::1], float32[::1])",
    "int32(float64, float64[::1], float64[::1])",
]


def cube_root(x: Any) -> Any:
    """Scalar cube root for numba code, by the argument's type (see overload)."""
    raise NotImplementedError("cube_root is only callable from numba-compiled code")


def _is_f32(t: Any) -> bool:
    return isinstance(t, types.Float) and t.bitwidth == 32


@overload(cube_root, inline="always")
def _overload_cube_root(x):  # type: ignore[no-untyped-def]
    if _is_f32(x):
        return lambda x: _cube_root_f32(x)
    if isinstance(x, types.Float):
        return lambda x: _cube_root_f64(x)
    return None


# Blocks of the fused loops: small enough that the block of y just written is
# still in cache when the gradient reads it back, so memory is crossed once.
FUSED_BLOCK = 2048
SERIAL_BLOCK = 1 << 16


@numba.njit(**_compile.SCALAR_OPTIONS)
def _copy(source, target):  # type: ignore[no-untyped-def]
    # target[:] = source for arrays of one length. NOTE: numba's slice
    # assignment compiles its shape-mismatch error message (unicode
    # formatting): about 2.5 s of the first compile of each kernel on 2 cores.
    for i in range(source.shape[0]):
        target[i] = source[i]


@numba.njit(**_compile.SCALAR_OPTIONS)
def _pass_f32(x, y):  # type: ignore[no-untyped-def]
    for i in range(x.shape[0]):
        y[i] = _cube_root_f32(x[i])


@numba.njit(**_compile.SCALAR_OPTIONS)
def forward_block_f32(x, y):  # type: ignore[no-untyped-def]
    # NOTE: in place, LLVM's runtime overlap check fails and its scalar loop
    # runs (docs/kernels.md, "Measured choices"): blocks go through a copy.
    if x.ctypes.data != y.ctypes.data:
        _pass_f32(x, y)
        return
    saved = np.empty(min(x.shape[0], SECOND_PASS_BLOCK), np.float32)
    for start in range(0, x.shape[0], SECOND_PASS_BLOCK):
        stop = min(start + SECOND_PASS_BLOCK, x.shape[0])
        kept = saved[: stop - start]
        _copy(x[start:stop], kept)
        _pass_f32(kept, y[start:stop])


#: Lanes per first pass of the float64 forward: a hard lane costs a second
#: pass over its block only (about one block in 10^4 has one).
SECOND_PASS_BLOCK = 1024


# NOTE: not inlined: the second pass is rare, and keeping it out of line keeps
# the vector loop of the first pass free of its code.
@numba.njit(inline="never", fastmath=False, cache=False)
def _redo_hard_lanes_f64(x, y):  # type: ignore[no-untyped-def]
    for i in range(x.shape[0]):
        _, hard = _cube_root_f64_fast(x[i])
        if hard != 0:
            y[i] = _cube_root_f64_exact(x[i])


def _first_pass_f64(formula: Any) -> Any:
    """The vectorised first pass of one fast path over a block: whether any lane was hard."""

    @numba.njit(**_compile.SCALAR_OPTIONS)
    def first_pass(x, y):  # type: ignore[no-untyped-def]
        hard = np.int64(0)
        for i in range(x.shape[0]):
            yi, h = formula(x[i])
            y[i] = yi
            hard |= h
        return hard != 0

    return first_pass


#: The branch-free fast path over any block, and over a block of plain
#: inputs only (see _is_plain_f64): the same bits.
_fast_pass_f64 = _first_pass_f64(_cube_root_f64_fast)
_plain_pass_f64 = _first_pass_f64(_cube_root_f64_plain)


#: |x| is plain exactly when its pattern minus PLAIN_F64_LOWEST, unsigned, is
#: below this: nans' patterns lie above inf's, and those below the least
#: plain pattern wrap around to the top.
_PLAIN_SPAN_F64 = np.uint64(PLAIN_F64_BEYOND - PLAIN_F64_LOWEST)


@numba.njit(**_compile.SCALAR_OPTIONS)
def _plain_offset_f64(value):  # type: ignore[no-untyped-def]
    # Below _PLAIN_SPAN_F64 exactly when 2^-800 <= |value| < inf: an and, a
    # subtraction and (over a block) one unsigned max per lane.
    return np.uint64((f64_as_i64(value) & MAGNITUDE_MASK64) - PLAIN_F64_LOWEST)


@numba.njit(**_compile.SCALAR_OPTIONS)
def _is_plain_f64(x):  # type: ignore[no-untyped-def]
    # Whether every |x| of the block lies in [2^-800, inf).
    worst = np.uint64(0)
    for i in range(x.shape[0]):
        worst = max(worst, _plain_offset_f64(x[i]))
    return worst < _PLAIN_SPAN_F64


@numba.njit(**_compile.SCALAR_OPTIONS)
def _plain_pass_checking_next_f64(x, y, following):  # type: ignore[no-untyped-def]
    # _plain_pass_f64 over a block of plain inputs, which also checks the
    # next block (``following``, of the same length) as _is_plain_f64 does:
    # (whether any lane was hard, whether the next block is plain).
    # NOTE: the check of a block in a pass of its own read the block from
    # memory while no arithmetic ran, and the pass over it then ran with no
    # loads in flight; here the next block's loads overlap this block's
    # arithmetic: 3-4 % faster at 10^4 to 10^5 elements, 6-9 % at 10^7 (the
    # arrays in memory), AMD EPYC znver4 (docs/kernels.md, "Measured choices").
    hard = np.int64(0)
    worst = np.uint64(0)
    for i in range(x.shape[0]):
        yi, h = _cube_root_f64_plain(x[i])
        y[i] = yi
        hard |= h
        worst = max(worst, _plain_offset_f64(following[i]))
    return hard != 0, worst < _PLAIN_SPAN_F64


@numba.njit(**_compile.SCALAR_OPTIONS)
def forward_block_f64(x, y):  # type: ignore[no-untyped-def]
    # Correctly rounded: the fast path over a block, then, only for a block
    # that has a hard lane, the exact path for those lanes. A block of plain
    # inputs (no zero, inf, nan or |x| < 2^-800: most data) takes the plain
    # fast path, the same bits without the specials' selects (10 of about 45
    # vector operations per element; checking the block costs 3), and checks
    # the next block as it goes (_plain_pass_checking_next_f64). In place (y
    # is x) the block's inputs are kept first, since the first pass
    # overwrites them; the next block is not written before its own turn.
    # NOTE: the first pass is a function of its own over the block's slices:
    # written inline in this loop nest, LLVM did not vectorise it. In place,
    # the first pass also reads the copy: LLVM's runtime overlap check fails
    # for y = x and its scalar loop runs (docs/kernels.md, "Measured choices").
    n = x.shape[0]
    in_place = x.ctypes.data == y.ctypes.data
    saved = np.empty(min(n, SECOND_PASS_BLOCK) if in_place else 0, np.float64)
    plain = _is_plain_f64(x[: min(n, SECOND_PASS_BLOCK)])
    for start in range(0, n, SECOND_PASS_BLOCK):
        stop = min(start + SECOND_PASS_BLOCK, n)
        xs = x[start:stop]
        if in_place:
            kept = saved[: stop - start]
            _copy(xs, kept)
            xs = kept
        ys = y[start:stop]
        following = x[stop : min(stop + SECOND_PASS_BLOCK, n)]
        if plain and following.shape[0] == xs.shape[0]:
            hard, plain_next = _plain_pass_checking_next_f64(xs, ys, following)
        else:
            if plain:
                hard = _plain_pass_f64(xs, ys)
            else:
                hard = _fast_pass_f64(xs, ys)
            plain_next = _is_plain_f64(following)
        if hard:
            _redo_hard_lanes_f64(xs, ys)
        plain = plain_next


def _forward_block(x: Any, y: Any) -> None:
    """The forward over 1-D contiguous arrays, by dtype (numba code only)."""
    raise NotImplementedError("_forward_block is only callable from numba-compiled code")


@overload(_forward_block, inline="always")
def _overload_forward_block(x, y):  # type: ignore[no-untyped-def]
    if _is_f32(x.dtype):
        return lambda x, y: forward_block_f32(x, y)
    return lambda x, y: forward_block_f64(x, y)


def _kept(a: Any, start: Any, stop: Any, kept: Any) -> Any:
    """``a[start:stop]``, or a copy of it in ``kept`` where ``kept`` is not empty."""
    raise NotImplementedError("_kept is only callable from numba-compiled code")


@overload(_kept, inline="always")
def _overload_kept(a, start, stop, kept):  # type: ignore[no-untyped-def]
    def kept_block(a, start, stop, kept):  # type: ignore[no-untyped-def]
        if kept.shape[0] == 0:
            return a[start:stop]
        copy = kept[: stop - start]
        _copy(a[start:stop], copy)
        return copy

    return kept_block


# NOTE: the first passes are functions of their own (not inlined into the
# block loop, as for the float64 forward's first pass).
@numba.njit(**{**_compile.SCALAR_OPTIONS, "inline": "never"})
def _grad_fast_pass_f32(g, y, dx):  # type: ignore[no-untyped-def]
    # The branch-free first pass (vectorised); whether any lane was hard.
    hard = False
    for i in range(y.shape[0]):
        dxi, h = _cube_root_grad_f32_fast(g[i], y[i])
        dx[i] = dxi
        hard |= h
    return hard


@numba.njit(**{**_compile.SCALAR_OPTIONS, "inline": "never"})
def _grad_fast_pass_f64(g, y, dx):  # type: ignore[no-untyped-def]
    hard = False
    for i in range(y.shape[0]):
        dxi, h = _cube_root_grad_f64_fast(g[i], y[i])
        dx[i] = dxi
        hard |= h
    return hard


# NOTE: the second passes are not inlined: they are rare, and keeping them out
# of line keeps the vector loop of the first pass free of their code. Each
# calls the formulas directly: a kernel inlined through an overload inside the
# branch trips numba's SSA checks (NumbaIRAssumptionWarning).
@numba.njit(**{**_compile.SCALAR_OPTIONS, "inline": "never"})
def _redo_hard_grad_lanes_f32(g, y, dx):  # type: ignore[no-untyped-def]
    for i in range(y.shape[0]):
        _, hard = _cube_root_grad_f32_fast(g[i], y[i])
        if hard:
            dx[i] = _cube_root_grad_f32(g[i], y[i])


@numba.njit(**{**_compile.SCALAR_OPTIONS, "inline": "never"})
def _redo_hard_grad_lanes_f64(g, y, dx):  # type: ignore[no-untyped-def]
    for i in range(y.shape[0]):
        _, hard = _cube_root_grad_f64_fast(g[i], y[i])
        if hard:
            dx[i] = _cube_root_grad_f64_exact(g[i], y[i])


def _grad_first_pass(g: Any, y: Any, dx: Any) -> bool:
    """The gradient's fast pass over a block, by dtype (numba code only)."""
    raise NotImplementedError("_grad_first_pass is only callable from numba-compiled code")


@overload(_grad_first_pass, inline="always")
def _overload_grad_first_pass(g, y, dx):  # type: ignore[no-untyped-def]
    if _is_f32(y.dtype):
        return lambda g, y, dx: _grad_fast_pass_f32(g, y, dx)
    return lambda g, y, dx: _grad_fast_pass_f64(g, y, dx)


def _grad_second_pass(g: Any, y: Any, dx: Any) -> None:
    """The gradient's exact pass over a block's hard lanes, by dtype (numba code only)."""
    raise NotImplementedError("_grad_second_pass is only callable from numba-compiled code")


@overload(_grad_second_pass, inline="always")
def _overload_grad_second_pass(g, y, dx):  # type: ignore[no-untyped-def]
    if _is_f32(y.dtype):
        return lambda g, y, dx: _redo_hard_grad_lanes_f32(g, y, dx)
    return lambda g, y, dx: _redo_hard_grad_lanes_f64(g, y, dx)


@numba.njit(**_compile.SCALAR_OPTIONS)
def grad_block(g, y, dx):  # type: ignore[no-untyped-def]
    # The gradient, correctly rounded (float32 for normal results, float64
    # where its rounding test applies), by blocks: the fast pass, then, only
    # for a block with a hard lane, the exact path for those lanes. In place
    # (dx is g or y) the block's inputs are kept first: the first pass
    # overwrites them, and LLVM's runtime overlap check fails for dx = y and
    # runs its scalar loop.
    n = y.shape[0]
    in_place = g.ctypes.data == dx.ctypes.data or y.ctypes.data == dx.ctypes.data
    size = min(n, SECOND_PASS_BLOCK) if in_place else 0
    kept_g = np.empty(size, y.dtype)
    kept_y = np.empty(size, y.dtype)
    for start in range(0, n, SECOND_PASS_BLOCK):
        stop = min(start + SECOND_PASS_BLOCK, n)
        gs = _kept(g, start, stop, kept_g)
        ys = _kept(y, start, stop, kept_y)
        dxs = dx[start:stop]
        if _grad_first_pass(gs, ys, dxs):
            _grad_second_pass(gs, ys, dxs)


def fused_blocks(
    ufuncs: CpuUfuncs, x: np.ndarray, g: np.ndarray, y: np.ndarray, dx: np.ndarray
) -> None:
    """Run forward then backward over L2-sized blocks of 1-D arrays.

    NOTE: a numba loop writing both y and dx is not vectorised by LLVM (numba
    gives it no noalias information); the two vectorised ufuncs over blocks of
    ``SERIAL_BLOCK`` elements are, and the block of y just written is still in
    cache when the gradient reads it, so x and g cross memory once
    (docs/kernels.md, "Measured choices").
    """
    n = x.shape[0]
    for start in range(0, n, SERIAL_BLOCK):
        stop = start + SERIAL_BLOCK
        yb = y[start:stop]
        ufuncs.cube_root(x[start:stop], out=yb)
        ufuncs.cube_root_grad(g[start:stop], yb, out=dx[start:stop])


@numba.njit(**_compile.SCALAR_OPTIONS)
def _start_block():  # type: ignore[no-untyped-def]
    # NOTE: a worker thread's flags are sticky: cleared before each block
    # (only when one is set, as feclearexcept costs more than fetestexcept)
    # so that a block reports what it raised itself (fpstatus.py).
    if raised_flags(FENV_MASK):
        clear_flags(FENV_MASK)


@numba.njit(**_compile.SCALAR_OPTIONS)
def _union(status):  # type: ignore[no-untyped-def]
    raised = 0
    for s in status:
        raised |= s
    return np.int32(raised)


def _backward_loop_parallel_constant(g, y, dx):  # type: ignore[no-untyped-def]
    # One value g (the gradient of a sum), read from a block-sized array so
    # that the block loop is the same code, so the same bits, as for an array g.
    # dx is always a new array here (see the parallel backend).
    n = y.shape[0]
    blocks = (n + FUSED_BLOCK - 1) // FUSED_BLOCK
    status = np.zeros(blocks, np.int32)
    for block in numba.prange(blocks):
        _start_block()
        start = block * FUSED_BLOCK
        stop = min(start + FUSED_BLOCK, n)
        grad_block(np.full(stop - start, g, y.dtype), y[start:stop], dx[start:stop])
        status[block] = block_status(raised_flags(FENV_MASK))
    return _union(status)


def _fused_loop_parallel(x, g, y, dx):  # type: ignore[no-untyped-def]
    n = x.shape[0]
    blocks = (n + FUSED_BLOCK - 1) // FUSED_BLOCK
    status = np.zeros(blocks, np.int32)
    for block in numba.prange(blocks):
        _start_block()
        start = block * FUSED_BLOCK
        stop = min(start + FUSED_BLOCK, n)
        _forward_block(x[start:stop], y[start:stop])
        grad_block(g[start:stop], y[start:stop], dx[start:stop])
        status[block] = block_status(raised_flags(FENV_MASK))
    return _union(status)


def _forward_loop_parallel(x, y):  # type: ignore[no-untyped-def]
    n = x.shape[0]
    blocks = (n + FUSED_BLOCK - 1) // FUSED_BLOCK
    status = np.zeros(blocks, np.int32)
    for block in numba.prange(blocks):
        _start_block()
        start = block * FUSED_BLOCK
        stop = min(start + FUSED_BLOCK, n)
        _forward_block(x[start:stop], y[start:stop])
        status[block] = block_status(raised_flags(FENV_MASK))
    return _union(status)


def _backward_loop_parallel(g, y, dx):  # type: ignore[no-untyped-def]
    # dx may be g or y (the block loop keeps its inputs); the backend copies
    # any other overlap first.
    n = g.shape[0]
    blocks = (n + FUSED_BLOCK - 1) // FUSED_BLOCK
    status = np.zeros(blocks, np.int32)
    for block in numba.prange(blocks):
        _start_block()
        start = block * FUSED_BLOCK
        stop = min(start + FUSED_BLOCK, n)
        grad_block(g[start:stop], y[start:stop], dx[start:stop])
        status[block] = block_status(raised_flags(FENV_MASK))
    return _union(status)


@dataclass(frozen=True)
class CpuUfuncs:
    """The single-thread numpy ufuncs (:func:`fused_blocks` combines them).

    Attributes
    ----------
    cube_root : numpy.ufunc
        ``y = cbrt(x)``, loops ``f->f`` and ``d->d``.
    cube_root_grad : numpy.ufunc
        ``dx = g / (3 y^2)``, loops ``ff->f`` and ``dd->d``.
    """

    cube_root: np.ufunc
    cube_root_grad: np.ufunc


class ParallelLoops:
    """Multi-threaded (``prange``) loops over 1-D C-contiguous arrays.

    NOTE: numba's parallel ``vectorize`` target does not vectorise its inner
    loop and was slower than the single-thread ufunc (docs/kernels.md), so the
    parallel kernels are ``prange`` loops over L1-sized blocks of the same
    vectorised block loops instead; array layout is handled by the caller.

    NOTE: each loop is compiled (all its signatures) on its first use, not
    all four at once: a parallel loop takes 5 to 15 s to compile on 2 cores,
    and most callers (``cbrtgrad verify``, a forward pass) need one or two.

    Attributes
    ----------
    cube_root : callable
        ``f(x, y)``.
    cube_root_grad : callable
        ``f(g, y, dx)``.
    cube_root_and_grad : callable
        ``f(x, g, y, dx)``.
    cube_root_grad_constant : callable
        ``f(g, y, dx)`` for one scalar ``g`` (the gradient of a sum).

    Each returns the IEEE flags its blocks raised, in numpy's bit order
    (:mod:`cbrtgrad.kernels.fpstatus`), for the caller to signal.
    """

    @property
    def cube_root(self) -> Callable[..., Any]:
        return _ParallelByDtype("forward")

    @property
    def cube_root_grad(self) -> Callable[..., Any]:
        return _ParallelByDtype("backward")

    @property
    def cube_root_and_grad(self) -> Callable[..., Any]:
        return _ParallelByDtype("fused")

    @property
    def cube_root_grad_constant(self) -> Callable[..., Any]:
        return _ParallelByDtype("backward_constant")


class _ParallelByDtype:
    """One parallel loop: compiled (or loaded) for the dtype of its last array, on first use."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *arrays: Any) -> Any:
        # The loop's IEEE flags (fpstatus.py), for the backend to signal.
        return parallel_loop(self.name, arrays[-1].dtype)(*arrays)


_lock = threading.RLock()
_built: dict[Any, Any] = {}


#: SIMD width per loop (bits), capped by ``CBRTGRAD_VECTOR_WIDTH``.
#: NOTE: the float32 loops compute in float64, so at 256 bits they already
#: fill zmm registers with 8 lanes; at 512 (16 lanes, two zmm halves) the
#: forward was slower at 10^7 elements (docs/kernels.md, "SIMD shape per
#: CPU"), so float32 stays at 256.
LOOP_WIDTHS = {"float32": 256, "float64": 512}

#: Interleave counts, per (loop, dtype), that differ from the ISA's default
#: (:data:`cbrtgrad._compile.INTERLEAVE_BY_ISA`). NOTE: the forwards' chains
#: are long (about 30 dependent operations in float64, 30 in float32), and on
#: AVX2 three vector iterations in flight beat two; for float32 only since
#: its one integer kept to the end freed the registers. On AVX-512 (32
#: vector registers) the float64 forward is fastest at 4 and the 256-bit
#: float32 forward at 3, where LLVM's cost model picks 2 and 1; measured on
#: an AMD Zen 4 only (docs/kernels.md, "Measured choices").
LOOP_INTERLEAVE = {
    ("forward", "float64"): {"AVX2": 3, "AVX-512": 4},
    ("forward", "float32"): {"AVX2": 3, "AVX-512": 3},
}


def ufunc_loop_shape(dtype: str, loop: str = "forward") -> _compile.LoopShape:
    """The SIMD shape of one ufunc loop (``forward`` or ``gradient``) of one dtype, on this CPU.

    Examples
    --------
    >>> ufunc_loop_shape("float64").width in (0, 128, 256, 512)
    True
    """
    return _compile.loop_shape(LOOP_WIDTHS[dtype], interleave=LOOP_INTERLEAVE.get((loop, dtype)))


# The ufuncs' inner loops, one module-level function per (op, dtype) so that
# numba can cache each (a closure's cells would be part of its cache key).
# The loops are cbrtgrad's own block functions: the correctly rounded float64
# forward and float32 gradient have a second pass over hard lanes, which a
# numba.vectorize loop cannot have.
def forward_loop_f32(args, dims, steps, data):  # type: ignore[no-untyped-def]
    unary_block_loop(forward_block_f32, args, dims, steps, np.float32(0))


def forward_loop_f64(args, dims, steps, data):  # type: ignore[no-untyped-def]
    unary_block_loop(forward_block_f64, args, dims, steps, np.float64(0))


def grad_loop_f32(args, dims, steps, data):  # type: ignore[no-untyped-def]
    binary_block_loop(grad_block, args, dims, steps, np.float32(0))


def grad_loop_f64(args, dims, steps, data):  # type: ignore[no-untyped-def]
    binary_block_loop(grad_block, args, dims, steps, np.float64(0))


#: The ufuncs: name -> (number of inputs, docstring, loop kind for the SIMD
#: shape, {dtype: inner loop}).
_UFUNCS: dict[str, tuple[int, str, str, dict[str, Any]]] = {
    "cube_root": (
        1,
        "The real cube root (cbrtgrad).",
        "forward",
        {"float32": forward_loop_f32, "float64": forward_loop_f64},
    ),
    "cube_root_grad": (
        2,
        "g / (3 y^2), the cube root's gradient from its output y (cbrtgrad).",
        "gradient",
        {"float32": grad_loop_f32, "float64": grad_loop_f64},
    ),
}


def _inner_loop(op: str, dtype: str) -> Any:
    # Compiled (or loaded from the on-disk cache) once per process.
    def build() -> Any:
        _, _, kind, loops = _UFUNCS[op]
        return _compile.compile_cfunc(
            loops[dtype],
            LOOP_SIGNATURE,
            ufunc_loop_shape(dtype, kind),
            f"ufunc {op} {dtype}",
            dtype,
        )

    return _cached(f"loop.{op}.{dtype}", build)


def _build_ufunc(op: str, dtypes: tuple[str, ...]) -> np.ufunc:
    nin, doc, _, _ = _UFUNCS[op]
    loops = {np.dtype(dtype): _inner_loop(op, dtype) for dtype in dtypes}
    return ufunc_from_loops(op, doc, nin, loops)


def _build_ufuncs() -> CpuUfuncs:
    both = ("float32", "float64")
    return CpuUfuncs(_build_ufunc("cube_root", both), _build_ufunc("cube_root_grad", both))


#: SIMD width of the parallel loops, per loop and dtype (default 512), capped
#: by ``CBRTGRAD_VECTOR_WIDTH``. NOTE: the fused float32 loop (the forward and
#: the gradient inlined in one body) was slower at 512 bits than at 256, while
#: the float32 forward alone is faster at 512 (docs/kernels.md, "Measured
#: choices").
PARALLEL_LOOP_WIDTHS = {("fused", "float32"): 256}


def parallel_loop_shape(name: str, signature: str) -> _compile.LoopShape:
    """The SIMD shape of one parallel loop (``forward``, ``fused``...) on this CPU.

    Examples
    --------
    >>> parallel_loop_shape("fused", "void(float32[::1])").width <= 256
    True
    """
    dtype = signature.split("(", 1)[1].split("[", 1)[0].split(",", 1)[0]
    return _compile.loop_shape(
        PARALLEL_LOOP_WIDTHS.get((name, dtype), 512),
        interleave=LOOP_INTERLEAVE.get((name, dtype)),
    )


#: The parallel loops by name, in ParallelLoops order.
_PARALLEL_SIGNATURES = {
    "forward": LOOP_SIGNATURES_1,
    "backward": LOOP_SIGNATURES_2,
    "fused": FUSED_SIGNATURES,
    "backward_constant": CONSTANT_SIGNATURES,
}

#: The function of each parallel loop (module-level, so numba can cache it).
_PARALLEL_KERNELS = {
    "forward": _forward_loop_parallel,
    "backward": _backward_loop_parallel,
    "fused": _fused_loop_parallel,
    "backward_constant": _backward_loop_parallel_constant,
}


#: What each loop computes, for ``cbrtgrad info`` (formulas.py has the proofs).
_VARIANTS = {
    ("forward", "float32"): "float32 Newton step, float64 quadratic, exact midpoint test",
    ("forward", "float64"): "correctly rounded: fast path, exact second pass for hard lanes",
    ("gradient", "float32"): "correctly rounded: float64 quotient, exact pass for hard lanes",
    ("gradient", "float64"): "correctly rounded: corrected quotient, exact pass for hard lanes",
}


def _dtype_of(signature: str) -> str:
    return "float32" if "float32" in signature else "float64"


def loop_plan() -> list[tuple[str, str, str, str]]:
    """Every CPU loop with its SIMD shape on this CPU and the formula it runs.

    Returns
    -------
    list of (loop, dtype, shape, variant)
        ``loop`` is ``"ufunc forward"``, ``"parallel fused"`` and so on.

    Examples
    --------
    >>> plan = loop_plan()
    >>> plan[0][:2]
    ('ufunc forward', 'float32')
    """
    plan = []
    for name in ("forward", "gradient"):
        for dtype in ("float32", "float64"):
            shape = ufunc_loop_shape(dtype, name).describe()
            plan.append((f"ufunc {name}", dtype, shape, _VARIANTS[name, dtype]))
    for name, signatures in _PARALLEL_SIGNATURES.items():
        for signature in signatures:
            dtype = _dtype_of(signature)
            formula = "forward" if name == "forward" else "gradient"
            variant = _VARIANTS[formula, dtype]
            if name == "fused":
                variant = "forward then gradient per 2048-element block"
            shape = parallel_loop_shape(name, signature).describe()
            plan.append((f"parallel {name}", dtype, shape, variant))
    return plan


def parallel_loop(name: str, dtype: Any) -> Any:
    """One multi-threaded loop (``forward``, ``backward``, ``fused``, ``backward_constant``).

    Compiled (or loaded from the on-disk cache) for one dtype on its first
    use, each dtype at its own SIMD shape.

    Parameters
    ----------
    name : str
        A key of :class:`ParallelLoops`' loops.
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
    if name not in _PARALLEL_SIGNATURES:
        raise ValueError(f"name must be one of {', '.join(_PARALLEL_SIGNATURES)}, got {name!r}")
    dt = _dtype_name(dtype)
    found = _built.get(f"parallel.{name}.{dt}")  # the hot path: one dict lookup
    if found is not None:
        return found
    (signature,) = [s for s in _PARALLEL_SIGNATURES[name] if _dtype_of(s) == dt]
    return _cached(
        f"parallel.{name}.{dt}",
        lambda: _compile.compile_njit(
            _PARALLEL_KERNELS[name],
            signature,
            parallel_loop_shape(name, signature),
            f"parallel {name} {dt}",
            dt,
            parallel=True,
        ),
    )


def _dtype_name(dtype: Any) -> str:
    name = np.dtype(dtype).name if not isinstance(dtype, str) else dtype
    if name not in ("float32", "float64"):
        raise TypeError(f"dtype must be float32 or float64, got {dtype!r}")
    return name


def _build_parallel() -> ParallelLoops:
    return ParallelLoops()


def _cached(key: str, build: Callable[[], Any]) -> Any:
    found = _built.get(key)
    if found is not None:
        return found
    with _lock:
        if key not in _built:
            _built[key] = build()
        return _built[key]


def ufuncs() -> CpuUfuncs:
    """Return the single-thread CPU kernels, compiling them on first use.

    Returns
    -------
    CpuUfuncs

    Examples
    --------
    >>> import numpy as np
    >>> ufuncs().cube_root(np.array([-8.0, 27.0]))
    array([-2.,  3.])
    """
    result: CpuUfuncs | None = _built.get("ufuncs")  # the hot path: one dict lookup
    if result is None:
        result = _cached("ufuncs", _build_ufuncs)
    return result


def ufunc(op: str, dtype: Any) -> np.ufunc:
    """The single-thread ufunc of one op for one dtype, compiling or loading only its loop.

    A float64 forward compiles the float64 forward loop (and what it calls)
    and nothing else; :func:`ufuncs` has both dtypes' loops in one ufunc.

    Parameters
    ----------
    op : {"cube_root", "cube_root_grad"}
    dtype : dtype
        float32 or float64 (the compute dtype: the caller casts to it).

    Returns
    -------
    numpy.ufunc
        One loop, ``f->f`` or ``d->d`` (``ff->f``, ``dd->d``).

    Examples
    --------
    >>> import numpy as np
    >>> ufunc("cube_root", np.float64)(np.array([-8.0, 27.0]))
    array([-2.,  3.])
    """
    found = _built.get((op, dtype))  # the hot path: one dict lookup
    if found is not None:
        return found  # type: ignore[no-any-return]
    if op not in _UFUNCS:
        raise ValueError(f"op must be 'cube_root' or 'cube_root_grad', got {op!r}")
    dt = _dtype_name(dtype)
    built: np.ufunc = _cached(f"ufunc.{op}.{dt}", lambda: _build_ufunc(op, (dt,)))
    with _lock:
        _built[(op, dtype)] = built  # type: ignore[index]
    return built


def cached_kernels() -> dict[str, tuple[Any, str]]:
    """Every kernel the on-disk cache can hold: ``{name: (function, tag)}``.

    Examples
    --------
    >>> sorted(cached_kernels())[0]
    'parallel backward float32'
    """
    kernels: dict[str, tuple[Any, str]] = {}
    for op, (_, _, _, loops) in _UFUNCS.items():
        for dtype, loop in loops.items():
            kernels[f"ufunc {op} {dtype}"] = (loop, dtype)
    for name, signatures in _PARALLEL_SIGNATURES.items():
        for signature in signatures:
            dtype = _dtype_of(signature)
            kernels[f"parallel {name} {dtype}"] = (_PARALLEL_KERNELS[name], dtype)
    return kernels


def parallel_loops() -> ParallelLoops:
    """Return the multi-threaded loops, each compiled on its first use.

    Returns
    -------
    ParallelLoops

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([-8.0, 27.0]); y = np.empty_like(x)
    >>> parallel_loops().cube_root(x, y), y
    (0, array([-2.,  3.]))
    """
    result: ParallelLoops = _cached("parallel", _build_parallel)
    return result
