"""The CPU kernels' gradient block functions: ``g / (3 y^2)`` over one 1-D contiguous block.

As :mod:`cbrtgrad.kernels.cpu.blocks` for the forward: two passes over a block,
a branch-free first pass that LLVM vectorises, then the exact path for the
hard lanes of the blocks that have any, then the nan pass. The float64
gradient's IEEE flags are then set to its rule's where its loops raised
others (:mod:`cbrtgrad.kernels.cpu.grad_flags`).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba import carray
from numba.extending import overload

from ...build import compile as _compile
from ..internal_jit import WITHOUT_ENTRIES, numba_only
from .blocks import FORMULAS, SECOND_PASS_BLOCK, _copy, _is_f32
from .fpstatus import FENV_MASK, raised_flags
from .grad_flags import AUDIT_BLOCK, audit
from .ufunc_loops import data_pointer, keep_alive, pointer_address

# NOTE: module globals, not FORMULAS' attributes: numba code reads a module's
# globals as constants, and has no attribute access on a Python object.
_cube_root_grad_f32 = FORMULAS.cube_root_grad_f32
_cube_root_grad_f32_fast = FORMULAS.cube_root_grad_f32_fast
_cube_root_grad_f64_fast = FORMULAS.cube_root_grad_f64_fast
_cube_root_grad_f64_exact = FORMULAS.cube_root_grad_f64_exact
_grad_nan_f32 = FORMULAS.grad_nan_f32
_grad_nan_f64 = FORMULAS.grad_nan_f64


def _kept(a: Any, start: Any, stop: Any, kept: Any) -> Any:
    """``a[start:stop]``, or a copy of it in ``kept`` where ``kept`` is not empty."""
    raise NotImplementedError("_kept is only callable from numba-compiled code")


@overload(_kept, inline="always", jit_options=WITHOUT_ENTRIES)
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

    @numba_only(**_compile.BLOCK_OPTIONS)
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

    @numba_only(**_compile.BLOCK_OPTIONS)
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

    @numba_only(**_compile.BLOCK_OPTIONS)
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
    # Returns whether a result is a nan. NOTE: np.bool_(False), not the
    # literal False: numba typed the audit called with this result once
    # with the literal, before it saw the |= below, and compiled it twice.
    nan_result = np.bool_(False)
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


#: The ``kept`` of a gradient not in place: an int64, not the literal 0.
#: NOTE: numba compiles a function once per literal argument: called with 0
#: here and with a count in place, _grad_f64_from was compiled twice (and
#: the flags' audit it calls, twice again): seconds more of the first
#: float64 gradient's compile (docs/cache.md).
_NONE_KEPT = np.int64(0)


@numba_only(**_compile.BLOCK_OPTIONS)
def _grad_f32_from(g_at, y_at, dx_at, n, kept_g_at, kept_y_at, kept):  # type: ignore[no-untyped-def]
    # The float32 gradient of n contiguous elements given by address (as
    # _grad_f64_from: no reference counts), the kept buffers ``kept``
    # elements long in place (dx is g or y), else 0. It raises the flags of
    # its float64 quotient rounded to float32 (docs/accuracy.md, "IEEE
    # flags"): no audit.
    # NOTE: the block loop written out, not through _grad_range: its slices
    # of the kept buffers cost this gradient 2 % (0.47 ns per element).
    g = carray(g_at, (n,), np.float32)
    y = carray(y_at, (n,), np.float32)
    dx = carray(dx_at, (n,), np.float32)
    kept_g = carray(kept_g_at, (kept,), np.float32)
    kept_y = carray(kept_y_at, (kept,), np.float32)
    for start in range(0, n, SECOND_PASS_BLOCK):
        stop = min(start + SECOND_PASS_BLOCK, n)
        gs = _kept(g, start, stop, kept_g)
        ys = _kept(y, start, stop, kept_y)
        dxs = dx[start:stop]
        if _grad_first_pass(gs, ys, dxs):
            _grad_second_pass(gs, ys, dxs)
        _grad_nan_pass(gs, ys, dxs)


@numba_only(**_compile.BLOCK_OPTIONS)
def grad_f32_at(g_at, y_at, dx_at, n):  # type: ignore[no-untyped-def]
    # grad_block over n contiguous float32 elements given by address (the
    # float32 ufunc's loop calls it so: see _grad_f64_from), the kept
    # buffers allocated here where dx is g or y.
    at = pointer_address(dx_at)
    if pointer_address(g_at) != at and pointer_address(y_at) != at:
        _grad_f32_from(g_at, y_at, dx_at, n, dx_at, dx_at, _NONE_KEPT)
        return
    kept = min(n, SECOND_PASS_BLOCK)
    kept_g = np.empty(kept, np.float32)
    kept_y = np.empty(kept, np.float32)
    _grad_f32_from(g_at, y_at, dx_at, n, data_pointer(kept_g), data_pointer(kept_y), kept)
    keep_alive(kept_g, kept_y)  # until here: the call above writes them


@numba_only(**_compile.BLOCK_OPTIONS)
def _grad_f64_from(g_at, y_at, dx_at, n, before, kept_g_at, kept_y_at, kept):  # type: ignore[no-untyped-def]
    # The float64 gradient of n contiguous elements given by address, by
    # audit blocks (kernels/cpu/grad_flags.py): after each, the IEEE flags are
    # read, and only if one was raised that was not set before (``before``,
    # the <fenv.h> flags set before the first) the block's flags are set to
    # the rule's. Returns the flags set at the end. In place (dx is g or y)
    # the kept buffers hold ``kept`` elements (0 otherwise), and the audit
    # reads the block's inputs from them.
    # NOTE: in place, one audit block per block of the passes: kept buffers
    # for AUDIT_BLOCK elements (64 KiB) cost the in-place gradient 9 %, the
    # reads of the flags per block about 0.5 %.
    # NOTE: addresses, not arrays: numba counts references to the arrays a
    # function is given (a call of NRT_incref or NRT_decref per array, per
    # slice of it and per call it is passed to), even to numpy's memory,
    # which has none to count; that cost a one-element call of the ufunc
    # about 100 ns, a quarter of it. Arrays made here from addresses have no
    # count, and LLVM drops the calls.
    g = carray(g_at, (n,), np.float64)
    y = carray(y_at, (n,), np.float64)
    dx = carray(dx_at, (n,), np.float64)
    kept_g = carray(kept_g_at, (kept,), np.float64)
    kept_y = carray(kept_y_at, (kept,), np.float64)
    step = AUDIT_BLOCK if kept == 0 else SECOND_PASS_BLOCK
    flags = before
    for start in range(0, n, step):
        stop = min(start + step, n)
        nan_result = _grad_range(g, y, dx, start, stop, kept_g, kept_y)
        raised = raised_flags(FENV_MASK)
        if raised & ~flags:
            gs, ys = g[start:stop], y[start:stop]
            if kept != 0:
                gs, ys = kept_g[: stop - start], kept_y[: stop - start]
            flags = audit(gs, ys, dx[start:stop], flags, raised, nan_result)
        else:
            flags = raised
    return flags


@numba_only(**_compile.BLOCK_OPTIONS)
def grad_f64_at(g_at, y_at, dx_at, n, before):  # type: ignore[no-untyped-def]
    # The float64 gradient over n contiguous elements given by address, from
    # the <fenv.h> flags ``before``, returning the flags after (the float64
    # ufunc's loop calls it so: see _grad_f64_from), the kept
    # buffers allocated here where dx is g or y.
    at = pointer_address(dx_at)
    if pointer_address(g_at) != at and pointer_address(y_at) != at:
        return _grad_f64_from(g_at, y_at, dx_at, n, before, dx_at, dx_at, _NONE_KEPT)
    kept = min(n, SECOND_PASS_BLOCK)
    kept_g = np.empty(kept, np.float64)
    kept_y = np.empty(kept, np.float64)
    flags = _grad_f64_from(
        g_at, y_at, dx_at, n, before, data_pointer(kept_g), data_pointer(kept_y), kept
    )
    keep_alive(kept_g, kept_y)  # until here: the call above writes them
    return flags


def _grad_any(g: Any, y: Any, dx: Any) -> None:
    """The gradient over one block, whatever flags are set (numba code only)."""
    raise NotImplementedError("_grad_any is only callable from numba-compiled code")


@overload(_grad_any)
def _overload_grad_any(g, y, dx):  # type: ignore[no-untyped-def]
    if _is_f32(y.dtype):

        def single(g, y, dx):  # type: ignore[no-untyped-def]
            grad_f32_at(data_pointer(g), data_pointer(y), data_pointer(dx), y.shape[0])

        return single

    def double(g, y, dx):  # type: ignore[no-untyped-def]
        # NOTE: the flags set on entry are read, once per call: numpy calls a
        # ufunc's inner loop several times between its clear and its check
        # of the flags (buffered and multi-dimensional operands).
        g_at, y_at, dx_at = data_pointer(g), data_pointer(y), data_pointer(dx)
        grad_f64_at(g_at, y_at, dx_at, y.shape[0], raised_flags(FENV_MASK))

    return double


@numba_only(**_compile.BLOCK_OPTIONS)
def grad_block(g, y, dx):  # type: ignore[no-untyped-def]
    # The gradient over 1-D contiguous arrays (cbrtgrad.numba's blocks):
    # correctly rounded where docs/accuracy.md says, its IEEE flags the rule's.
    _grad_any(g, y, dx)
