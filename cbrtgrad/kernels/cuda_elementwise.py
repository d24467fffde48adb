"""CUDA kernels for the graph engine's array math on numba device arrays.

:mod:`cbrtgrad.backends.device_math` calls these for numba device arrays (a
GPU's, or the simulator's in CI): element-wise maps with numpy broadcasting,
fills, the sums along axes and a finiteness test. Every kernel takes flat
C-contiguous arrays; an operand broadcast to the output is read through its
*element strides* for the output's dimensions (0 along a broadcast one), so
the output's flat index ``i`` finds each operand's element with one division
and one remainder per (coalesced) dimension, and nothing is materialised.

Arithmetic is in the compute dtype: float32 for float16 data (numpy's half
loops convert to float, compute and round back; a float32 add, subtract,
multiply or divide of two halves rounded to half is the correctly rounded
half result, since 24 >= 2 * 11 + 2 bits), else the result's dtype.

NOTE: on a GPU every add, subtract, multiply and divide is a libdevice ``_rn``
function (``add.rn``, ``mul.rn``, ``div.rn`` in PTX), which neither NVVM nor
ptxas contracts into an fma; no kernel here has a multiply feeding an add,
but an explicit rounding keeps it so whatever is added later. Under numba's
simulator they are numpy scalar operations, which are IEEE single and
double operations (with numpy's warnings silenced, as a GPU raises none).

Kernels are built on first use per operation, dtypes and operand kinds, and
cached; numba compiles each for the tuple lengths (coalesced dimensions) it
is launched with. ``numba.cuda`` is a module global, as the simulator needs
(see :mod:`cbrtgrad.kernels.cuda`).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from functools import cache, lru_cache
from typing import Any

import numpy as np
from numba import cuda

from .cuda_primitives import simulating

#: Threads per block on a GPU, and the most blocks a launch uses (the grid
#: stride loops take the rest).
THREADS_PER_BLOCK = 256
MAX_BLOCKS = 1 << 16
#: The simulator runs every thread as a Python thread: few of them.
SIMULATOR_THREADS_PER_BLOCK = 32
SIMULATOR_MAX_BLOCKS = 2

#: The binary operations, by the names of their numpy ufuncs.
BINARY = ("add", "subtract", "multiply", "divide")
#: The unary maps (a cast, also for broadcast_to, is :func:`cast_kernel`).
UNARY = ("negative", "power")


def launch_config(n: int) -> tuple[int, int]:
    """``(blocks, threads)`` for ``n`` work items, grid-stride loops doing the rest.

    Examples
    --------
    >>> blocks, threads = launch_config(10)  # small: every item its own thread
    >>> blocks * threads >= 10
    True
    """
    if simulating():
        threads = max(1, min(n, SIMULATOR_THREADS_PER_BLOCK))
        return max(1, min(-(-n // threads), SIMULATOR_MAX_BLOCKS)), threads
    return max(1, min(-(-n // THREADS_PER_BLOCK), MAX_BLOCKS)), THREADS_PER_BLOCK


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype a kernel computes in for data of ``dtype``: float32 for float16.

    Examples
    --------
    >>> compute_dtype(np.dtype(np.float16)), compute_dtype(np.dtype(np.float64))
    (dtype('float32'), dtype('float64'))
    """
    return np.dtype(np.float32) if dtype == np.float16 else np.dtype(dtype)


def accumulator_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype a sum of ``dtype`` data accumulates in: float32 for float16, else float64.

    Examples
    --------
    >>> accumulator_dtype(np.dtype(np.float16)), accumulator_dtype(np.dtype(np.float32))
    (dtype('float32'), dtype('float64'))
    """
    return np.dtype(np.float32) if dtype == np.float16 else np.dtype(np.float64)


def _quiet(op: Callable[..., Any]) -> Callable[..., Any]:
    # The simulator's arithmetic: numpy scalars, without numpy's warnings.
    def quiet(*args):  # type: ignore[no-untyped-def]
        with np.errstate(all="ignore"):
            return op(*args)

    return quiet


def _negate(x):  # type: ignore[no-untyped-def]
    return -x  # a sign flip: exact, and nothing to fuse with


@cache
def _arithmetic(compute: str) -> dict[str, Any]:
    """The operations in ``compute`` ("float32" or "float64") for the current target."""
    if simulating():
        ops: dict[str, Any] = {
            "add": operator.add,
            "subtract": operator.sub,
            "multiply": operator.mul,
            "divide": operator.truediv,
            "power": operator.pow,  # numpy's scalar power (numpy's powf for float32)
            "sqrt": np.sqrt,
        }
        ops = {name: _quiet(op) for name, op in ops.items()}
    else:
        from numba.cuda import libdevice

        if compute == "float32":
            ops = {
                "add": libdevice.fadd_rn,
                "subtract": libdevice.fsub_rn,
                "multiply": libdevice.fmul_rn,
                "divide": libdevice.fdiv_rn,
                "power": libdevice.powf,
                "sqrt": libdevice.fsqrt_rn,
            }
        else:

            def dsub(x, y):  # type: ignore[no-untyped-def]
                # NOTE: numba-cuda binds no __nv_dsub_rn; x + (-y) is x - y in
                # IEEE arithmetic (negation is exact) up to a nan's sign.
                return libdevice.dadd_rn(x, -y)

            ops = {
                "add": libdevice.dadd_rn,
                "subtract": cuda.jit(device=True)(dsub),
                "multiply": libdevice.dmul_rn,
                "divide": libdevice.ddiv_rn,
                "power": libdevice.pow,
                "sqrt": libdevice.dsqrt_rn,
            }
    ops["negative"] = cuda.jit(device=True)(_negate)
    return ops


def _caster(dtype: np.dtype) -> Any:
    cast = {"float16": np.float16, "float32": np.float32, "float64": np.float64}[dtype.name]
    # The simulator's conversions warn on overflow to inf; a GPU's do not.
    return _quiet(cast) if simulating() else cast


@lru_cache(maxsize=1)
def _indexing() -> tuple[Any, Any, Any]:
    """Device functions: an operand's element offset, and loads of arrays and scalars."""

    @cuda.jit(device=True)
    def offset(i, shape, strides):  # type: ignore[no-untyped-def]
        # The output's flat index i, split over its (coalesced) dimensions
        # from the last, each coordinate times the operand's element stride.
        found = np.int64(0)
        for d in range(len(shape) - 1, -1, -1):
            n = shape[d]
            found += (i % n) * strides[d]
            i //= n
        return found

    @cuda.jit(device=True)
    def load_array(a, i, shape, strides):  # type: ignore[no-untyped-def]
        return a[offset(i, shape, strides)]

    @cuda.jit(device=True)
    def load_scalar(a, i, shape, strides):  # type: ignore[no-untyped-def]
        return a

    return offset, load_array, load_scalar


@cache
def binary(op: str, out: np.dtype, a_is_array: bool, b_is_array: bool) -> Any:
    """``out[i] = a[ia] op b[ib]`` with broadcasting, computed in ``compute_dtype(out)``.

    The kernel is ``kernel[blocks, threads](a, b, out, n, shape, a_strides,
    b_strides)``; a scalar operand is passed as a value of the compute dtype.
    """
    _, load_array, load_scalar = _indexing()
    compute = compute_dtype(out)
    apply = _arithmetic(compute.name)[op]
    cast, store = _caster(compute), _caster(out)
    load_a = load_array if a_is_array else load_scalar
    load_b = load_array if b_is_array else load_scalar

    def kernel(a, b, result, n, shape, a_strides, b_strides):  # type: ignore[no-untyped-def]
        i = np.int64(cuda.grid(1))
        step = np.int64(cuda.gridsize(1))
        while i < n:
            x = cast(load_a(a, i, shape, a_strides))
            y = cast(load_b(b, i, shape, b_strides))
            result[i] = store(apply(x, y))
            i += step

    return cuda.jit(kernel)


@cache
def unary(op: str, out: np.dtype) -> Any:
    """``out[i] = -a[ia]`` or ``a[ia] ** p`` with broadcasting, in ``compute_dtype(out)``.

    The kernel is ``kernel[blocks, threads](a, p, out, n, shape, a_strides)``,
    ``p`` the exponent as a value of the compute dtype (ignored by
    ``"negative"``).
    """
    _, load_array, _ = _indexing()
    compute = compute_dtype(out)
    ops = _arithmetic(compute.name)
    cast, store = _caster(compute), _caster(out)
    if op == "negative":
        negate = ops["negative"]

        @cuda.jit(device=True)
        def apply(x, p):  # type: ignore[no-untyped-def]
            return negate(x)

    else:
        power, multiply, divide, sqrt = (ops[k] for k in ("power", "multiply", "divide", "sqrt"))
        # numpy's float32 and float64 power loops square, take the square
        # root, the reciprocal or the value itself for these exponents (so
        # (-inf) ** 0.5 is nan and (-0.0) ** 0.5 is -0.0, where C's pow gives
        # inf and 0.0); its float16 loop calls powf for every exponent.
        fast = bool(out != np.float16)

        @cuda.jit(device=True)
        def apply(x, p):  # type: ignore[no-untyped-def]
            if fast:
                if p == 2.0:
                    return multiply(x, x)
                if p == 0.5:
                    return sqrt(x)
                if p == -1.0:
                    return divide(cast(1.0), x)
                if p == 1.0:
                    return x
            return power(x, p)

    def kernel(a, p, result, n, shape, a_strides):  # type: ignore[no-untyped-def]
        i = np.int64(cuda.grid(1))
        step = np.int64(cuda.gridsize(1))
        while i < n:
            result[i] = store(apply(cast(load_array(a, i, shape, a_strides)), p))
            i += step

    return cuda.jit(kernel)


@cache
def cast_kernel(out: np.dtype) -> Any:
    """``out[i] = out_dtype(a[ia])``: one correctly rounded conversion, with broadcasting.

    The kernel is ``kernel[blocks, threads](a, out, n, shape, a_strides)``.
    """
    _, load_array, _ = _indexing()
    store = _caster(out)

    def kernel(a, result, n, shape, a_strides):  # type: ignore[no-untyped-def]
        i = np.int64(cuda.grid(1))
        step = np.int64(cuda.gridsize(1))
        while i < n:
            result[i] = store(load_array(a, i, shape, a_strides))
            i += step

    return cuda.jit(kernel)


@cache
def fill(out: np.dtype) -> Any:
    """``out[i] = value``: ``kernel[blocks, threads](out, value, n)``, value exact in ``out``."""
    store = _caster(out)

    def kernel(result, value, n):  # type: ignore[no-untyped-def]
        i = np.int64(cuda.grid(1))
        step = np.int64(cuda.gridsize(1))
        while i < n:
            result[i] = store(value)
            i += step

    return cuda.jit(kernel)


@cache
def reduce_sum(accumulator: np.dtype, out: np.dtype) -> Any:
    """Sums of interleaved chunks of the reduced elements, in ``accumulator``, stored as ``out``.

    The kernel is ``kernel[blocks, threads](a, result, items, chunks, count,
    kept_shape, kept_strides, reduced_shape, reduced_strides)``: work item
    ``w`` sums, of output element ``o = w // chunks``, the reduced elements
    ``c, c + chunks, c + 2 chunks, ...`` below ``count`` (``c = w % chunks``),
    each converted to ``accumulator`` (exactly) and added left to right from
    ``-0.0`` (the additive identity, so a sum of negative zeros stays
    ``-0.0``), and stores the total in ``result[w]``. With one chunk that is
    the sum, rounded once to ``out``; with several, the partial sums are
    stored as ``accumulator`` and a second launch (one chunk each) sums them.
    """
    offset, _, _ = _indexing()
    add = _arithmetic(accumulator.name)["add"]
    widen, store = _caster(accumulator), _caster(out)

    def kernel(  # type: ignore[no-untyped-def]
        a, result, items, chunks, count, kept_shape, kept_strides, red_shape, red_strides
    ):
        w = np.int64(cuda.grid(1))
        step = np.int64(cuda.gridsize(1))
        while w < items:
            o = w // chunks
            r = w - o * chunks
            base = offset(o, kept_shape, kept_strides)
            total = widen(-0.0)
            while r < count:
                total = add(total, widen(a[base + offset(r, red_shape, red_strides)]))
                r += chunks
            result[w] = store(total)
            w += step

    return cuda.jit(kernel)


@lru_cache(maxsize=1)
def all_finite() -> Any:
    """``flag[0] = 0`` where any element of ``a`` is inf or nan: ``kernel[b, t](a, flag, n)``."""
    import math

    def kernel(a, flag, n):  # type: ignore[no-untyped-def]
        i = np.int64(cuda.grid(1))
        step = np.int64(cuda.gridsize(1))
        while i < n:
            x = np.float64(a[i])  # exact for every float16, float32 and float64
            if math.isinf(x) or math.isnan(x):
                flag[0] = 0  # every writer writes the same value: no race to lose
            i += step

    return cuda.jit(kernel)
