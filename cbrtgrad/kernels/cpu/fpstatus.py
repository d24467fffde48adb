"""IEEE exception flags raised inside multi-threaded loops, reported as numpy reports them.

numpy checks the floating-point status flags of the calling thread after each
ufunc loop and acts on them as ``np.errstate`` says (warn, raise, call, print,
log or ignore). A ``prange`` loop runs on numba's worker threads, whose flags
the calling thread never sees: without help, the ``parallel`` backend would
neither warn nor honour ``np.errstate`` while the ``cpu`` backend (a numpy
ufunc over the same block code) does.

So each block of a parallel loop reads its thread's flags
(:data:`raised_flags`, C's ``fetestexcept``) after its work, having cleared them
first (:data:`clear_flags`, only when one is set: the clear is the costlier
call), and the loop returns the union, in numpy's own bit order
(:data:`DIVIDE`, :data:`OVERFLOW`, :data:`UNDERFLOW`, :data:`INVALID`).
:func:`signal` then does what numpy's ufunc machinery does with those flags in
the calling thread, with numpy's messages and the cpu ufunc's name, so both
backends signal the same conditions the same way. The inexact flag is never
looked at (nor is it by numpy).

The float64 gradient's loops also set the flags (:data:`clear_flags`,
:data:`raise_flags`, C's ``feraiseexcept``) to the ones its rule raises,
where its vector loop raised others (:mod:`cbrtgrad.kernels.cpu.grad_flags`).

NOTE: the flag bits of C's ``<fenv.h>`` differ per architecture; they are
known here for x86 and ARM (64-bit). Elsewhere, or where no C library with
``fetestexcept`` is found, the flags read as 0 and the parallel loops signal
nothing (:data:`AVAILABLE` is False).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform
import sys
import warnings
from typing import Any

import llvmlite.binding as llvm_binding
import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

#: numpy's own flag bits (``np.core._umath``'s ``FPE_*``), in the order it handles them.
DIVIDE, OVERFLOW, UNDERFLOW, INVALID = 1, 2, 4, 8

#: ``<fenv.h>`` bits (FE_INVALID, FE_DIVBYZERO, FE_OVERFLOW, FE_UNDERFLOW) per architecture.
_FENV_BITS = {
    "x86": (0x01, 0x04, 0x08, 0x10),
    "arm": (0x01, 0x02, 0x04, 0x08),
}


def _architecture() -> str | None:
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64", "i386", "i686", "x86"):
        return "x86"
    if machine in ("aarch64", "arm64"):
        return "arm"
    return None


def _bind() -> tuple[Any, Any, str | None] | None:
    # fetestexcept and feclearexcept from the C library: libm on glibc, the
    # process's own symbols elsewhere (macOS's libSystem). Found with ctypes
    # (whether they exist, and in which library); the loops call them by name.
    names = [ctypes.util.find_library("m"), None]
    for name in names:
        try:
            library = ctypes.CDLL(name)
            test, clear = library.fetestexcept, library.feclearexcept
        except (OSError, AttributeError):
            continue
        return test, clear, name
    return None


_ARCH = _architecture()
_BOUND = _bind() if _ARCH is not None and sys.platform != "win32" else None
_LIBRARY = _BOUND[2] if _BOUND is not None else None

#: Whether the parallel loops can see their threads' flags on this machine.
AVAILABLE = _BOUND is not None


def _fenv_call(symbol: str) -> Any:
    """An intrinsic calling the C library's ``int symbol(int)`` by name.

    NOTE: by name, not through a ctypes function pointer: a pointer is a
    constant of the compiled code, which numba then refuses to cache ("uses
    dynamic globals"); a named external symbol is resolved when the cached
    code is loaded (the library is made visible to LLVM below).
    """

    @intrinsic
    def call(typingctx, mask):  # type: ignore[no-untyped-def]
        if not isinstance(mask, types.Integer):
            return None

        def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
            i32 = ir.IntType(32)
            fnty = ir.FunctionType(i32, [i32])
            function = builder.module.globals.get(symbol)
            if function is None:
                function = ir.Function(builder.module, fnty, symbol)
            value = args[0]
            if value.type.width > 32:
                value = builder.trunc(value, i32)
            elif value.type.width < 32:
                value = builder.sext(value, i32)
            # int64, as the flags' arithmetic in numba code: one type for
            # the state the gradient's loops carry, so one signature of each
            # function they call (an int32 state compiled them twice).
            return builder.sext(builder.call(function, [value]), ir.IntType(64))

        return types.int64(mask), codegen

    return call


if _BOUND is not None and _ARCH is not None:
    _FE_INVALID, _FE_DIVBYZERO, _FE_OVERFLOW, _FE_UNDERFLOW = _FENV_BITS[_ARCH]
    #: The four flags numpy reports, in ``<fenv.h>`` bits.
    FENV_MASK = _FE_INVALID | _FE_DIVBYZERO | _FE_OVERFLOW | _FE_UNDERFLOW
    if _LIBRARY is not None:
        llvm_binding.load_library_permanently(_LIBRARY)
    raised_flags = _fenv_call("fetestexcept")
    clear_flags = _fenv_call("feclearexcept")
    # NOTE: glibc raises the overflow and underflow flags in the x87 status
    # word (there is no SSE operation that raises either alone); fetestexcept,
    # which numpy and these loops read, reports both units' flags.
    raise_flags = _fenv_call("feraiseexcept")
else:  # pragma: no cover (no fenv here: the flags read as none)
    _FE_INVALID, _FE_DIVBYZERO, _FE_OVERFLOW, _FE_UNDERFLOW = 0, 0, 0, 0
    FENV_MASK = 0

    @numba.njit(cache=False)
    def raised_flags(mask):  # type: ignore[no-untyped-def]
        return 0

    @numba.njit(cache=False)
    def clear_flags(mask):  # type: ignore[no-untyped-def]
        return 0

    @numba.njit(cache=False)
    def raise_flags(mask):  # type: ignore[no-untyped-def]
        return 0


#: The ``<fenv.h>`` bit of each flag on this machine (0 where the flags cannot be read).
FENV_INVALID, FENV_DIVBYZERO = _FE_INVALID, _FE_DIVBYZERO
FENV_OVERFLOW, FENV_UNDERFLOW = _FE_OVERFLOW, _FE_UNDERFLOW


@numba.njit
def block_status(raised):  # type: ignore[no-untyped-def]
    """``<fenv.h>`` flags (as ``fetestexcept`` gives them) in numpy's bit order."""
    status = 0
    if raised & _FE_DIVBYZERO:
        status |= DIVIDE
    if raised & _FE_OVERFLOW:
        status |= OVERFLOW
    if raised & _FE_UNDERFLOW:
        status |= UNDERFLOW
    if raised & _FE_INVALID:
        status |= INVALID
    return status


_CONDITIONS = (
    (DIVIDE, "divide", "divide by zero"),
    (OVERFLOW, "over", "overflow"),
    (UNDERFLOW, "under", "underflow"),
    (INVALID, "invalid", "invalid value"),
)


def signal(status: int, name: str) -> None:
    """Act on IEEE flags as numpy does after a ufunc loop called ``name``.

    Parameters
    ----------
    status : int
        numpy-order flags (:data:`DIVIDE` | :data:`OVERFLOW` | ...), as the
        parallel loops return them.
    name : str
        The function named in the message (the cpu backend's ufunc name).

    Raises
    ------
    FloatingPointError
        For a flag whose ``np.errstate`` mode is ``"raise"`` (numpy's message).

    Examples
    --------
    >>> import numpy as np
    >>> with np.errstate(divide="raise"):
    ...     signal(DIVIDE, "cube_root_grad")
    Traceback (most recent call last):
    ...
    FloatingPointError: divide by zero encountered in cube_root_grad
    >>> with np.errstate(all="ignore"):
    ...     signal(DIVIDE | INVALID, "cube_root_grad")
    """
    if not status:
        return
    modes: dict[str, Any] = {**np.geterr()}
    for bit, key, text in _CONDITIONS:
        if not status & bit:
            continue
        mode = modes[key]
        message = f"{text} encountered in {name}"
        if mode == "ignore":
            continue
        if mode == "warn":
            warnings.warn(message, RuntimeWarning, stacklevel=3)
        elif mode == "raise":
            raise FloatingPointError(message)
        elif mode == "call":
            callback: Any = np.geterrcall()
            if callback is None:
                raise ValueError(
                    f"python callback specified for {text} (in {name}) but no function found."
                )
            callback(text, status)
        elif mode == "print":
            print(f"Warning: {message}", file=sys.stderr)
        elif mode == "log":
            log: Any = np.geterrcall()
            if log is None or not hasattr(log, "write"):
                raise ValueError(f"log specified for {text} (in {name}) but no object with write")
            log.write(f"Warning: {message}\n")
