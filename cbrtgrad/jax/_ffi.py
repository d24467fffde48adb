"""The XLA FFI route on the CPU: cbrtgrad's numba ``cfunc`` handlers registered with jax.

Each handler (:mod:`cbrtgrad.kernels.xla_ffi`) is compiled, or loaded from the
kernel cache, and registered as an FFI target under its own name the first
time a lowering needs it. The route is refused, with the reason kept for
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

from ..kernels import denormals

_LOCK = threading.Lock()
#: Registered target names by (kernel, dtype name, threaded); None where refused.
_TARGETS: dict[tuple[str, str, bool], str | None] = {}
_PROBLEMS: list[str] = []
_DTYPES = {"float32", "float64"}


def _headers_problem() -> str | None:
    """Why this jaxlib's FFI C API may not have the layout the handlers read, or None."""
    from ..kernels.xla_ffi import API_VERSION

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
            from ..kernels import xla_ffi

            handler = xla_ffi.handler(kernel, dtype, threaded)
            name = f"cbrtgrad_{kernel}_{dtype}{'_threads' if threaded else ''}"
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
