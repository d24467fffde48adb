"""The CPU kernels as functions for loops that someone else compiles.

:mod:`cbrtgrad.numba` lets a user call the cube root and its gradient from their
own numba code (``@njit``, ``prange``, ``@vectorize``); these are the CPU
functions it compiles there, in two forms, both from the formulas of
:mod:`cbrtgrad.kernels.formulas.scalar` and so with the ufuncs' bits:

- one element at a time (:func:`forms`), for a loop that calls a scalar
  function per element: unlike the block functions
  (:mod:`cbrtgrad.kernels.cpu.blocks`), such a loop cannot look at a block of
  results before it returns them, so a rare hard lane is decided where it
  occurs;
- a whole array at a time (:func:`block_function`): the ufuncs' own block
  functions, compiled as the ufuncs compile them (the same SIMD shape, the
  same on-disk cache), for a user's loop to call on its arrays.

Scalar forms, by dtype:

float32: the forward and the gradient are the formulas' branch-free forms,
which LLVM vectorises in the caller's loop like any other arithmetic.

float64: the fast path decides all but about one input in 10^7, but the
exact path that decides the rest cannot run in a vector loop without running
for every lane. Written with a branch to it, or as a select of both, the
caller's loop was not vectorised either way (measured, docs/numba.md). So
the float64 forms are scalar code with the fewest operations on the common
path: the plain fast path (no selects for the specials, as on a GPU) and two
rare branches, for zeros, infs, nans and tiny inputs and for a hard lane, to
functions compiled out of line, which keeps the loop's body small. A loop
over an array should call the block function instead
(:func:`cbrtgrad.numba.cbrt_into`), which is vectorised.

NOTE: every function here is compiled with cbrtgrad's options (no fast-math,
numpy's error model), not the caller's: numba's ``overload`` compiles its
implementation as a function of its own, with its own flags, and LLVM
inlines it into the caller's loop keeping the instructions' flags, so a
caller's ``fastmath=True`` does not reach the formulas (which it would break)
and a zero ``y`` gives IEEE's inf instead of raising ZeroDivisionError.
"""

from __future__ import annotations

from typing import Any

import numba
from numba import types

from ...build import compile as _compile
from ..kernel_ops import BY_KERNEL
from . import lazy
from .blocks import (
    _PLAIN_SPAN_F64,
    FORMULAS,
    _plain_offset_f64,
    forward_block_f32,
    forward_block_f64,
)
from .grad_blocks import grad_block
from .ufuncs import ufunc_loop_shape

__all__ = [
    "block_function",
    "cube_root_f32",
    "cube_root_f64",
    "cube_root_grad_f32",
    "cube_root_grad_f64",
    "forms",
]

# NOTE: module globals, as in blocks.py: numba reads them as constants.
cube_root_f32 = FORMULAS.cube_root_f32
cube_root_grad_f32 = FORMULAS.cube_root_grad_f32
_cube_root_f64_fast = FORMULAS.cube_root_f64_fast
_cube_root_f64_plain = FORMULAS.cube_root_f64_plain
_cube_root_f64_exact = FORMULAS.cube_root_f64_exact
_cube_root_grad_f64_fast = FORMULAS.cube_root_grad_f64_fast
_cube_root_grad_f64_exact = FORMULAS.cube_root_grad_f64_exact
_grad_nan_f64 = FORMULAS.grad_nan_f64

#: The rare paths: compiled on their own (:func:`_rare_paths`) and never
#: inlined, so that the caller's loop holds a call instead of their code.
_OUT_OF_LINE = {**_compile.CPU_OPTIONS, "inline": "never"}
#: No SIMD width or interleave: scalar code.
_SCALAR_SHAPE = _compile.LoopShape(0, 0)


@numba.njit(**_OUT_OF_LINE)
def _hard_f64(x):  # type: ignore[no-untyped-def]
    return _cube_root_f64_exact(x)


@numba.njit(**_OUT_OF_LINE)
def _unusual_f64(x):  # type: ignore[no-untyped-def]
    # Zeros, infs, nans and |x| < 2^-800: FORMULAS.cube_root_f64 (the fast
    # path with its selects, then the exact path where it cannot decide:
    # every tiny input), the exact path called rather than compiled twice.
    y, hard = _cube_root_f64_fast(x)
    return _hard_f64(x) if hard != 0 else y


@numba.njit(**_OUT_OF_LINE)
def _hard_grad_f64(g, y):  # type: ignore[no-untyped-def]
    return _cube_root_grad_f64_exact(g, y)


@numba.njit(**_compile.SCALAR_OPTIONS)
def cube_root_f64(x):  # type: ignore[no-untyped-def]
    # FORMULAS.cube_root_f64's bits (cube_root_f64_branching's arrangement,
    # as the CUDA kernels run it), its rare paths out of line.
    if _plain_offset_f64(x) >= _PLAIN_SPAN_F64:
        return _unusual_f64(x)
    y, hard = _cube_root_f64_plain(x)
    if hard != 0:
        return _hard_f64(x)
    return y


@numba.njit(**_compile.SCALAR_OPTIONS)
def cube_root_grad_f64(g, y):  # type: ignore[no-untyped-def]
    # FORMULAS.cube_root_grad_f64, its exact path out of line.
    dx, hard = _cube_root_grad_f64_fast(g, y)
    if hard:
        return _hard_grad_f64(g, y)
    return dx if dx == dx else _grad_nan_f64(g, y)


def _rare_paths() -> None:
    """Compile (or load from the cache) the float64 rare paths, once per process.

    Before a caller's first float64 loop compiles: each for its one
    signature, marked ``noinline`` (numba's ``inline="never"`` keeps them out
    of the caller's numba IR, and this out of its LLVM too), in cbrtgrad's
    kernel cache. NOTE: without this, LLVM inlined the exact path back into
    each caller and optimised it again there: about 2 s more per user
    function on a 2-core machine.
    """

    def build() -> bool:
        f64 = types.float64
        # _hard_f64 first: _unusual_f64 calls it.
        for function, signature in (
            (_hard_f64, f64(f64)),
            (_unusual_f64, f64(f64)),
            (_hard_grad_f64, f64(f64, f64)),
        ):
            name = f"user rare {function.__name__}"
            _compile.compile_dispatcher(
                function, signature, _SCALAR_SHAPE, name, "float64", out_of_line=True
            )
        return True

    lazy.once("user_loops.rare", build)


def forms(dtype: str) -> tuple[Any, Any]:
    """``(forward, gradient)``: the scalar functions for one dtype's loops.

    Examples
    --------
    >>> forms("float32") == (cube_root_f32, cube_root_grad_f32)
    True
    """
    if dtype == "float32":
        return cube_root_f32, cube_root_grad_f32
    if dtype == "float64":
        _rare_paths()
        return cube_root_f64, cube_root_grad_f64
    raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}")


#: The block functions by (kernel, dtype), as the ufuncs' inner loops call them.
_BLOCKS = {
    ("forward", "float32"): forward_block_f32,
    ("forward", "float64"): forward_block_f64,
    ("grad", "float32"): grad_block,
    ("grad", "float64"): grad_block,
}


def block_signature(kernel: str, dtype: str) -> Any:
    """The one signature a block function is compiled for: 1-D C-contiguous arrays.

    The inputs are typed read-only, so that a read-only array and a
    writable one (which numba converts) take the same compiled function.

    Examples
    --------
    >>> [a.mutable for a in block_signature("grad", "float32").args]
    [False, False, True]
    """
    element = types.float32 if dtype == "float32" else types.float64
    inputs = BY_KERNEL[kernel].arity
    readonly = types.Array(element, 1, "C", readonly=True)
    return types.void(*([readonly] * inputs), types.Array(element, 1, "C"))


def block_function(kernel: str, dtype: str) -> Any:
    """One block function compiled (or loaded from the cache) as the ufunc's loop is.

    The function the ufunc's inner loop runs over a contiguous block
    (:func:`cbrtgrad.kernels.cpu.blocks.forward_block_f64` and the like: the
    float64 forward's two passes, the gradient's exact and nan passes), as
    a numba function of its own, for numba code to call: ``f(x, y)`` or
    ``f(g, y, dx)`` over 1-D C-contiguous arrays of one length, the output
    allowed to be an input (in place). Compiled with the SIMD shape of the
    ufunc's loop (:func:`cbrtgrad.kernels.cpu.ufuncs.ufunc_loop_shape`) and
    kept in cbrtgrad's on-disk cache, once per process, marked ``noinline``.

    Parameters
    ----------
    kernel : {"forward", "grad"}
    dtype : {"float32", "float64"}

    Returns
    -------
    numba dispatcher
        Compiled for :func:`block_signature` only.

    Examples
    --------
    >>> import numpy as np
    >>> forward = block_function("forward", "float64")
    >>> y = np.empty(2); forward(np.array([8.0, -27.0]), y); y
    array([ 2., -3.])
    """
    if (kernel, dtype) not in _BLOCKS:
        raise ValueError(f"no block function for {kernel!r} in {dtype!r}")

    def build() -> Any:
        # NOTE: out of line (noinline): a caller calls it once per array, and
        # LLVM would otherwise inline it into each caller and optimise it
        # again there (measured: 4 to 6 s per user function on 2 cores).
        return _compile.compile_njit(
            _BLOCKS[kernel, dtype].py_func,
            block_signature(kernel, dtype),
            ufunc_loop_shape(dtype, kernel),
            f"user block {kernel} {dtype}",
            dtype,
            out_of_line=True,
        )

    return lazy.once(f"user_block.{kernel}.{dtype}", build)
