"""Subnormal numbers kept (no flush to zero) on the calling thread, for kernels run inside XLA.

XLA's CPU runtime runs its threads with subnormals flushed: FTZ (results
flushed to zero) and DAZ (subnormal operands read as zero) in the x86 MXCSR
register, FZ in the ARM64 FPCR. Anything cbrtgrad runs on such a thread, a
``jax.pure_callback`` or an XLA FFI handler (:mod:`cbrtgrad.kernels.handlers.xla_ffi`),
inherits that mode: a gradient whose correctly rounded result is subnormal
comes out 0, and ml_dtypes' bfloat16-to-float64 cast turns every bfloat16
subnormal into 0 (/work/shared/REFERENCE.md, "Bridges").

:func:`keep_subnormals` clears those bits on the calling thread and returns
the mode as it was, for :func:`restore_mode` to put back: XLA's own code after
the call runs as XLA set it up. Both are numba functions, so numba code (the
FFI handlers) calls them inline, and Python calls them through their
dispatchers (:class:`IEEEDenormals`, a context manager): numba's call
machinery leaves the register alone, so the mode set inside stays set when the
call returns.

NOTE: x86-64 and ARM64 only (the CPUs XLA's CPU backend and cbrtgrad's kernels
are built for); elsewhere the mode reads as 0 and nothing is changed
(:data:`AVAILABLE` is False).
"""

from __future__ import annotations

import platform
from typing import Any

import numba
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from ...build import compile as _compile


def _architecture() -> str | None:
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        return "x86"
    if machine in ("aarch64", "arm64"):
        return "arm"
    return None


_ARCH = _architecture()
#: Whether this CPU's subnormal mode can be read and set here.
AVAILABLE = _ARCH is not None
#: The mode bits that flush subnormals: MXCSR's FTZ (bit 15) and DAZ (bit 6)
#: on x86, FPCR's FZ (bit 24) on ARM64.
FLUSH_BITS = {"x86": (1 << 15) | (1 << 6), "arm": 1 << 24}.get(_ARCH or "", 0)


@intrinsic
def read_mode(typingctx):  # type: ignore[no-untyped-def]
    """The calling thread's floating-point control register (0 where unknown)."""

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        i64 = ir.IntType(64)
        if _ARCH == "x86":
            i32 = ir.IntType(32)
            slot = builder.alloca(i32)
            fnty = ir.FunctionType(ir.VoidType(), [ir.IntType(8).as_pointer()])
            fn = builder.module.declare_intrinsic("llvm.x86.sse.stmxcsr", (), fnty)
            builder.call(fn, [builder.bitcast(slot, ir.IntType(8).as_pointer())])
            return builder.zext(builder.load(slot), i64)
        if _ARCH == "arm":
            fnty = ir.FunctionType(i64, [])
            fn = builder.module.declare_intrinsic("llvm.aarch64.get.fpcr", (), fnty)
            return builder.call(fn, [])
        return ir.Constant(i64, 0)

    return types.int64(), codegen


@intrinsic
def write_mode(typingctx, value):  # type: ignore[no-untyped-def]
    """Set the calling thread's floating-point control register (nothing where unknown)."""
    if not isinstance(value, types.Integer):
        return None

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        i64 = ir.IntType(64)
        mode = args[0]
        if mode.type.width != 64:
            mode = builder.sext(mode, i64)
        if _ARCH == "x86":
            i32 = ir.IntType(32)
            slot = builder.alloca(i32)
            builder.store(builder.trunc(mode, i32), slot)
            fnty = ir.FunctionType(ir.VoidType(), [ir.IntType(8).as_pointer()])
            fn = builder.module.declare_intrinsic("llvm.x86.sse.ldmxcsr", (), fnty)
            builder.call(fn, [builder.bitcast(slot, ir.IntType(8).as_pointer())])
        elif _ARCH == "arm":
            fnty = ir.FunctionType(ir.VoidType(), [i64])
            fn = builder.module.declare_intrinsic("llvm.aarch64.set.fpcr", (), fnty)
            builder.call(fn, [mode])
        return context.get_dummy_value()

    return types.none(value), codegen


@numba.njit(**_compile.SCALAR_OPTIONS)
def keep_subnormals():  # type: ignore[no-untyped-def]
    """Clear the flush-to-zero bits on the calling thread; return the mode as it was."""
    old = read_mode()
    new = old & ~FLUSH_BITS
    if new != old:  # NOTE: writing the register stalls the pipeline: only when needed
        write_mode(new)
    return old


@numba.njit(**_compile.SCALAR_OPTIONS)
def restore_mode(old):  # type: ignore[no-untyped-def]
    """Put back a mode :func:`keep_subnormals` returned."""
    if read_mode() != old:
        write_mode(old)


_PYTHON: dict[str, Any] = {}


def mode_functions() -> tuple[Any, Any]:
    """``keep_subnormals`` and ``restore_mode`` for Python callers (compiled, or loaded, once)."""
    if not _PYTHON:
        shape = _compile.loop_shape(256)
        keep = _compile.compile_njit(
            keep_subnormals.py_func, "int64()", shape, "keep subnormals", "mode"
        )
        restore = _compile.compile_njit(
            restore_mode.py_func, "void(int64)", shape, "restore fp mode", "mode"
        )
        _PYTHON.update(keep=keep, restore=restore)
    return _PYTHON["keep"], _PYTHON["restore"]


class IEEEDenormals:
    """A context manager: subnormals kept on the calling thread inside, the old mode after.

    What a ``jax.pure_callback`` body runs in (:mod:`cbrtgrad.jax`): XLA calls
    it on a thread with subnormals flushed.

    Examples
    --------
    >>> import numpy as np
    >>> with IEEEDenormals():
    ...     tiny = np.float32(1e-40) * np.float32(2.0)  # subnormal in, subnormal out
    >>> bool(tiny > 0)
    True
    """

    __slots__ = ("_old",)

    def __enter__(self) -> IEEEDenormals:
        keep, _ = mode_functions()
        self._old = keep()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._old & FLUSH_BITS:  # NOTE: only where __enter__ changed the mode (a call less)
            _, restore = mode_functions()
            restore(self._old)
