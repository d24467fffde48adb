"""The CPU kernels' block functions: each kernel over one 1-D contiguous block.

Everything here is built from :mod:`cbrtgrad.kernels.formulas` for numba's CPU
target. The single-thread ufuncs (:mod:`cbrtgrad.kernels.cpu_ufuncs`) run these
functions over the blocks numpy hands their inner loops, and the
multi-threaded ``prange`` loops (:mod:`cbrtgrad.kernels.prange_loops`) over
blocks of their own, so both give the same bits.

A correctly rounded kernel here is two passes over a block: a branch-free
first pass that LLVM vectorises, which says whether any lane was hard, then,
only for a block with one, the exact path for those lanes. Blocks are
``SECOND_PASS_BLOCK`` elements, so a hard lane costs a second pass over its
block only. The float64 gradient's IEEE flags are then set to its rule's
where its loops raised others (:mod:`cbrtgrad.kernels.grad_flags`).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba import types
from numba.extending import overload

from .. import _compile
from .formulas import make_formulas
from .formulas_f64 import MAGNITUDE_MASK64, PLAIN_F64_BEYOND, PLAIN_F64_LOWEST
from .fpstatus import FENV_MASK, raised_flags
from .grad_flags import AUDIT_BLOCK, audit
from .primitives import CPU_PRIMITIVES, f64_as_i64

FORMULAS = make_formulas(CPU_PRIMITIVES, numba.njit(**_compile.SCALAR_OPTIONS))

# NOTE: module globals, not FORMULAS' attributes: numba code reads a module's
# globals as constants, and has no attribute access on a Python object.
_cube_root_f32 = FORMULAS.cube_root_f32
_cube_root_f64 = FORMULAS.cube_root_f64
_cube_root_f64_fast = FORMULAS.cube_root_f64_fast
_cube_root_f64_exact = FORMULAS.cube_root_f64_exact
_cube_root_f64_plain = FORMULAS.cube_root_f64_plain
_cube_root_grad_f32 = FORMULAS.cube_root_grad_f32
_cube_root_grad_f32_fast = FORMULAS.cube_root_grad_f32_fast
_cube_root_grad_f64_fast = FORMULAS.cube_root_grad_f64_fast
_cube_root_grad_f64_exact = FORMULAS.cube_root_grad_f64_exact
_grad_nan_f32 = FORMULAS.grad_nan_f32
_grad_nan_f64 = FORMULAS.grad_nan_f64


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


@numba.njit(**_compile.BLOCK_OPTIONS)
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
    # arithmetic (measured: docs/kernels.md, "Measured choices").
    hard = np.int64(0)
    worst = np.uint64(0)
    for i in range(x.shape[0]):
        yi, h = _cube_root_f64_plain(x[i])
        y[i] = yi
        hard |= h
        worst = max(worst, _plain_offset_f64(following[i]))
    return hard != 0, worst < _PLAIN_SPAN_F64


@numba.njit(**_compile.BLOCK_OPTIONS)
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


def forward_block(x: Any, y: Any) -> None:
    """The forward over 1-D contiguous arrays, by dtype (numba code only)."""
    raise NotImplementedError("forward_block is only callable from numba-compiled code")


@overload(forward_block)
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


def _grad_first_pass_over(fast: Any) -> Any:
    """The branch-free first pass of one gradient formula over a block (vectorised).

    NOTE: one factory for both dtypes (as _first_pass_f64 for the forward's
    two fast paths): the float32 and float64 passes were the same loop around
    another formula. Not inlined into the block loop, as for the float64
    forward's first pass.
    """

    @numba.njit(**{**_compile.SCALAR_OPTIONS, "inline": "never"})
    def first_pass(g, y, dx):  # type: ignore[no-untyped-def]
        # Whether any lane was hard.
        hard = False
        for i in range(y.shape[0]):
            dxi, h = fast(g[i], y[i])
            dx[i] = dxi
            hard |= h
        return hard

    return first_pass


def _grad_second_pass_over(fast: Any, exact: Any) -> Any:
    """The exact pass of one gradient formula over a block's hard lanes.

    NOTE: not inlined: the second pass is rare, and keeping it out of line
    keeps the vector loop of the first pass free of its code. It calls the
    formulas directly: a kernel inlined through an overload inside the branch
    trips numba's SSA checks (NumbaIRAssumptionWarning).
    """

    @numba.njit(**{**_compile.SCALAR_OPTIONS, "inline": "never"})
    def second_pass(g, y, dx):  # type: ignore[no-untyped-def]
        for i in range(y.shape[0]):
            _, hard = fast(g[i], y[i])
            if hard:
                dx[i] = exact(g[i], y[i])

    return second_pass


def _grad_nan_pass_over(grad_nan: Any) -> Any:
    """The pass that makes a block's nan results the formulas' own (``grad_nan``).

    The first pass leaves the hardware's nans: which operand's nan a product
    of two nans returns is LLVM's choice of operand order (the vector loop
    and the scalar tail differed), and a default nan's sign is the CPU's
    (x86 sets it, arm64 does not). Deciding them in the vector loop cost 30 to
    40 % of its time on AVX2 (a compare and three selects per lane); this
    pass costs one compare per lane, over a block still in L1 cache, and the
    selects only for a block with a nan (docs/accuracy.md, "nan results").
    """

    @numba.njit(**{**_compile.SCALAR_OPTIONS, "inline": "never"})
    def nan_pass(g, y, dx):  # type: ignore[no-untyped-def]
        # Returns whether a result is a nan (the float64 flags' audit asks).
        found = False
        for i in range(dx.shape[0]):
            found |= dx[i] != dx[i]
        if found:  # branch-free, so vectorised too
            for i in range(dx.shape[0]):
                dx[i] = dx[i] if dx[i] == dx[i] else grad_nan(g[i], y[i])
        return found

    return nan_pass


#: The gradient's passes by dtype: (first pass, second pass, nan pass).
_GRAD_PASSES = {
    "float32": (
        _grad_first_pass_over(_cube_root_grad_f32_fast),
        _grad_second_pass_over(_cube_root_grad_f32_fast, _cube_root_grad_f32),
        _grad_nan_pass_over(_grad_nan_f32),
    ),
    "float64": (
        _grad_first_pass_over(_cube_root_grad_f64_fast),
        _grad_second_pass_over(_cube_root_grad_f64_fast, _cube_root_grad_f64_exact),
        _grad_nan_pass_over(_grad_nan_f64),
    ),
}


def _grad_pass_by_dtype(which: int, what: str) -> Any:
    """A function for numba code that runs pass ``which`` of ``_GRAD_PASSES`` by y's dtype.

    ``f(g, y, dx)`` over one block, the first pass returning whether a lane
    was hard; ``what`` names it in the error from Python.
    """

    def by_dtype(g: Any, y: Any, dx: Any) -> Any:
        raise NotImplementedError(f"the gradient's {what} is only callable from numba code")

    @overload(by_dtype, inline="always")
    def _overload(g, y, dx):  # type: ignore[no-untyped-def]
        chosen = _GRAD_PASSES["float32" if _is_f32(y.dtype) else "float64"][which]
        return lambda g, y, dx: chosen(g, y, dx)

    return by_dtype


_grad_first_pass = _grad_pass_by_dtype(0, "fast pass")
_grad_second_pass = _grad_pass_by_dtype(1, "exact pass over a block's hard lanes")
_grad_nan_pass = _grad_pass_by_dtype(2, "nan pass")


@numba.njit(**_compile.SCALAR_OPTIONS)
def _grad_range(g, y, dx, start, stop, kept_g, kept_y):  # type: ignore[no-untyped-def]
    # The gradient of elements start to stop, correctly rounded (float32 for
    # normal results, float64 where its rounding test applies), by blocks:
    # the fast pass, then, only for a block with a hard lane, the exact path
    # for those lanes, then the nan pass (_grad_nan_pass_over). In place (dx
    # is g or y) each block's inputs are first kept in kept_g and kept_y, at
    # their offset from start: the first pass overwrites them, and LLVM's
    # runtime overlap check fails for dx = y and runs its scalar loop.
    # Returns whether a result is a nan.
    nan_result = False
    for begin in range(start, stop, SECOND_PASS_BLOCK):
        end = min(begin + SECOND_PASS_BLOCK, stop)
        offset = begin - start
        gs = _kept(g, begin, end, kept_g[offset:])
        ys = _kept(y, begin, end, kept_y[offset:])
        dxs = dx[begin:end]
        if _grad_first_pass(gs, ys, dxs):
            _grad_second_pass(gs, ys, dxs)
        nan_result |= _grad_nan_pass(gs, ys, dxs)
    return nan_result


def _kept_buffers(g: Any, y: Any, dx: Any, size: Any) -> Any:
    """Buffers for ``size`` of g's and y's elements where dx is one of them, else empty ones."""
    raise NotImplementedError("_kept_buffers is only callable from numba-compiled code")


@overload(_kept_buffers)
def _overload_kept_buffers(g, y, dx, size):  # type: ignore[no-untyped-def]
    def buffers(g, y, dx, size):  # type: ignore[no-untyped-def]
        in_place = g.ctypes.data == dx.ctypes.data or y.ctypes.data == dx.ctypes.data
        kept = min(y.shape[0], size) if in_place else 0
        return np.empty(kept, y.dtype), np.empty(kept, y.dtype)

    return buffers


@numba.njit(**_compile.BLOCK_OPTIONS)
def _grad_f32(g, y, dx):  # type: ignore[no-untyped-def]
    # The float32 gradient raises the flags of its float64 quotient rounded
    # to float32 (docs/accuracy.md, "IEEE flags"): no audit.
    # NOTE: the block loop written out, not through _grad_range: its slices
    # of the kept buffers cost this gradient 2 % (0.47 ns per element).
    n = y.shape[0]
    kept_g, kept_y = _kept_buffers(g, y, dx, SECOND_PASS_BLOCK)
    for start in range(0, n, SECOND_PASS_BLOCK):
        stop = min(start + SECOND_PASS_BLOCK, n)
        gs = _kept(g, start, stop, kept_g)
        ys = _kept(y, start, stop, kept_y)
        dxs = dx[start:stop]
        if _grad_first_pass(gs, ys, dxs):
            _grad_second_pass(gs, ys, dxs)
        _grad_nan_pass(gs, ys, dxs)


@numba.njit(**_compile.BLOCK_OPTIONS)
def _grad_f64(g, y, dx, before):  # type: ignore[no-untyped-def]
    # The float64 gradient by audit blocks (kernels/grad_flags.py): after
    # each, the IEEE flags are read, and only if one was raised that was not
    # set before (``before``, the <fenv.h> flags set before the first) the
    # block's flags are set to the rule's. Returns the flags set at the end.
    # The audit reads the block's inputs: in place they are the kept ones.
    # NOTE: in place, one audit block per block of the passes: kept buffers
    # for AUDIT_BLOCK elements (64 KiB) cost the in-place gradient 9 %, the
    # reads of the flags per block about 0.5 %.
    n = y.shape[0]
    kept_g, kept_y = _kept_buffers(g, y, dx, SECOND_PASS_BLOCK)
    step = AUDIT_BLOCK if kept_g.shape[0] == 0 else SECOND_PASS_BLOCK
    flags = before
    for start in range(0, n, step):
        stop = min(start + step, n)
        nan_result = _grad_range(g, y, dx, start, stop, kept_g, kept_y)
        raised = raised_flags(FENV_MASK)
        if raised & ~flags:
            gs, ys = g[start:stop], y[start:stop]
            if kept_g.shape[0] != 0:
                gs, ys = kept_g[: stop - start], kept_y[: stop - start]
            flags = audit(gs, ys, dx[start:stop], flags, raised, nan_result)
        else:
            flags = raised
    return flags


def _grad_with_flags(g: Any, y: Any, dx: Any, before: Any) -> Any:
    """The gradient over one block from the ``<fenv.h>`` flags ``before``; the flags after."""
    raise NotImplementedError("_grad_with_flags is only callable from numba-compiled code")


@overload(_grad_with_flags)
def _overload_grad_with_flags(g, y, dx, before):  # type: ignore[no-untyped-def]
    if _is_f32(y.dtype):

        def single(g, y, dx, before):  # type: ignore[no-untyped-def]
            _grad_f32(g, y, dx)
            return raised_flags(FENV_MASK)

        return single
    return lambda g, y, dx, before: _grad_f64(g, y, dx, before)


def _grad_any(g: Any, y: Any, dx: Any) -> None:
    """The gradient over one block, whatever flags are set (numba code only)."""
    raise NotImplementedError("_grad_any is only callable from numba-compiled code")


@overload(_grad_any)
def _overload_grad_any(g, y, dx):  # type: ignore[no-untyped-def]
    if _is_f32(y.dtype):
        return lambda g, y, dx: _grad_f32(g, y, dx)

    def double(g, y, dx):  # type: ignore[no-untyped-def]
        # NOTE: the flags set on entry are read, once per call: numpy calls a
        # ufunc's inner loop several times between its clear and its check
        # of the flags (buffered and multi-dimensional operands).
        _grad_f64(g, y, dx, raised_flags(FENV_MASK))

    return double


@numba.njit(**_compile.BLOCK_OPTIONS)
def grad_block(g, y, dx):  # type: ignore[no-untyped-def]
    # The gradient over 1-D contiguous arrays (the ufuncs' loops): correctly
    # rounded where docs/accuracy.md says, its IEEE flags the rule's there.
    _grad_any(g, y, dx)


@numba.njit(**_compile.BLOCK_OPTIONS)
def grad_block_flags(g, y, dx, before):  # type: ignore[no-untyped-def]
    # grad_block for a caller that knows the <fenv.h> flags set before it
    # (``before``: the prange loops clear them first) and reads them after:
    # returns them, so that neither is read twice.
    return _grad_with_flags(g, y, dx, before)
