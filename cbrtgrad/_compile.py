"""Compile policy for every numba kernel in cbrtgrad, in one place.

NOTE: no fast-math flag is set. Even ``contract`` alone lets LLVM fuse a
product into a later subtraction (``x - y*a`` into one ``fma``), which would
count the rounding error of ``y*a`` twice in the error-free transformations of
:mod:`cbrtgrad.kernels.formulas` and break correct rounding. The formulas call
an exact ``fma`` where they need one.

NOTE: ``cache=False``: on-disk caching can crash under multiprocessing
(numba issue 4807) and ties cached machine code to the CPU it was built on.
Kernels are compiled lazily, on first use, instead.

NOTE: numba's target machine carries LLVM's ``prefer-256-bit`` tuning on
AVX-512 CPUs, so its loops use 256-bit ymm registers. The cube root is
compute-bound, and 512-bit zmm loops measured 1.5x faster in float64 here, so
:func:`preferred_vector_width` marks the kernels' own LLVM functions with
``"prefer-vector-width"="512"`` while they compile. It is a per-function
attribute: numba code elsewhere in the process keeps numba's default, which a
process-wide ``NUMBA_CPU_FEATURES`` setting would not.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any

from . import _config

#: Options passed to every ``numba.vectorize``/``numba.njit`` call.
CPU_OPTIONS: dict[str, Any] = {"fastmath": False, "cache": False}

#: Options for the scalar device functions the ufuncs are built from.
SCALAR_OPTIONS: dict[str, Any] = {"inline": "always", "fastmath": False, "cache": False}


def cpu_options() -> dict[str, Any]:
    """Return the numba options for CPU kernels, warning about risky overrides.

    ``CBRTGRAD_FASTMATH=1`` turns LLVM fast-math on (for experiments only):
    results are then no longer guaranteed correctly rounded, and special
    values may be wrong, so a ``RuntimeWarning`` says so.

    Returns
    -------
    dict
        Keyword arguments for ``numba.vectorize`` and ``numba.njit``.

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


def _mark_functions(ir_module: Any, attribute: str) -> None:
    for function in ir_module.functions:
        if not function.is_declaration:
            # NOTE: llvmlite's FunctionAttributes only accepts LLVM's keyword
            # attributes; a string attribute is written into the IR verbatim,
            # so it is added to the underlying set directly.
            set.add(function.attributes, attribute)


@contextlib.contextmanager
def preferred_vector_width(bits: int | None = None) -> Iterator[None]:
    """Compile the numba CPU code built inside this block for ``bits``-wide SIMD.

    Every LLVM function that numba adds while the block runs gets the
    ``prefer-vector-width`` attribute, which LLVM's loop vectoriser reads
    instead of the CPU's tuning default; on a CPU without 512-bit vectors it
    stays at the widest the CPU has. numba's global compiler lock is held for
    the whole block, so no other thread's compilation is affected.

    Parameters
    ----------
    bits : {256, 512}, optional
        Default: ``CBRTGRAD_VECTOR_WIDTH`` (512 unless set).

    Examples
    --------
    >>> import numba, numpy as np
    >>> with preferred_vector_width(512):
    ...     double = numba.vectorize(["float64(float64)"])(lambda v: 2.0 * v)
    >>> double(np.arange(3.0))
    array([0., 2., 4.])
    """
    width = _config.settings().vector_width if bits is None else bits
    if width not in (256, 512):
        raise ValueError(f"bits must be 256 or 512, got {width!r}")
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
            _mark_functions(ir_module, attribute)
            return original(self, ir_module)

        library_class.add_ir_module = add_ir_module  # type: ignore[method-assign]
        try:
            yield
        finally:
            library_class.add_ir_module = original  # type: ignore[method-assign]
