"""Compile policy for every numba kernel in cbrtgrad, in one place.

NOTE: no fast-math flag is set. Even ``contract`` alone lets LLVM fuse a
product into a later subtraction (``x - y*a`` into one ``fma``), which would
count the rounding error of ``y*a`` twice in the error-free transformations of
:mod:`cbrtgrad.kernels.formulas` and break correct rounding. The formulas call
an exact ``fma`` where they need one.

NOTE: each kernel is compiled on first use, for the one dtype a call needs
(:func:`compile_cfunc`, :func:`compile_njit`), and kept in the on-disk cache
of :mod:`cbrtgrad._cache` (keyed on the CPU, the settings, the versions and
the kernels' source). numba's own ``cache=True`` is not used: its locator
keys an entry on the calling file's text only, not on the modules the kernel
calls nor on ``CBRTGRAD_VECTOR_WIDTH``, and keeps all signatures of a
function in one index, which two processes saving at once can mix up (numba
issue 4807; see :mod:`cbrtgrad._cache`).

NOTE: the SIMD shape of each loop is chosen from the host CPU's vector ISA
(:mod:`cbrtgrad._isa`), never from one machine's tuning: :func:`loop_shape`
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
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from . import _cache, _config, _isa

#: Options passed to every ``numba.cfunc``/``numba.njit`` loop. NOTE:
#: ``error_model="numpy"``: a division by zero is IEEE (inf or nan, numpy's
#: warning), as in numpy's own loops; numba's default would branch to raise
#: ZeroDivisionError at every division, which also stops LLVM vectorising.
CPU_OPTIONS: dict[str, Any] = {"fastmath": False, "cache": False, "error_model": "numpy"}

#: Options for the scalar formulas and block functions the loops call.
SCALAR_OPTIONS: dict[str, Any] = {"inline": "always", **CPU_OPTIONS}

#: Options for the block loops a kernel calls once per call
#: (``forward_block_f64``, ``grad_block``, ``grad_block_flags`` and the like):
#: not inlined by numba. NOTE: numba's ``inline="always"`` types a function
#: on its own and then once more inside every caller, so each layer above the
#: formulas multiplied the compile; out of line, each is compiled once per
#: process and signature, and every kernel links it, at the SIMD shape it
#: was compiled at: ``cpu_ufuncs.compile_shared_blocks`` compiles them first,
#: at the ufunc's shape, so that it is not the shape of whichever kernel a
#: process compiled first. What runs once per block of 1024 elements
#: (``_kept``, the passes, the dtype dispatch) stays inlined: a call passing
#: arrays costs reference counts (atomic operations) that numba elides only
#: within one function, and out of line they cost the float32 gradient 7 %
#: (measured). Measured on an AMD Zen 4, empty cache, one process each: the
#: float64 gradient's ufunc loop 16.4 s to 9.9 s, the float64 fused parallel
#: loop 24.3 s to 14.9 s, at the same speed (docs/cache.md).
BLOCK_OPTIONS: dict[str, Any] = {"inline": "never", **CPU_OPTIONS}


def cpu_options() -> dict[str, Any]:
    """Return the numba options for CPU kernels, warning about risky overrides.

    ``CBRTGRAD_FASTMATH=1`` turns LLVM fast-math on (for experiments only):
    results are then no longer guaranteed correctly rounded, and special
    values may be wrong, so a ``RuntimeWarning`` says so.

    Returns
    -------
    dict
        Keyword arguments for ``numba.cfunc`` and ``numba.njit``.

    Examples
    --------
    >>> cpu_options()["fastmath"]
    False
    """
    options = dict(CPU_OPTIONS)
    if _config.settings().fastmath:
        warnings.warn(
            "CBRTGRAD_FASTMATH is set: cbrtgrad kernels are compiled with LLVM fast-math, "
            "which breaks correct rounding and special values",
            RuntimeWarning,
            stacklevel=2,
        )
        options["fastmath"] = True
    return options


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
        Default: the host's (:func:`cbrtgrad._isa.host_isa`).
    interleave : dict, optional
        ``{ISA name: count}`` for a loop measured best at another interleave
        than :data:`INTERLEAVE_BY_ISA` gives on that ISA.

    Returns
    -------
    LoopShape

    Examples
    --------
    >>> from cbrtgrad._isa import classify
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
    >>> from cbrtgrad.kernels import user_loops
    >>> _mangled_prefix(user_loops._hard_f64.py_func)
    '_ZN8cbrtgrad7kernels10user_loops9_hard_f64'
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
_BUILT: dict[str, str] = {}
_BUILT_LOCK = threading.Lock()


def built_kernels() -> dict[str, str]:
    """The kernels this process has compiled or loaded so far, and which of the two.

    Returns
    -------
    dict of str to str
        ``{"ufunc cube_root float64": "compiled", ...}``, in build order.

    Examples
    --------
    >>> import numpy as np
    >>> from cbrtgrad.kernels import cpu
    >>> _ = cpu.ufunc("cube_root", np.float64)(np.ones(2))
    >>> built_kernels()["ufunc cube_root float64"] in ("compiled", "loaded")
    True
    """
    with _BUILT_LOCK:
        return dict(_BUILT)


def _record(name: str, loaded: bool) -> None:
    with _BUILT_LOCK:
        _BUILT[name] = "loaded" if loaded else "compiled"


def is_cached(py_func: Any, tag: str) -> bool:
    """Whether the kernel cache holds ``py_func`` for ``tag``: building it then compiles nothing.

    Examples
    --------
    >>> is_cached(lambda: None, "float64")
    False
    """
    cache = _cache.cache_for(py_func, tag)
    return cache is not None and bool(cache.has_entry())


def compile_cfunc(py_func: Any, signature: Any, shape: LoopShape, name: str, tag: str) -> Any:
    """Compile (or load from the cache) one C callback, such as a ufunc's inner loop.

    Parameters
    ----------
    py_func : function
        A module-level function (a closure's cells would be part of numba's
        cache key, and a numba function in them pickles differently in each
        process, so it would never be found again).
    signature : numba signature
        Its one signature.
    shape : LoopShape
        The SIMD shape it is compiled with.
    name : str
        What :func:`built_kernels` and ``cbrtgrad info`` call it.
    tag : str
        Names the signature in the cache's file names (``float64``).

    Returns
    -------
    numba.core.ccallback.CFunc

    Examples
    --------
    >>> from cbrtgrad.kernels import cpu_ufuncs, ufunc_loops
    >>> shape = cpu_ufuncs.ufunc_loop_shape("float32")
    >>> loop = compile_cfunc(cpu_ufuncs.forward_loop_f32, ufunc_loops.LOOP_SIGNATURE,
    ...                      shape, "ufunc cube_root float32", "float32")
    >>> loop.address > 0
    True
    """
    from numba.core import sigutils
    from numba.core.ccallback import CFunc

    options = {k: v for k, v in cpu_options().items() if k != "cache"}
    compiled: Any = CFunc(py_func, sigutils.normalize_signature(signature), {}, options)
    cache = _cache.cache_for(py_func, tag)
    if cache is not None:
        compiled._cache = cache
    with compiling_for(shape):
        compiled.compile()
    _record(name, compiled._cache_hits > 0)
    return compiled


def compile_njit(
    py_func: Any,
    signature: Any,
    shape: LoopShape,
    name: str,
    tag: str,
    *,
    out_of_line: bool = False,
    **options: Any,
) -> Any:
    """Compile (or load from the cache) one numba function for one signature, then freeze it.

    Parameters
    ----------
    py_func : function
        A module-level function (see :func:`compile_cfunc`).
    signature : str or numba signature
        Its one signature.
    shape : LoopShape
        The SIMD shape it is compiled with.
    name, tag : str
        As for :func:`compile_cfunc`.
    out_of_line : bool
        Mark its own compiled code ``noinline`` (:func:`preferred_vector_width`).
    **options
        More numba options (``parallel=True``).

    Returns
    -------
    numba dispatcher
        Compiled for ``signature`` only.

    Examples
    --------
    >>> import numpy as np
    >>> from cbrtgrad.kernels import blocks
    >>> copy = compile_njit(blocks._copy.py_func, "void(float64[::1], float64[::1])",
    ...                     loop_shape(256), "copy float64", "float64")
    >>> y = np.zeros(2); copy(np.array([8.0, -27.0]), y); y
    array([  8., -27.])
    """
    import numba

    dispatcher = numba.njit(**{**cpu_options(), **options})(py_func)
    return compile_dispatcher(dispatcher, signature, shape, name, tag, out_of_line=out_of_line)


def compile_dispatcher(
    dispatcher: Any, signature: Any, shape: LoopShape, name: str, tag: str, *, out_of_line: bool
) -> Any:
    """:func:`compile_njit` for a numba function that exists already (its options its own).

    For a function other numba functions name as a global: they call this
    dispatcher, compiled (or loaded from the cache) here.

    Examples
    --------
    >>> import numba
    >>> from cbrtgrad.kernels import user_loops
    >>> rare = compile_dispatcher(user_loops._hard_f64, "float64(float64)", LoopShape(0, 0),
    ...                           "user rare _hard_f64", "float64", out_of_line=True)
    >>> rare is user_loops._hard_f64, float(rare(-27.0))
    (True, -3.0)
    """
    from numba.core import sigutils

    args, _ = sigutils.normalize_signature(signature)
    if tuple(args) in dispatcher.overloads:
        return dispatcher  # compiled (and frozen) before: compile() would refuse
    cache = _cache.cache_for(dispatcher.py_func, tag)
    if cache is not None:
        dispatcher._cache = cache
    with compiling_for(shape, dispatcher.py_func if out_of_line else None):
        dispatcher.compile(signature)
    dispatcher.disable_compile()
    _record(name, sum(dispatcher._cache_hits.values()) > 0)
    return dispatcher
