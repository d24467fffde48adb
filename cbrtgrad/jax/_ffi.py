"""The XLA FFI route on the CPU: cbrtgrad's numba ``cfunc`` handlers registered with jax.

Each handler (:mod:`cbrtgrad.kernels.handlers.xla_ffi`) is compiled, or loaded from the
kernel cache, and registered as an FFI target under its own name the first
time a lowering needs it. The one-thread handlers, the only ones an exported
program names, are registered at ``import cbrtgrad.jax`` too, where the kernel
cache holds them (:func:`register_cached`): a program made by ``jax.export``
and deserialized in another process calls them by name without lowering
anything of cbrtgrad's, so nothing else would register them there. Their
addresses are all that registering needs, but an address means a compiled
handler: loading one from the cache costs milliseconds (after numba's own
first-use set-up, which any first call pays), compiling one seconds, so
import loads and never compiles (:func:`register_all` does both). The route
is refused, with the reason kept for
:func:`cbrtgrad.jax.route`, where the handlers' reading of the call frame
cannot be trusted: a jaxlib whose FFI headers have another major version than
the one the offsets are from, a CPU other than x86-64 or ARM64 (whose
subnormal mode the handlers cannot set), or a handler that fails to build or
register. The lowering then takes the ``pure_callback`` route.
"""

from __future__ import annotations

import ctypes
import re
import threading
from pathlib import Path
from typing import Any

import jax
import numpy as np

from ..kernels.cpu import denormals

_LOCK = threading.Lock()
#: Registered target names by (kernel, dtype name, threaded); None where refused.
_TARGETS: dict[tuple[str, str, bool], str | None] = {}
_PROBLEMS: list[str] = []
_DTYPES = {"float32", "float64"}


def _headers_problem() -> str | None:
    """Why this jaxlib's FFI C API may not have the layout the handlers read, or None."""
    from ..kernels.handlers.xla_ffi import API_VERSION

    if not denormals.AVAILABLE:
        return "the XLA FFI handlers set the subnormal mode of x86-64 and ARM64 CPUs only"
    try:
        header = Path(jax.ffi.include_dir()) / "xla" / "ffi" / "api" / "c_api.h"
        text = header.read_text(encoding="utf-8")
    except (AttributeError, OSError):
        return None  # no headers shipped: the metadata query is XLA's own check
    found = re.search(r"#define XLA_FFI_API_MAJOR (\d+)", text)
    if found is not None and int(found.group(1)) != API_VERSION[0]:
        return (
            f"jaxlib's XLA FFI API is version {found.group(1)}.x; cbrtgrad's handlers read "
            f"version {API_VERSION[0]}.x"
        )
    return None


#: The handlers an exported program can name, by (kernel, dtype): the one-thread
#: ones (an export lowers to them whatever CBRTGRAD_JAX_PARALLEL_MIN says).
EXPORTED = (
    ("forward", "float32"),
    ("forward", "float64"),
    ("grad", "float32"),
    ("grad", "float64"),
)


def name_of(kernel: str, dtype: str, threaded: bool) -> str:
    """The FFI target name of one handler (registered or not).

    Examples
    --------
    >>> name_of("grad", "float64", True)
    'cbrtgrad_grad_float64_threads'
    """
    return f"cbrtgrad_{kernel}_{dtype}{'_threads' if threaded else ''}"


def target(kernel: str, dtype: Any, threaded: bool) -> str | None:
    """The FFI target name of one handler, registered on first use; None where refused.

    Examples
    --------
    >>> target("forward", "float32", False)
    'cbrtgrad_forward_float32'
    >>> target("forward", "bfloat16", False) is None  # half precision takes the callback
    True
    """
    name = np.dtype(dtype).name
    if name not in _DTYPES:
        return None
    key = (kernel, name, bool(threaded))
    if key in _TARGETS:
        return _TARGETS[key]  # NOTE: hot path: every lowering
    with _LOCK:
        if key not in _TARGETS:
            _TARGETS[key] = _register(*key)
        return _TARGETS[key]


def _register(kernel: str, dtype: str, threaded: bool) -> str | None:
    problem = _headers_problem()
    if problem is None:
        try:
            from ..kernels.handlers import xla_ffi

            handler = xla_ffi.handler(kernel, dtype, threaded)
            name = name_of(kernel, dtype, threaded)
            capsule = jax.ffi.pycapsule(ctypes.c_void_p(handler.address))
            jax.ffi.register_ffi_target(name, capsule, platform="cpu")
            return name
        except Exception as exc:  # noqa: BLE001 - any failure means the other route
            problem = f"the XLA FFI handler failed: {type(exc).__name__}: {exc}"
    if problem not in _PROBLEMS:
        _PROBLEMS.append(problem)
    return None


def problem() -> str | None:
    """Why the FFI route was refused in this process (the first reason), or None."""
    return _PROBLEMS[0] if _PROBLEMS else None


def in_cache(kernel: str, dtype: str) -> bool:
    """Whether the kernel cache holds the one-thread handler and the block entry it links.

    Both are loaded, never compiled, when this is True. False when the
    cache is off.
    """
    from ..build import compile as _compile
    from ..kernels.cpu.ufuncs import ENTRIES
    from ..kernels.handlers.xla_ffi import HANDLERS

    # NOTE: the tags xla_ffi.handler and cpu_ufuncs.block_entry compile them
    # under: the dtype's name (a threaded handler's adds "_threads").
    functions = (HANDLERS[(kernel, dtype, False)], ENTRIES[kernel][dtype][0])
    return all(_compile.is_cached(f, dtype) for f in functions)


def register_cached() -> tuple[str, ...]:
    """Register each handler an exported program can name that the kernel cache holds.

    What ``import cbrtgrad.jax`` runs: loading from the cache, never
    compiling (a cold cache registers nothing here; the first lowering, or
    :func:`register_all`, compiles). The route's refusal, if any, is kept for
    :func:`cbrtgrad.jax.route`.

    Returns
    -------
    tuple of str
        The names registered (now or before).
    """
    if _headers_problem() is not None:
        return ()
    names = (target(k, d, False) for k, d in EXPORTED if in_cache(k, d))
    return tuple(n for n in names if n is not None)


def register_all() -> tuple[str, ...]:
    """Register every handler an exported program can name, compiling those the cache lacks.

    Returns
    -------
    tuple of str
        The names registered; empty where the route is refused here.
    """
    names = (target(k, d, False) for k, d in EXPORTED)
    return tuple(n for n in names if n is not None)
