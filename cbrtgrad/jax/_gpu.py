"""jax arrays on an NVIDIA GPU, outside ``jax.jit``: cbrtgrad's cuda kernels through DLPack.

NOTE: this has not run on a GPU (written and tested on a CPU-only jaxlib;
docs/jax.md says what has and has not run). It is kept small on purpose:

* Only concrete float32/float64 ``jax.Array``\\ s on one CUDA device, when CuPy
  is installed: the operands are shared with CuPy through DLPack (no copy),
  the cuda backend computes on CuPy's current stream and its CuPy result is
  shared back with ``jax.dlpack.from_dlpack`` (no copy). The cuda backend
  takes ``g`` and ``y`` of one shape, which the primitives guarantee.
* Everything else returns None, and the caller runs the jitted primitive:
  under ``jax.jit`` on a GPU that is the ``pure_callback`` lowering, which
  copies the operands to the host and the result back (cbrtgrad's CPU
  kernels; an XLA FFI handler for CUDA would have to launch numba-cuda
  kernels from C, which numba cannot).
* A failure in the CuPy route is not hidden: it is raised, naming the route.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np

_NATIVE = {np.dtype(np.float32), np.dtype(np.float64)}


def _on_one_gpu(value: Any) -> bool:
    devices = getattr(value, "devices", None)
    if devices is None or getattr(value, "is_fully_addressable", True) is False:
        return False
    try:
        found = devices()
    except Exception:  # noqa: BLE001 - a tracer or an abstract value: not a concrete array
        return False
    return len(found) == 1 and next(iter(found)).platform in ("gpu", "cuda")


def eager(kernel: str, *arrays: Any) -> Any:
    """``kernel`` (``"forward"`` or ``"grad"``) on GPU arrays through CuPy, or None.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> eager("forward", jnp.ones(2)) is None  # a CPU array: the caller's route
    True
    """
    if not all(_on_one_gpu(a) for a in arrays):
        return None
    if any(np.dtype(a.dtype) not in _NATIVE for a in arrays):
        return None
    if importlib.util.find_spec("cupy") is None:
        return None
    import cupy
    import jax

    from .. import api

    operands = [cupy.from_dlpack(a) for a in arrays]
    try:
        if kernel == "forward":
            result = api.cbrt(operands[0], backend="cuda")
        else:
            result = api.cbrt_grad(operands[0], operands[1], backend="cuda")
    except Exception as exc:
        raise RuntimeError(
            f"cbrtgrad.jax: the cuda backend failed on jax GPU arrays shared through DLPack "
            f"({type(exc).__name__}: {exc})"
        ) from exc
    return jax.dlpack.from_dlpack(result)
