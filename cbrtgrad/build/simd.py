"""The SIMD shape of every kernel loop: its vector width and interleave, per CPU.

The SIMD shape of each loop is chosen from the host CPU's vector ISA
(:mod:`cbrtgrad.build.isa`), never from one machine's tuning: :func:`loop_shape`
caps a loop's preferred width at what the CPU has (the 512-bit attribute never
reaches a CPU without AVX-512) and picks the interleave count. numba's target
machine carries LLVM's ``prefer-256-bit`` tuning on AVX-512 CPUs, so
:func:`preferred_vector_width` marks the kernels' own LLVM functions with
``"prefer-vector-width"`` while they compile: a per-function attribute, so
numba code elsewhere in the process keeps numba's default, which a
process-wide ``NUMBA_CPU_FEATURES`` setting would not. The kernels are
latency-bound (a chain of about 30 dependent floating-point operations per
element), so two vector iterations in flight per loop trip
(``-force-vector-interleave=2``) let an out-of-order core with a small
scheduler overlap them; docs/kernels.md gives the measured effect.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .. import _config
from . import isa as _isa


def default_vector_width() -> int:
    """The SIMD width in bits the kernels may use (``CBRTGRAD_VECTOR_WIDTH``, default 512).

    Returns
    -------
    int
        256 or 512.

    Examples
    --------
    >>> default_vector_width() in (256, 512)
    True
    """
    return _config.settings().vector_width


#: Interleave count of the kernels' vector loops, per vector ISA (0: LLVM's
#: cost model decides). Measured on AVX2 (docs/kernels.md); other ISAs keep
#: LLVM's choice until measured there.
INTERLEAVE_BY_ISA = {"AVX2": 2, "AVX": 2}


@dataclass(frozen=True)
class LoopShape:
    """The SIMD shape one kernel loop is compiled with.

    Attributes
    ----------
    width : int
        The vector width in bits LLVM's vectoriser is asked to prefer (0: the
        target's default, for CPUs without vector registers).
    interleave : int
        Vector iterations per loop trip (0: LLVM's cost model decides).
    """

    width: int
    interleave: int

    def describe(self) -> str:
        """``"256-bit x2"``-style text for ``cbrtgrad info``.

        Examples
        --------
        >>> LoopShape(256, 2).describe()
        '256-bit, interleave 2'
        >>> LoopShape(512, 0).describe()
        '512-bit, interleave by LLVM'
        """
        interleave = f"interleave {self.interleave}" if self.interleave else "interleave by LLVM"
        width = f"{self.width}-bit" if self.width else "target default width"
        return f"{width}, {interleave}"


def loop_shape(
    wanted_width: int,
    isa: _isa.HostIsa | None = None,
    interleave: dict[str, int] | None = None,
) -> LoopShape:
    """The shape of a loop that would like ``wanted_width``-bit vectors on this CPU.

    The width is capped by ``CBRTGRAD_VECTOR_WIDTH`` and by the widest vector
    registers the CPU has, so a 512-bit preference becomes 256 bits on an
    AVX2 CPU and 128 on NEON.

    Parameters
    ----------
    wanted_width : int
        The width the loop was measured best at on a CPU that has it.
    isa : HostIsa, optional
        Default: the host's (:func:`cbrtgrad.build.isa.host_isa`).
    interleave : dict, optional
        ``{ISA name: count}`` for a loop measured best at another interleave
        than :data:`INTERLEAVE_BY_ISA` gives on that ISA.

    Returns
    -------
    LoopShape

    Examples
    --------
    >>> from cbrtgrad.build.isa import classify
    >>> avx2 = classify("znver3", {"avx2": True, "fma": True}, "x86_64")
    >>> loop_shape(512, avx2)
    LoopShape(width=256, interleave=2)
    >>> loop_shape(512, avx2, interleave={"AVX2": 3})
    LoopShape(width=256, interleave=3)
    >>> loop_shape(512, classify("apple-m1", {"neon": True}, "arm64"), {"AVX2": 3})
    LoopShape(width=128, interleave=0)
    """
    isa = _isa.host_isa() if isa is None else isa
    width = min(wanted_width, default_vector_width(), isa.vector_bits)
    count = {**INTERLEAVE_BY_ISA, **(interleave or {})}.get(isa.name, 0)
    return LoopShape(width, count)


def _mangled_prefix(py_func: Any) -> str:
    """The start of the symbol numba gives ``py_func``'s compiled code (Itanium mangling).

    Examples
    --------
    >>> from cbrtgrad.kernels.cpu import user_loops
    >>> _mangled_prefix(user_loops._hard_f64.py_func)
    '_ZN8cbrtgrad7kernels3cpu10user_loops9_hard_f64'
    """
    from numba.core import itanium_mangler

    parts = f"{py_func.__module__}.{py_func.__qualname__}".split(".")
    return "_ZN" + "".join(itanium_mangler.mangle_identifier(part) for part in parts)


def _mark_functions(ir_module: Any, attribute: str, prefix: str = "") -> None:
    for function in ir_module.functions:
        if not function.is_declaration and function.name.startswith(prefix):
            # NOTE: llvmlite's FunctionAttributes only accepts LLVM's keyword
            # attributes; a string attribute is written into the IR verbatim,
            # so it is added to the underlying set directly.
            set.add(function.attributes, attribute)


def _set_interleave(count: int) -> None:
    import llvmlite.binding as llvm

    # A process-wide LLVM option, read when the loop vectoriser runs: set
    # only while numba's compiler lock is held, and put back to 0 (LLVM's
    # default, the cost model decides) before the lock is released.
    llvm.set_option("cbrtgrad", f"-force-vector-interleave={count}")


@contextlib.contextmanager
def preferred_vector_width(
    bits: int | None = None, interleave: int = 0, out_of_line: Any = None
) -> Iterator[None]:
    """Compile the numba CPU code built inside this block for ``bits``-wide SIMD.

    Every LLVM function that numba adds while the block runs gets the
    ``prefer-vector-width`` attribute, which LLVM's loop vectoriser reads
    instead of the CPU's tuning default; on a CPU without 512-bit vectors it
    stays at the widest the CPU has. numba's global compiler lock is held for
    the whole block, so no other thread's compilation is affected.

    Parameters
    ----------
    bits : {128, 256, 512}, optional
        Default: :func:`loop_shape` of 512 bits (``CBRTGRAD_VECTOR_WIDTH`` and
        the host's widest vectors cap it).
    interleave : int, optional
        Vector iterations per loop trip; 0 (the default) leaves it to LLVM.
    out_of_line : function, optional
        Also mark this Python function's compiled code ``noinline``: numba
        code that calls it (a user's, through :mod:`cbrtgrad.numba`) calls it
        instead of inlining it, which keeps the caller's loop small and its
        compile short (LLVM would otherwise optimise an inlined kernel once
        more in every caller). NOTE: that function only, by its mangled name:
        the functions it calls may be compiled here for the first time, and
        the library's other kernels link the same compiled code; a formula
        marked ``noinline`` would be a call per element in every vector loop.

    Examples
    --------
    >>> import numba, numpy as np
    >>> def twice(x, y):
    ...     for i in range(x.shape[0]):
    ...         y[i] = 2.0 * x[i]
    >>> with preferred_vector_width(256, interleave=2):
    ...     double = numba.njit("void(float64[::1], float64[::1])")(twice)
    >>> y = np.empty(3); double(np.arange(3.0), y); y
    array([0., 2., 4.])
    """
    width = loop_shape(512).width if bits is None else bits
    if width not in (0, 128, 256, 512):
        raise ValueError(f"bits must be 128, 256 or 512, got {width!r}")
    if not isinstance(interleave, int) or not 0 <= interleave <= 16:
        raise ValueError(f"interleave must be an integer from 0 to 16, got {interleave!r}")
    from numba.core import codegen
    from numba.core.compiler_lock import global_compiler_lock

    attribute = f'"prefer-vector-width"="{width}"'
    library_class = getattr(codegen, "CPUCodeLibrary", None)
    if library_class is None or not hasattr(library_class, "add_ir_module"):
        # A numba whose internals moved: compile at numba's default width
        # (correct, slower) rather than fail; the vector-width tests catch it.
        warnings.warn(
            "cbrtgrad: this numba has no CPUCodeLibrary.add_ir_module; kernels are compiled "
            "at numba's default SIMD width",
            RuntimeWarning,
            stacklevel=3,
        )
        yield
        return
    with global_compiler_lock:
        original = library_class.add_ir_module

        def add_ir_module(self: Any, ir_module: Any) -> Any:
            if width:
                _mark_functions(ir_module, attribute)
            if out_of_line is not None:
                _mark_functions(ir_module, "noinline", _mangled_prefix(out_of_line))
            return original(self, ir_module)

        library_class.add_ir_module = add_ir_module  # type: ignore[method-assign]
        if interleave:
            _set_interleave(interleave)
        try:
            yield
        finally:
            library_class.add_ir_module = original  # type: ignore[method-assign]
            if interleave:
                _set_interleave(0)


def compiling_for(
    shape: LoopShape, out_of_line: Any = None
) -> contextlib.AbstractContextManager[None]:
    """:func:`preferred_vector_width` for one :class:`LoopShape`.

    Examples
    --------
    >>> with compiling_for(loop_shape(512)):
    ...     pass
    """
    return preferred_vector_width(shape.width, shape.interleave, out_of_line)


#: How each kernel this process built got here: ``{name: "compiled" or
#: "loaded"}`` (``loaded``: from the on-disk cache), in build order.
