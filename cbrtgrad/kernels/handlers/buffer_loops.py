"""Loops on raw buffers, as numba ``cfunc``\\ s: the kernels on another framework's memory.

Two bridges call them by address from C++, on buffers whose owner numpy
does not know: :mod:`cbrtgrad.mlx` evaluates its two MLX primitives on the
CPU with them (``cbrtgrad/mlx/_primitive.cpp``, on MLX's stream thread), and
:mod:`cbrtgrad.torch` runs its small calls with them
(``cbrtgrad/torch/_entry.cpp``). Neither mlx nor torch is imported here.
Every loop has one signature, ``void loop(n, a, a_constant, b, out)``
(all int64, the buffers as addresses of ``n`` contiguous elements):

* ``forward``: ``out = cbrt(a)`` (``b`` unused);
* ``grad``: ``out = a / (3 b^2)``, ``a`` the cotangent ``g`` and ``b`` the
  saved output ``y``; ``a_constant`` nonzero means ``a`` holds one element
  that stands for all ``n`` (a broadcast cotangent: the gradient of a sum).

float32 and float64 run the ufuncs' block entries on the buffers in place,
linked by name (:mod:`cbrtgrad.kernels.handlers.linked_entries`), so the bits are the
ufuncs' and the ``prange`` loops'. float16 and bfloat16 are read as their 16
bits, widened exactly (the cube root to float32, the gradient to float64, as
the api computes them) and rounded back to half precision once, with the exact
midpoint test of :mod:`cbrtgrad.arrays.half` (which this module does in numba: the
comparisons are exact in float64 for half-precision operands), so the bits are
those of ``cbrtgrad.cbrt(x, out=half_array)``, nan payloads included.

Each loop runs with subnormals kept (:mod:`cbrtgrad.kernels.cpu.denormals`), as
the XLA FFI handlers do, whatever mode the calling thread runs in. The threaded
loops are ``prange`` loops over blocks of ``PARALLEL_BLOCK`` elements.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba import carray, types
from numba.extending import intrinsic, overload

from ...build import compile as _compile
from ..cpu import lazy
from ..cpu.denormals import keep_subnormals, restore_mode
from ..cpu.prange_loops import PARALLEL_BLOCK
from ..cpu.ufuncs import run_forward_entry, run_grad_entry, ufunc_loop_shape
from ..internal_jit import WITHOUT_ENTRIES
from .half_bits import forward_half, grad_half
from .linked_entries import flags_now, forward_entry_of, grad_entry_of, link_entry

#: Elements of the one-cotangent buffer (a broadcast g).
BUFFER = 1024

#: ``void loop(int64 n, int64 a, int64 a_constant, int64 b, int64 out)``.
SIGNATURE = types.void(types.int64, types.int64, types.int64, types.int64, types.int64)


@intrinsic
def _pointer(typingctx, address, like):  # type: ignore[no-untyped-def]
    # A pointer to elements of ``like``'s type at an address, for numba.carray.
    if not isinstance(address, types.Integer) or not isinstance(like, (types.Float, types.Integer)):
        return None
    pointer = types.CPointer(like)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        return builder.inttoptr(args[0], context.get_value_type(pointer))

    return pointer(address, like), codegen


# -- the loops over one block ----------------------------------------------------------


def _forward_range(x: Any, y: Any, brain: Any) -> None:
    """The forward over 1-D contiguous arrays, by dtype (numba code only)."""
    raise NotImplementedError("_forward_range is only callable from numba-compiled code")


@overload(_forward_range, inline="always", jit_options=WITHOUT_ENTRIES)
def _overload_forward_range(x, y, brain):  # type: ignore[no-untyped-def]
    if x.dtype == types.uint16:
        return lambda x, y, brain: forward_half(x, y, brain)
    return lambda x, y, brain: run_forward_entry(forward_entry_of(x), x, y)


def _grad_range(g: Any, g_constant: Any, y: Any, dx: Any, brain: Any) -> None:
    """The gradient over 1-D contiguous arrays, by dtype (numba code only)."""
    raise NotImplementedError("_grad_range is only callable from numba-compiled code")


@overload(_grad_range, inline="always", jit_options=WITHOUT_ENTRIES)
def _overload_grad_range(g, g_constant, y, dx, brain):  # type: ignore[no-untyped-def]
    if y.dtype == types.uint16:
        return lambda g, g_constant, y, dx, brain: grad_half(g, g_constant, y, dx, brain)

    def wide(g, g_constant, y, dx, brain):  # type: ignore[no-untyped-def]
        entry = grad_entry_of(y)
        if not g_constant:
            run_grad_entry(entry, g, y, dx, flags_now())
            return
        # The one cotangent as a buffer the block entry reads for every BUFFER elements.
        n = y.shape[0]
        value = np.full(min(n, BUFFER), g[0], y.dtype)
        for start in range(0, n, BUFFER):
            stop = min(start + BUFFER, n)
            run_grad_entry(entry, value[: stop - start], y[start:stop], dx[start:stop], flags_now())

    return wide


@numba.njit(**_compile.SCALAR_OPTIONS)
def _forward_serial(x, y, brain):  # type: ignore[no-untyped-def]
    old = keep_subnormals()
    _forward_range(x, y, brain)
    restore_mode(old)


@numba.njit(**_compile.SCALAR_OPTIONS)
def _grad_serial(g, g_constant, y, dx, brain):  # type: ignore[no-untyped-def]
    old = keep_subnormals()
    _grad_range(g, g_constant, y, dx, brain)
    restore_mode(old)


@numba.njit(**{**_compile.CPU_OPTIONS, "parallel": True})
def _forward_threads(x, y, brain):  # type: ignore[no-untyped-def]
    n = x.shape[0]
    for block in numba.prange((n + PARALLEL_BLOCK - 1) // PARALLEL_BLOCK):
        old = keep_subnormals()
        start = block * PARALLEL_BLOCK
        stop = min(start + PARALLEL_BLOCK, n)
        _forward_range(x[start:stop], y[start:stop], brain)
        restore_mode(old)


@numba.njit(**{**_compile.CPU_OPTIONS, "parallel": True})
def _grad_threads(g, g_constant, y, dx, brain):  # type: ignore[no-untyped-def]
    n = y.shape[0]
    for block in numba.prange((n + PARALLEL_BLOCK - 1) // PARALLEL_BLOCK):
        old = keep_subnormals()
        start = block * PARALLEL_BLOCK
        stop = min(start + PARALLEL_BLOCK, n)
        gs = g[0:1] if g_constant else g[start:stop]
        _grad_range(gs, g_constant, y[start:stop], dx[start:stop], brain)
        restore_mode(old)


@numba.njit(**_compile.SCALAR_OPTIONS)
def _arrays(n, a, a_constant, b, out, like):  # type: ignore[no-untyped-def]
    size_a = 1 if a_constant else n
    return (
        carray(_pointer(a, like), size_a),
        carray(_pointer(b, like), n),
        carray(_pointer(out, like), n),
    )


# NOTE: one module-level function per loop (no closures), so that each is
# cached on its own (_compile.compile_cfunc); the element type is a typed
# zero (uint16 for both half formats, told apart by the constant ``brain``).
_F32, _F64, _HALF = np.float32(0), np.float64(0), np.uint16(0)


def forward_f32(n, a, a_constant, b, out):  # type: ignore[no-untyped-def]
    x, _, y = _arrays(n, a, 0, a, out, _F32)
    _forward_serial(x, y, False)


def forward_f64(n, a, a_constant, b, out):  # type: ignore[no-untyped-def]
    x, _, y = _arrays(n, a, 0, a, out, _F64)
    _forward_serial(x, y, False)


def forward_f16(n, a, a_constant, b, out):  # type: ignore[no-untyped-def]
    x, _, y = _arrays(n, a, 0, a, out, _HALF)
    _forward_serial(x, y, False)


def forward_bf16(n, a, a_constant, b, out):  # type: ignore[no-untyped-def]
    x, _, y = _arrays(n, a, 0, a, out, _HALF)
    _forward_serial(x, y, True)


def forward_f32_threads(n, a, a_constant, b, out):  # type: ignore[no-untyped-def]
    x, _, y = _arrays(n, a, 0, a, out, _F32)
    _forward_threads(x, y, False)


def forward_f64_threads(n, a, a_constant, b, out):  # type: ignore[no-untyped-def]
    x, _, y = _arrays(n, a, 0, a, out, _F64)
    _forward_threads(x, y, False)


def forward_f16_threads(n, a, a_constant, b, out):  # type: ignore[no-untyped-def]
    x, _, y = _arrays(n, a, 0, a, out, _HALF)
    _forward_threads(x, y, False)


def forward_bf16_threads(n, a, a_constant, b, out):  # type: ignore[no-untyped-def]
    x, _, y = _arrays(n, a, 0, a, out, _HALF)
    _forward_threads(x, y, True)


def grad_f32(n, a, a_constant, b, out):  # type: ignore[no-untyped-def]
    g, y, dx = _arrays(n, a, a_constant, b, out, _F32)
    _grad_serial(g, a_constant != 0, y, dx, False)


def grad_f64(n, a, a_constant, b, out):  # type: ignore[no-untyped-def]
    g, y, dx = _arrays(n, a, a_constant, b, out, _F64)
    _grad_serial(g, a_constant != 0, y, dx, False)


def grad_f16(n, a, a_constant, b, out):  # type: ignore[no-untyped-def]
    g, y, dx = _arrays(n, a, a_constant, b, out, _HALF)
    _grad_serial(g, a_constant != 0, y, dx, False)


def grad_bf16(n, a, a_constant, b, out):  # type: ignore[no-untyped-def]
    g, y, dx = _arrays(n, a, a_constant, b, out, _HALF)
    _grad_serial(g, a_constant != 0, y, dx, True)


def grad_f32_threads(n, a, a_constant, b, out):  # type: ignore[no-untyped-def]
    g, y, dx = _arrays(n, a, a_constant, b, out, _F32)
    _grad_threads(g, a_constant != 0, y, dx, False)


def grad_f64_threads(n, a, a_constant, b, out):  # type: ignore[no-untyped-def]
    g, y, dx = _arrays(n, a, a_constant, b, out, _F64)
    _grad_threads(g, a_constant != 0, y, dx, False)


def grad_f16_threads(n, a, a_constant, b, out):  # type: ignore[no-untyped-def]
    g, y, dx = _arrays(n, a, a_constant, b, out, _HALF)
    _grad_threads(g, a_constant != 0, y, dx, False)


def grad_bf16_threads(n, a, a_constant, b, out):  # type: ignore[no-untyped-def]
    g, y, dx = _arrays(n, a, a_constant, b, out, _HALF)
    _grad_threads(g, a_constant != 0, y, dx, True)


#: The loops by (kernel, dtype name, threaded).
LOOPS: dict[tuple[str, str, bool], Any] = {
    (kernel, dtype, threaded): globals()[f"{kernel}_{short}{'_threads' if threaded else ''}"]
    for kernel in ("forward", "grad")
    for dtype, short in (
        ("float32", "f32"),
        ("float64", "f64"),
        ("float16", "f16"),
        ("bfloat16", "bf16"),
    )
    for threaded in (False, True)
}

#: The dtype each kernel computes a dtype's elements in (the blocks it shares).
_COMPUTE = {
    ("forward", "float16"): "float32",
    ("forward", "bfloat16"): "float32",
    ("grad", "float16"): "float64",
    ("grad", "bfloat16"): "float64",
}


def loop(kernel: str, dtype: str, threaded: bool) -> Any:
    """One loop, compiled (or loaded from the kernel cache) on first use.

    Parameters
    ----------
    kernel : {"forward", "grad"}
    dtype : {"float32", "float64", "float16", "bfloat16"}
        The arrays' dtype.
    threaded : bool
        Whether the loop runs its blocks on numba's threads (``prange``).

    Returns
    -------
    numba.core.ccallback.CFunc
        Its ``address`` is the C function the MLX primitive and the PyTorch entry call.

    Examples
    --------
    >>> import ctypes
    >>> f = loop("forward", "float32", False)
    >>> x, y = np.float32([-27.0, 8.0]), np.zeros(2, np.float32)
    >>> call = ctypes.CFUNCTYPE(None, *[ctypes.c_int64] * 5)(f.address)
    >>> call(2, x.ctypes.data, 0, 0, y.ctypes.data)
    >>> y
    array([-3.,  2.], dtype=float32)
    """
    key = (kernel, dtype, bool(threaded))
    if key not in LOOPS:
        raise ValueError(f"cbrtgrad: no buffer loop for {key}")
    compute = _COMPUTE.get((kernel, dtype), dtype)
    if threaded:
        # NOTE: as kernels/handlers/xla_ffi.py: numba's thread pool must be started
        # before a cached cfunc holding a prange loop is loaded.
        from numba.np.ufunc.parallel import _launch_threads

        _launch_threads()
    # The ufunc's SIMD shape: the loop's vector code is the ufunc's block entry.
    shape = ufunc_loop_shape(compute, kernel)
    suffix = "_threads" if threaded else ""
    tag = f"buffer_{dtype}{suffix}"

    def build() -> Any:
        link_entry(kernel, compute)  # before the loop that names it is compiled or loaded
        name = f"buffer loop {kernel} {dtype}{suffix.replace('_', ' ')}"
        return _compile.compile_cfunc(LOOPS[key], SIGNATURE, shape, name, tag)

    return lazy.once(f"buffer_loops.{kernel}.{dtype}{suffix}", build)
