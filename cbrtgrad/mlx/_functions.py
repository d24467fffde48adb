"""The public functions of :mod:`cbrtgrad.mlx`: ``cbrt`` and ``cbrt_grad``, and how they run.

Each is an ``mx.custom_function`` around one of cbrtgrad's two MLX primitives
(``cbrtgrad/mlx/_primitive.cpp``: ``CubeRoot`` and ``CubeRootGrad``), whose
CPU evaluation calls cbrtgrad's numba kernels on the arrays' memory
(:mod:`cbrtgrad.kernels.handlers.buffer_loops`). The custom function's ``vjp`` and
``jvp`` are the correctly rounded gradient kernel itself, so ``mx.grad`` of
``cbrt(x).sum()`` is ``cbrtgrad.cbrt_grad(1, y)`` bit for bit; the primitives
have MLX's element-wise ``vmap`` rule, so ``mx.vmap`` and ``mx.compile`` trace
them like any MLX op.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import mlx.core as mx
import numpy as np

from .. import _config
from ..backends import _registry
from ..kernels.handlers import buffer_loops
from . import _build
from ._operands import FLOATS, as_float, gradient_operands


@lru_cache(maxsize=1)
def _threaded() -> bool:
    # numba's threads only under a threading layer that two threads may
    # launch at once (MLX's stream thread and the caller's): OpenMP or TBB,
    # not workqueue (/work/shared/REFERENCE.md: it is not thread-safe).
    import numba
    from numba.np.ufunc.parallel import _launch_threads

    _launch_threads()
    return str(numba.threading_layer()) in ("omp", "tbb")


#: Loop addresses by (kernel, dtype name, threaded): the hot path's one dict lookup.
_ADDRESSES: dict[tuple[str, str, bool], int] = {}


def _address(kernel: str, dtype: str, threaded: bool) -> int:
    key = (kernel, dtype, threaded)
    found = _ADDRESSES.get(key)
    if found is None:
        found = _ADDRESSES[key] = int(buffer_loops.loop(kernel, dtype, threaded).address)
    return found


#: The numpy dtype the api's rules see for each MLX dtype (bfloat16, which
#: numpy lacks, is computed in float32).
_HOST_DTYPES = {
    "float16": "float16",
    "bfloat16": "float32",
    "float32": "float32",
    "float64": "float64",
}
#: The answers of _threads_from, per (settings object, use_backend block, dtype).
_THREADS_FROM: dict[tuple[Any, Any, str], int | None] = {}


def _threads_from(dtype: str = "float32") -> int | None:
    """The size from which the loops run on numba's threads (None: never).

    ``CBRTGRAD_MLX_PARALLEL_MIN`` where set; else the api's own choice for a
    plain numpy array of ``dtype`` (``_registry.resolve``: its rules, a
    ``use_backend`` block, ``CBRTGRAD_BACKEND`` with its errors): threads from
    the size at which ``cbrtgrad.cbrt`` would take its ``parallel`` backend.
    NOTE: on busy cores numba's threads wait for a time slice, but so does
    one thread (the caller waits for MLX's stream thread), and the api's
    choice has the same exposure: docs/mlx.md, "Threads on busy cores".
    """
    settings = _config.settings()
    if settings.mlx_parallel_min_size is not None:
        return settings.mlx_parallel_min_size
    key = (settings, _registry.selected_backend(), dtype)
    if key in _THREADS_FROM:
        return _THREADS_FROM[key]
    one = np.empty(1, _HOST_DTYPES[dtype])
    # The rules read a plain array's dtype and whether it is large: an empty
    # one and a broadcast one of the threshold's size (no memory) stand for all.
    found: int | None = None
    if _registry.resolve(None, one[:0]).name == "parallel":
        found = 0
    elif _registry.resolve(None, np.broadcast_to(one, (settings.parallel_min_size,))).name == (
        "parallel"
    ):
        found = settings.parallel_min_size
    _THREADS_FROM[key] = found
    return found


def _loops(kernel: str, a: Any) -> tuple[int, int, int]:
    # (serial loop, threaded loop or 0, the size from which it runs) for a's dtype.
    dtype = FLOATS[a.dtype]
    serial = _address(kernel, dtype, False)
    threshold = _threads_from(dtype)
    if threshold is None or a.size < threshold or not _threaded():
        return serial, 0, 0
    return serial, _address(kernel, dtype, True), threshold


def _grad_primitive(g: Any, y: Any) -> Any:
    return _build.extension().cube_root_grad(g, y, *_loops("grad", y))


@mx.custom_function
def _cbrt(x: Any) -> Any:
    return _build.extension().cube_root(x, *_loops("forward", x))


@mx.custom_function
def _cbrt_grad(g: Any, y: Any) -> Any:
    return _grad_primitive(g, y)


@_cbrt.vjp
def _cbrt_vjp(primals: Any, cotangent: Any, output: Any) -> Any:
    # NOTE: through _cbrt_grad, which has rules of its own, so that the
    # gradient is differentiated again (second derivatives).
    return _cbrt_grad(cotangent, output)


@_cbrt.jvp
def _cbrt_jvp(primals: Any, tangents: Any) -> Any:
    x = primals[0] if isinstance(primals, (list, tuple)) else primals
    t = tangents[0] if isinstance(tangents, (list, tuple)) else tangents
    return _cbrt_grad(t, _cbrt(x))


def _dy(g: Any, y: Any, dy: Any) -> Any:
    # d/dy g / (3 y^2) = -2 g / (3 y^3) = -2 out / y (as the engine's CubeRootGradBackward).
    out: Any = _cbrt_grad(g, y)
    return dy * (-2 * out / y)


@_cbrt_grad.vjp
def _cbrt_grad_vjp(primals: Any, cotangent: Any, output: Any) -> Any:
    g, y = primals
    ct = cotangent[0] if isinstance(cotangent, (list, tuple)) else cotangent
    # Linear in g: the kernel itself, with cbrtgrad's rounding.
    return _cbrt_grad(ct, y), ct * (-2 * output / y)


@_cbrt_grad.jvp
def _cbrt_grad_jvp(primals: Any, tangents: Any) -> Any:
    g, y = primals
    dg, dy = tangents  # None for an operand the transform does not follow
    parts: list[Any] = []
    if dg is not None:
        parts.append(_cbrt_grad(dg, y))
    if dy is not None:
        parts.append(_dy(g, y, dy))
    return parts[0] if len(parts) == 1 else parts[0] + parts[1]


def cbrt(x: Any) -> Any:
    """Element-wise real cube root, ``sgn(x) |x|^(1/3)``, correctly rounded, differentiable.

    The bits of :func:`cbrtgrad.cbrt` for every input, in float16, bfloat16,
    float32 and float64 (each correctly rounded in its own precision; float64
    is a CPU dtype in MLX). An ``mx.custom_function`` whose ``vjp`` and
    ``jvp`` are cbrtgrad's correctly rounded gradient kernel, ``g / (3 y^2)``
    from the output ``y``: ``mx.grad`` gives ``cbrtgrad.cbrt_grad(g, y)`` bit
    for bit, and ``mx.value_and_grad``, ``mx.vjp``, ``mx.jvp`` and second
    derivatives work, as do ``mx.vmap`` and ``mx.compile``. Runs on MLX's CPU
    device (a ``CubeRoot`` primitive evaluated by cbrtgrad's numba kernels),
    whatever the default device: on numba's threads from
    ``CBRTGRAD_PARALLEL_MIN`` elements (10^6), as :func:`cbrtgrad.cbrt`
    chooses its ``parallel`` backend, or from ``CBRTGRAD_MLX_PARALLEL_MIN``
    where that is set; on MLX's stream thread below.

    Parameters
    ----------
    x : mx.array or array_like
        float16, bfloat16, float32 or float64 keep their dtype; bool and
        integers give float32, as ``mx.sqrt``.

    Returns
    -------
    mx.array

    Raises
    ------
    TypeError
        For complex input, naming the dtype.
    BuildError
        On the first call of a machine without CMake or a C++ compiler (the
        primitive is built once, on first use: docs/mlx.md).

    Notes
    -----
    The gradient at 0 is ``+inf`` for a positive cotangent (``-inf`` for a
    negative one, ``nan`` for 0), as ``cbrtgrad.cbrt_grad``.

    Examples
    --------
    >>> import mlx.core as mx
    >>> import cbrtgrad.mlx as cm
    >>> cm.cbrt(mx.array([-27.0, 8.0, 0.0]))
    array([-3, 2, 0], dtype=float32)
    >>> mx.grad(lambda x: cm.cbrt(x).sum())(mx.array([8.0, -1.0]))
    array([0.0833333, 0.333333], dtype=float32)
    >>> mx.grad(mx.grad(cm.cbrt))(mx.array(8.0)).item()  # -2 / (9 y^5)
    -0.0069444...
    >>> cm.cbrt(mx.array([8, 27], mx.bfloat16))
    array([2, 3], dtype=bfloat16)
    """
    return _cbrt(as_float(x))


def cbrt_grad(g: Any, y: Any) -> Any:
    """Gradient of the cube root from its output: ``g / (3 y^2)``, cbrtgrad's kernel.

    The bits of :func:`cbrtgrad.cbrt_grad`; differentiable in ``g`` and ``y``
    (``d/dg`` is this kernel again, ``d/dy = -2 g / (3 y^3)``).

    Parameters
    ----------
    g : mx.array or array_like
        The cotangent ``dL/dy``.
    y : mx.array or array_like
        The saved output ``cbrt(x)`` (not ``x``).

    Returns
    -------
    mx.array
        Of the operands' promoted dtype (as MLX promotes; a Python scalar
        takes the other operand's dtype) and broadcast shape.

    Raises
    ------
    TypeError
        For a complex operand, naming it.
    ValueError
        For shapes that do not broadcast, naming both.

    Examples
    --------
    >>> import mlx.core as mx
    >>> import cbrtgrad.mlx as cm
    >>> cm.cbrt_grad(mx.array([12.0, 3.0]), mx.array([2.0, -1.0]))
    array([1, 1], dtype=float32)
    >>> cm.cbrt_grad(1.0, mx.array([1.0, 0.0]))
    array([0.333333, inf], dtype=float32)
    """
    g, y = gradient_operands(g, y)
    return _cbrt_grad(g, y)
