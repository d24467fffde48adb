"""The single-thread CPU kernels: numpy ufuncs around the block functions.

The ufuncs have exactly two loops each, ``float32`` and ``float64``, so numpy's
own loop selection gives the force-fp32 policy for free: a float16 input is
cast to float32 (the first loop it can be cast to safely) and the result is
float32. Integer and bool inputs are sent to the float64 loop by
:mod:`cbrtgrad.arrays.dtypes` before the call, as ``np.cbrt`` would (numpy itself
would pick float32 for int8 and int16).

Each inner loop is compiled (or loaded from the on-disk cache) on first use,
for one dtype (:func:`ufunc`), so a float64 forward compiles nothing else.
The ufuncs keep their names, ``cube_root`` and ``cube_root_grad``: they are
what numpy shows a user (``__name__``, ``__array_ufunc__`` overrides).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import carray, types
from numba.extending import overload
from numba.np import numpy_support

from ...build import compile as _compile
from .. import SERIAL_BLOCK
from ..internal_jit import WITHOUT_ENTRIES
from ..kernel_ops import BY_KERNEL, DTYPES, ELEMENTARY, KERNEL_OPS, elementary_op
from . import lazy
from .blocks import forward_block_f32, forward_block_f64
from .fpstatus import FENV_MASK, raised_flags
from .grad_blocks import grad_f32_at, grad_f64_at
from .ufunc_loops import (
    LOOP_SIGNATURE,
    binary_address_loop,
    call_int64_at,
    call_void_at,
    data_pointer,
    ufunc_from_loops,
    unary_address_loop,
)


@dataclass(frozen=True)
class CpuUfuncs:
    """The single-thread numpy ufuncs (:func:`fused_blocks` combines them).

    Attributes
    ----------
    cube_root : numpy.ufunc
        The forward, ``y = cbrt(x)``, loops ``f->f`` and ``d->d``.
    cube_root_grad : numpy.ufunc
        The grad, ``dx = g / (3 y^2)``, loops ``ff->f`` and ``dd->d``.
    """

    cube_root: np.ufunc
    cube_root_grad: np.ufunc


def fused_blocks(
    ufuncs: CpuUfuncs, x: np.ndarray, g: np.ndarray, y: np.ndarray, dx: np.ndarray
) -> None:
    """The fused kernel on one thread: forward then grad over L2-sized blocks of 1-D arrays.

    NOTE: a numba loop writing both y and dx is not vectorised by LLVM (numba
    gives it no noalias information); the two vectorised ufuncs over blocks of
    ``SERIAL_BLOCK`` elements are, and the block of y just written is still in
    cache when the grad reads it, so x and g cross memory once
    (docs/kernels.md, "Measured choices").

    Examples
    --------
    >>> x = np.array([8.0, -27.0]); g = np.array([12.0, 27.0])
    >>> y = np.empty(2); dx = np.empty(2)
    >>> f64 = CpuUfuncs(ufunc("cube_root", np.float64), ufunc("cube_root_grad", np.float64))
    >>> fused_blocks(f64, x, g, y, dx); y, dx
    (array([ 2., -3.]), array([1., 1.]))
    """
    n = x.shape[0]
    for start in range(0, n, SERIAL_BLOCK):
        stop = start + SERIAL_BLOCK
        yb = y[start:stop]
        ufuncs.cube_root(x[start:stop], out=yb)
        ufuncs.cube_root_grad(g[start:stop], yb, out=dx[start:stop])


#: SIMD width per loop (bits), capped by ``CBRTGRAD_VECTOR_WIDTH``.
#: NOTE: the float32 loops compute in float64, so at 256 bits they already
#: fill zmm registers with 8 lanes; at 512 (16 lanes, two zmm halves) the
#: forward was slower (docs/kernels.md, "SIMD shape per CPU"), so float32
#: stays at 256.
LOOP_WIDTHS = {"float32": 256, "float64": 512}

#: Interleave counts, per (kernel, dtype), that differ from the ISA's default
#: (:data:`cbrtgrad.build.compile.INTERLEAVE_BY_ISA`), for the ufuncs and the
#: ``prange`` loops alike. NOTE: the forwards' chains are long (about 30
#: dependent operations in float64, 30 in float32): on AVX2 three vector
#: iterations in flight beat two (for float32 only since its one integer kept
#: to the end freed the registers), and on AVX-512 (32 vector registers) the
#: float64 forward is fastest at 4 and the 256-bit float32 forward at 3, where
#: LLVM's cost model picks 2 and 1 (docs/kernels.md, "Measured choices",
#: with the CPU it was measured on).
LOOP_INTERLEAVE = {
    ("forward", "float64"): {"AVX2": 3, "AVX-512": 4},
    ("forward", "float32"): {"AVX2": 3, "AVX-512": 3},
}


def ufunc_loop_shape(dtype: str, loop: str = "forward") -> _compile.LoopShape:
    """The SIMD shape of one ufunc loop (``forward`` or ``grad``) of one dtype, on this CPU.

    Examples
    --------
    >>> ufunc_loop_shape("float64").width in (0, 128, 256, 512)
    True
    """
    return _compile.loop_shape(LOOP_WIDTHS[dtype], interleave=LOOP_INTERLEAVE.get((loop, dtype)))


# The ufuncs' inner loops and their block entries, one module-level function
# per (kernel, dtype) so that numba can cache each (a closure's cells would be
# part of its cache key): that is why the float32 and float64 ones are written
# out apiece. The entries run cbrtgrad's own block functions over contiguous
# operands given by address: the correctly rounded float64 forward and the
# gradients have a second pass over hard lanes, which a loop calling a scalar
# function per element cannot have. The gradients' entries are the gradients
# by address themselves (grad_blocks.grad_f32_at, grad_f64_at: no reference
# counts). The loops call their entry through the address numpy passes them
# as ``data`` (ufunc_loops.py: the block function's code is then compiled
# once, in its entry, not again in its loop).
def forward_f32_at(x_at, y_at, n):  # type: ignore[no-untyped-def]
    forward_block_f32(carray(x_at, (n,), np.float32), carray(y_at, (n,), np.float32))


def forward_f64_at(x_at, y_at, n):  # type: ignore[no-untyped-def]
    forward_block_f64(carray(x_at, (n,), np.float64), carray(y_at, (n,), np.float64))


def forward_loop_f32(args, dims, steps, data):  # type: ignore[no-untyped-def]
    unary_address_loop(data, args, dims, steps, np.float32(0))


def forward_loop_f64(args, dims, steps, data):  # type: ignore[no-untyped-def]
    unary_address_loop(data, args, dims, steps, np.float64(0))


def grad_loop_f32(args, dims, steps, data):  # type: ignore[no-untyped-def]
    binary_address_loop(data, args, dims, steps, np.float32(0), None)


def grad_loop_f64(args, dims, steps, data):  # type: ignore[no-untyped-def]
    # The IEEE flags set on entry, read once per call and carried from one
    # entry call to the next (kernels/cpu/grad_flags.py). NOTE: numpy calls a
    # ufunc's inner loop several times between its clear and its check of
    # the flags (buffered and multi-dimensional operands): they may be set.
    before = raised_flags(FENV_MASK)
    binary_address_loop(data, args, dims, steps, np.float64(0), before)


_POINTER = types.voidptr
_COUNT = types.intp

#: The inner loops of each kernel, by dtype.
_LOOPS: dict[str, dict[str, Any]] = {
    "forward": {"float32": forward_loop_f32, "float64": forward_loop_f64},
    "grad": {"float32": grad_loop_f32, "float64": grad_loop_f64},
}

#: The block entry each loop calls, by kernel and dtype: (function, C signature).
#: NOTE: the gradients' entries are grad_f32_at and grad_f64_at compiled as C
#: functions: a wrapper of them would add a numba call to every call,
#: one-element calls included.
ENTRIES: dict[str, dict[str, tuple[Any, Any]]] = {
    "forward": {
        "float32": (forward_f32_at, types.void(_POINTER, _POINTER, _COUNT)),
        "float64": (forward_f64_at, types.void(_POINTER, _POINTER, _COUNT)),
    },
    "grad": {
        "float32": (grad_f32_at.py_func, types.void(_POINTER, _POINTER, _POINTER, _COUNT)),
        "float64": (
            grad_f64_at.py_func,
            types.int64(_POINTER, _POINTER, _POINTER, _COUNT, types.int64),
        ),
    },
}

#: The ufuncs, one per elementary kernel op (kernel_ops.py: its name, inputs
#: and docstring): op name -> {dtype: inner loop}.
UFUNCS: dict[str, dict[str, Any]] = {op.name: _LOOPS[op.kernel] for op in ELEMENTARY}


def block_entry(kernel: str, dtype: str) -> Any:
    """The block entry of ``kernel`` (``"forward"``, ``"grad"``) for ``dtype``, compiled or loaded.

    Once per process: the C function that the ufunc's loop calls by address
    (:data:`ENTRIES`, kernels/cpu/ufunc_loops.py), and every other kernel by name
    (kernels/handlers/linked_entries.py),
    at the ufunc's SIMD shape, named in :func:`cbrtgrad.build.compile.built_kernels`
    as the ufunc it belongs to.

    Examples
    --------
    >>> block_entry("forward", "float64").address > 0
    True
    """

    def build() -> Any:
        function, signature = ENTRIES[kernel][dtype]
        name = f"ufunc {BY_KERNEL[kernel].name} {dtype}"
        shape = ufunc_loop_shape(dtype, kernel)
        return _compile.compile_cfunc(function, signature, shape, name, dtype)

    return lazy.once(f"entry.{kernel}.{dtype}", build)


def run_forward_entry(entry: Any, x: Any, y: Any) -> None:
    """The forward's block entry at ``entry`` over one block's ``x`` and ``y`` (numba code only)."""
    raise NotImplementedError("run_forward_entry is only callable from numba-compiled code")


@overload(run_forward_entry, inline="always", jit_options=WITHOUT_ENTRIES)
def _overload_run_forward_entry(entry, x, y):  # type: ignore[no-untyped-def]
    def run(entry, x, y):  # type: ignore[no-untyped-def]
        call_void_at(entry, (data_pointer(x), data_pointer(y), x.shape[0]))

    return run


def run_grad_entry(entry: Any, g: Any, y: Any, dx: Any, before: Any) -> Any:
    """The gradient's block entry at ``entry`` over one block, the flags after (numba code only).

    From the ``<fenv.h>`` flags set before (the float64 gradient sets its
    own to its rule), the flags read after, so that neither is read twice.
    """
    raise NotImplementedError("run_grad_entry is only callable from numba-compiled code")


@overload(run_grad_entry, inline="always", jit_options=WITHOUT_ENTRIES)
def _overload_run_grad_entry(entry, g, y, dx, before):  # type: ignore[no-untyped-def]
    if numpy_support.as_dtype(y.dtype) == np.float32:

        def single(entry, g, y, dx, before):  # type: ignore[no-untyped-def]
            call_void_at(entry, (data_pointer(g), data_pointer(y), data_pointer(dx), y.shape[0]))
            return raised_flags(FENV_MASK)

        return single

    def double(entry, g, y, dx, before):  # type: ignore[no-untyped-def]
        operands = (data_pointer(g), data_pointer(y), data_pointer(dx), y.shape[0], before)
        return call_int64_at(entry, operands)

    return double


def _inner_loop(op: str, dtype: str) -> tuple[Any, Any]:
    # The loop and its block entry, compiled (or loaded from the on-disk
    # cache) once per process: one kernel to built_kernels() and cbrtgrad warm.
    def build() -> tuple[Any, Any]:
        kernel = KERNEL_OPS[op].kernel
        entry = block_entry(kernel, dtype)
        shape = ufunc_loop_shape(dtype, kernel)
        name = f"ufunc {op} {dtype}"
        loop = _compile.compile_cfunc(UFUNCS[op][dtype], LOOP_SIGNATURE, shape, name, dtype)
        return loop, entry

    return lazy.once(f"loop.{op}.{dtype}", build)  # type: ignore[no-any-return]


def _build_ufunc(op: str, dtypes: tuple[str, ...]) -> np.ufunc:
    loops = {np.dtype(dtype): _inner_loop(op, dtype) for dtype in dtypes}
    return ufunc_from_loops(op, KERNEL_OPS[op].summary, KERNEL_OPS[op].arity, loops)


def _build_ufuncs() -> CpuUfuncs:
    return CpuUfuncs(**{op.name: _build_ufunc(op.name, DTYPES) for op in ELEMENTARY})


def ufuncs() -> CpuUfuncs:
    """Return the single-thread CPU kernels, compiling them on first use.

    Returns
    -------
    CpuUfuncs

    Examples
    --------
    >>> ufuncs().cube_root(np.array([-8.0, 27.0]))
    array([-2.,  3.])
    """
    result: CpuUfuncs | None = lazy.BUILT.get("ufuncs")  # the hot path: one dict lookup
    if result is None:
        result = lazy.once("ufuncs", _build_ufuncs)
    return result


def ufunc(op: str, dtype: Any) -> np.ufunc:
    """The single-thread ufunc of one op for one dtype, compiling or loading only its loop.

    A float64 forward compiles the float64 forward loop (and what it calls)
    and nothing else; :func:`ufuncs` has both dtypes' loops in one ufunc.

    Parameters
    ----------
    op : {"cube_root", "cube_root_grad"}
        The forward or the grad, by the ufunc's name.
    dtype : dtype
        float32 or float64 (the compute dtype: the caller casts to it).

    Returns
    -------
    numpy.ufunc
        One loop, ``f->f`` or ``d->d`` (``ff->f``, ``dd->d``).

    Examples
    --------
    >>> ufunc("cube_root", np.float64)(np.array([-8.0, 27.0]))
    array([-2.,  3.])
    """
    found = lazy.BUILT.get((op, dtype))  # the hot path: one dict lookup
    if found is not None:
        return found  # type: ignore[no-any-return]
    op = elementary_op(op).name
    dt = lazy.dtype_name(dtype)
    built: np.ufunc = lazy.once(f"ufunc.{op}.{dt}", lambda: _build_ufunc(op, (dt,)))
    with lazy.LOCK:
        lazy.BUILT[(op, dtype)] = built
    return built
