"""Compile policy for every numba kernel in cbrtgrad, in one place.

NOTE: no fast-math flag is set. Even ``contract`` alone lets LLVM fuse a
product into a later subtraction (``x - y*a`` into one ``fma``), which would
count the rounding error of ``y*a`` twice in the error-free transformations of
:mod:`cbrtgrad.kernels.formulas.scalar` and break correct rounding. The formulas call
an exact ``fma`` where they need one.

NOTE: each kernel is compiled on first use, for the one dtype a call needs
(:func:`compile_cfunc`, :func:`compile_njit`), with numba's own
``cache=True``; :class:`cbrtgrad.build.locator.KernelLocator`, given to numba through
its documented locator hook, puts it in the folder of this process's key (the
CPU, the settings, the versions and the kernels' source), since numba's own
locators key an entry on the defining file's time and size only, not on the
modules the kernel calls nor on ``CBRTGRAD_VECTOR_WIDTH``. Each cached
function is compiled for one signature, with an index of its own (numba
issue 4807; see :mod:`cbrtgrad.build.cache`). numba's cache class is replaced by
:class:`cbrtgrad.build.cache_entries.KernelCache`, its own but that a cache file
that fails to load is removed, named in a warning, and compiled again.

NOTE: each loop's SIMD shape (its vector width and interleave) is chosen from
the host CPU's vector ISA by :mod:`cbrtgrad.build.simd`, whose names this
module gives too.
"""

from __future__ import annotations

import threading
import warnings
from typing import Any

from .. import _config
from . import locator as _locator
from .simd import (  # noqa: F401 (the compile policy's names, given here too)
    INTERLEAVE_BY_ISA,
    LoopShape,
    compiling_for,
    default_vector_width,
    loop_shape,
    preferred_vector_width,
)

#: Options passed to every ``numba.cfunc``/``numba.njit`` loop. NOTE:
#: ``error_model="numpy"``: a division by zero is IEEE (inf or nan, numpy's
#: warning), as in numpy's own loops; numba's default would branch to raise
#: ZeroDivisionError at every division, which also stops LLVM vectorising.
CPU_OPTIONS: dict[str, Any] = {"fastmath": False, "cache": False, "error_model": "numpy"}

#: Options for the scalar formulas and block functions the loops call.
SCALAR_OPTIONS: dict[str, Any] = {"inline": "always", **CPU_OPTIONS}

#: Options for the scalar formulas (``kernels/formulas*.py``,
#: ``kernels/formulas/exact_rounding.py``) on the CPU: compiled out of line by numba,
#: once per process and signature, and inlined by LLVM into the loops that
#: call them (they take and return scalars only, so a call costs no reference
#: counts, and LLVM still vectorises the loops around them). NOTE: numba's
#: ``inline="always"`` typed each formula on its own and once more inside
#: every caller, a longer first compile for the same speed and bits
#: (docs/cache.md, "What a kernel costs to compile"). Given to
#: ``kernels/internal_jit.numba_only`` (no Python or C entry), as are
#: :data:`BLOCK_OPTIONS`.
FORMULA_OPTIONS: dict[str, Any] = {"inline": "never", **CPU_OPTIONS}

#: Options for the block loops a kernel calls once per call
#: (``forward_block_f64``, ``grad_f64_at`` and the like): not inlined by
#: numba. NOTE: numba's ``inline="always"`` types a function on its own and
#: then once more inside every caller, so each layer above the formulas
#: multiplied the compile; out of line, each is compiled once per process and
#: signature, at the SIMD shape it was first compiled at: the ufunc's, as
#: every kernel that calls it (the block entries, cbrtgrad.numba's blocks)
#: is compiled at its ufunc's shape. What runs once per block of 1024 elements
#: (``_kept``, the passes, the dtype dispatch) stays inlined: a call passing
#: arrays costs reference counts (atomic operations) that numba elides only
#: within one function, and out of line they slow the float32 gradient. Out
#: of line the layers above cut the float64 gradient's and the fused parallel
#: loop's first compiles by a third or more, at the same speed (docs/cache.md).
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
    >>> from cbrtgrad.kernels.cpu import catalog as cpu
    >>> _ = cpu.ufunc("cube_root", np.float64)(np.ones(2))
    >>> built_kernels()["ufunc cube_root float64"] in ("compiled", "loaded")
    True
    """
    with _BUILT_LOCK:
        return dict(_BUILT)


def record(name: str, loaded: bool) -> None:
    """Enter ``name`` in :func:`built_kernels` as loaded from the cache, or compiled.

    For what is built outside numba's compile (the MLX bridge's C++ primitive).
    A kernel built in parts (a ufunc's loop and its block entry) stays
    ``"compiled"`` once a part of it was.

    Examples
    --------
    >>> record("example kernel", loaded=True)
    >>> built_kernels()["example kernel"]
    'loaded'
    """
    with _BUILT_LOCK:
        if not (loaded and _BUILT.get(name) == "compiled"):
            _BUILT[name] = "loaded" if loaded else "compiled"


def is_cached(py_func: Any, tag: str) -> bool:
    """Whether the kernel cache holds ``py_func`` for ``tag``: building it then compiles nothing.

    Examples
    --------
    >>> is_cached(lambda: None, "float64")
    False
    """
    return _locator.has_entry(py_func, tag)


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
    >>> from cbrtgrad.kernels.cpu import ufuncs as cpu_ufuncs, ufunc_loops
    >>> shape = cpu_ufuncs.ufunc_loop_shape("float32")
    >>> loop = compile_cfunc(cpu_ufuncs.forward_loop_f32, ufunc_loops.LOOP_SIGNATURE,
    ...                      shape, "ufunc cube_root float32", "float32")
    >>> loop.address > 0
    True
    """
    from numba.core import sigutils
    from numba.core.ccallback import CFunc

    marked = _locator.kernel_function(py_func, tag)
    options = {key: value for key, value in cpu_options().items() if key != "cache"}
    with compiling_for(shape):
        # What numba.cfunc does, with cbrtgrad's cache in place of numba's
        # own (_cache_entries: a damaged entry is compiled again, not raised).
        compiled = CFunc(marked or py_func, sigutils.normalize_signature(signature), {}, options)
        _attach_cache(compiled, marked)
        compiled.compile()
    record(name, compiled.cache_hits > 0)
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
    >>> from cbrtgrad.kernels.cpu import blocks
    >>> copy = compile_njit(blocks._copy.py_func, "void(float64[::1], float64[::1])",
    ...                     loop_shape(256), "copy float64", "float64")
    >>> y = np.zeros(2); copy(np.array([8.0, -27.0]), y); y
    array([  8., -27.])
    """
    import numba

    marked = _locator.kernel_function(py_func, tag)
    dispatcher = numba.njit(**{**cpu_options(), **options, "cache": False})(marked or py_func)
    _attach_cache(dispatcher, marked)
    return _compile_once(dispatcher, signature, shape, name, out_of_line=out_of_line)


def compile_dispatcher(
    dispatcher: Any, signature: Any, shape: LoopShape, name: str, tag: str, *, out_of_line: bool
) -> Any:
    """:func:`compile_njit` for a numba function that exists already (its options its own).

    For a function other numba functions name as a global: they call this
    dispatcher, compiled (or loaded from the cache) here.

    Examples
    --------
    >>> import numba
    >>> from cbrtgrad.kernels.cpu import user_loops
    >>> rare = compile_dispatcher(user_loops._hard_f64, "float64(float64)", LoopShape(0, 0),
    ...                           "user rare _hard_f64", "float64", out_of_line=True)
    >>> rare is user_loops._hard_f64, float(rare(-27.0))
    (True, -3.0)
    """
    from numba.core import sigutils

    args, _ = sigutils.normalize_signature(signature)
    if tuple(args) in dispatcher.overloads:
        return dispatcher  # compiled (and frozen) before: compile() would refuse
    marked = _locator.kernel_function(dispatcher.py_func, tag, copy=False)
    _attach_cache(dispatcher, marked)
    return _compile_once(dispatcher, signature, shape, name, out_of_line=out_of_line)


def _attach_cache(compiled: Any, marked: Any) -> None:
    # numba's cache=True, through a cache that compiles a damaged entry
    # again; none where the cache is off (``marked`` None).
    if marked is not None:
        from . import cache_entries as _cache_entries

        _cache_entries.attach(compiled, marked)


def _compile_once(
    dispatcher: Any, signature: Any, shape: LoopShape, name: str, *, out_of_line: bool
) -> Any:
    with compiling_for(shape, dispatcher.py_func if out_of_line else None):
        dispatcher.compile(signature)
    dispatcher.disable_compile()
    record(name, sum(dispatcher.stats.cache_hits.values()) > 0)
    return dispatcher
