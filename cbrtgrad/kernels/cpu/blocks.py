"""The CPU kernels' block functions: each kernel over one 1-D contiguous block.

Everything here is built from :mod:`cbrtgrad.kernels.formulas.scalar` for numba's CPU
target. The single-thread ufuncs (:mod:`cbrtgrad.kernels.cpu.ufuncs`) run these
functions over the blocks numpy hands their inner loops, and the
multi-threaded ``prange`` loops (:mod:`cbrtgrad.kernels.cpu.prange_loops`) over
blocks of their own, so both give the same bits.

A correctly rounded kernel here is two passes over a block: a branch-free
first pass that LLVM vectorises, which says whether any lane was hard, then,
only for a block with one, the exact path for those lanes. Blocks are
``SECOND_PASS_BLOCK`` elements, so a hard lane costs a second pass over its
block only. This module has the forward's; the gradient's are in
:mod:`cbrtgrad.kernels.cpu.grad_blocks`.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba import types
from numba.extending import overload

from ...build import compile as _compile
from ..formulas.f64 import MAGNITUDE_MASK64, PLAIN_F64_BEYOND, PLAIN_F64_LOWEST
from ..formulas.primitives import CPU_PRIMITIVES, f64_as_i64
from ..formulas.scalar import make_formulas
from ..internal_jit import numba_only

# NOTE: the float64 gradient's formulas stay inlined by numba, but its exact
# path for hard lanes: out of line (inlined by LLVM), its ufunc ran slower
# (docs/kernels.md, "Measured choices"; tools/compare_kernels_with_commit.py
# --kernel grad); the forward's and the
# float32 gradient's ran as fast, and so does the gradient with its exact
# path out of line (its first compile 4 to 7 % shorter).
FORMULAS = make_formulas(
    CPU_PRIMITIVES,
    numba_only(**_compile.FORMULA_OPTIONS),
    gradient_f64_jit=numba.njit(**_compile.SCALAR_OPTIONS),
)

# NOTE: module globals, not FORMULAS' attributes: numba code reads a module's
# globals as constants, and has no attribute access on a Python object.
_cube_root_f32 = FORMULAS.cube_root_f32
_cube_root_f64 = FORMULAS.cube_root_f64
_cube_root_f64_fast = FORMULAS.cube_root_f64_fast
_cube_root_f64_exact = FORMULAS.cube_root_f64_exact
_cube_root_f64_plain = FORMULAS.cube_root_f64_plain


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


@numba_only(**_compile.BLOCK_OPTIONS)
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
@numba_only(inline="never", fastmath=False)
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


@numba_only(**_compile.BLOCK_OPTIONS)
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
    # Not in place, ``saved`` is an empty view, not an allocation: numba's
    # allocator cost a one-element ufunc call about 70 ns (20 % of np.cbrt's).
    n = x.shape[0]
    in_place = x.ctypes.data == y.ctypes.data
    saved = np.empty(min(n, SECOND_PASS_BLOCK), np.float64) if in_place else y[:0]
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
