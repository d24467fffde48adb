"""CUDA kernels: forward, grad and fused, from the one scalar formula source.

The scalar formulas of :mod:`cbrtgrad.kernels.formulas.scalar` are compiled as CUDA
device functions against :mod:`cbrtgrad.kernels.cuda.primitives`, so a GPU
(or the simulator) gives the same bits as the numba CPU kernels.

Each kernel takes bare pointers and an element count, ``(x, y, n)``: three
kernel parameters instead of seven per array, and no shape or stride to
marshal per call. Its tile loop is one of :mod:`cbrtgrad.kernels.cuda.tiles`:
a block owns a tile of a few (``KERNEL_SHAPES``) times its width in
elements, each thread loading its elements before it computes any (an
elementwise kernel with one load per thread is latency bound on an H200:
docs/kernels.md, "The CUDA kernels"); the width is a compile-time constant
(:func:`threads_per_block`, which every launch uses).

Kernels are compiled per input dtype, on first use, with an explicit
signature (float16 inputs into the float32 kernels, the force-fp32 policy,
read as their bits: see :func:`_half_readers`; integers and bools into the
float64 ones). Under numba's CUDA simulator the
same Python functions run on simulator arrays, which index like pointers.

NOTE: importing this module imports ``numba.cuda``; the ``cuda`` backend does
that only once it knows numba-cuda is installed.
"""

from __future__ import annotations

from functools import cache, lru_cache
from typing import Any

import numpy as np
from numba import cuda

from ..formulas.scalar import make_formulas
from ..kernel_ops import BY_KERNEL
from . import tiles
from .primitives import cuda_primitives, simulating

#: Threads per block on a GPU: a multiple of the warp size small enough that
#: a multiprocessor holds several blocks.
THREADS_PER_BLOCK = 256
#: The simulator runs every thread of a block as a Python thread: keep it small.
SIMULATOR_THREADS_PER_BLOCK = 32


def threads_per_block() -> int:
    """The block width every kernel is compiled for, and must be launched with.

    NOTE: a compile-time constant, not ``cuda.blockDim.x``: each thread's
    elements then lie at constant offsets from its first one, which a load
    or store takes as an immediate (``LDG [R+0x400]``) instead of two 64-bit
    integer adds per element (docs/kernels.md, "The CUDA kernels").

    Examples
    --------
    >>> threads_per_block() in (THREADS_PER_BLOCK, SIMULATOR_THREADS_PER_BLOCK)
    True
    """
    return SIMULATOR_THREADS_PER_BLOCK if simulating() else THREADS_PER_BLOCK


#: Each kernel's shape: (elements each thread loads before it computes, the
#: register cap ptxas compiles it with, None for its own choice), the fastest
#: of a sweep on an H200 (tools/gpu_check.py --sweep; the figures are in
#: docs/kernels.md, "The CUDA kernels").
KERNEL_SHAPES = {
    ("forward", "float32"): (8, 96),
    ("grad", "float32"): (8, 96),
    ("fused", "float32"): (8, 96),
    ("forward", "float64"): (4, None),
    ("grad", "float64"): (8, 96),
    ("fused", "float64"): (8, 96),
}


# NOTE: hot path (every GPU call): keyed by the dtype itself, since
# ``dtype.name`` is computed in Python on each access (3 µs a call).
_SHAPES_BY_DTYPE = {(name, np.dtype(dt)): shape for (name, dt), shape in KERNEL_SHAPES.items()}


def shape_of(name: str, compute: np.dtype) -> tuple[int, int | None]:
    """``(elements per thread, register cap)`` of kernel ``name`` in ``compute``.

    Examples
    --------
    >>> shape_of("forward", np.dtype(np.float64))
    (4, None)
    """
    found = _SHAPES_BY_DTYPE.get((name, compute))
    return found if found is not None else _SHAPES_BY_DTYPE[(name, np.dtype(compute))]


#: The device attributes the launch reads, as numba-cuda names them
#: (``device.NAME`` is ``CU_DEVICE_ATTRIBUTE_NAME`` of cuda.bindings; the
#: simulator has none, so tests/backends/test_cuda_ptx.py checks the names).
DEVICE_ATTRIBUTES = ("MAX_GRID_DIM_X",)
#: What the simulator stands in for them.
SIMULATOR_MAX_GRID = 2


def max_grid(device: Any) -> int:
    """The most blocks a launch may have on ``device`` (its ``MAX_GRID_DIM_X``)."""
    (name,) = DEVICE_ATTRIBUTES
    return int(getattr(device, name))


def launch_config(n: int, threads: int, grid_limit: int, per_thread: int) -> tuple[int, int]:
    """``(blocks, threads)`` for ``n`` elements: one tile per block, up to the limit.

    Examples
    --------
    >>> launch_config(2**28, 256, 2**31 - 1, 4)  # 2^28 / (256 * 4) tiles
    (262144, 256)
    >>> launch_config(100, 256, 2**31 - 1, 8)
    (1, 256)
    >>> launch_config(10**6, 32, 2, 8)  # the simulator: two blocks loop over the tiles
    (2, 32)
    """
    tile = threads * per_thread
    return max(1, min(-(-n // tile), grid_limit)), threads


@lru_cache(maxsize=1)
def _formulas() -> Any:
    return make_formulas(cuda_primitives(), cuda.jit(device=True))


@lru_cache(maxsize=1)
def _half_readers() -> tuple[Any, Any]:
    """float16 bit patterns to float32 and to float64, as numpy converts them.

    NOTE: a GPU's float16 -> float32 conversion (``cvt.f32.f16``) returns the
    canonical nan for every nan; numpy (and so the CPU backends) keeps the
    payload. The kernels read float16 as its 16 bits and convert them in
    integers (exact for every pattern; a subnormal by its significand as an
    integer, 2^24 times its value), so that all 65,536 inputs give the CPU's
    bits (tools/gpu_check.py checks them on a GPU).
    """
    prims = cuda_primitives()
    f32_as_i32, i32_as_f32 = prims.f32_as_i32, prims.i32_as_f32

    @cuda.jit(device=True)
    def half_to_single(bits):  # type: ignore[no-untyped-def]
        h = np.int64(bits)
        sign = (h & np.int64(0x8000)) << np.int64(16)
        exponent = (h >> np.int64(10)) & np.int64(0x1F)
        significand = h & np.int64(0x3FF)
        if exponent == np.int64(0x1F):  # inf and nan: the payload kept
            pattern = sign | np.int64(0x7F800000) | (significand << np.int64(13))
        elif exponent != np.int64(0):
            pattern = sign | ((exponent + np.int64(112)) << np.int64(23))
            pattern |= significand << np.int64(13)
        elif significand != np.int64(0):  # 2^-24 times the significand: 24 off its exponent
            scaled = np.int64(f32_as_i32(np.float32(significand)))
            pattern = sign | (scaled - np.int64(24 << 23))
        else:
            pattern = sign
        return i32_as_f32(np.int32(pattern))

    @cuda.jit(device=True)
    def half_to_double(bits):  # type: ignore[no-untyped-def]
        return np.float64(half_to_single(bits))

    return half_to_single, half_to_double


def _numba_type(dtype: np.dtype) -> Any:
    from numba import from_dtype

    return from_dtype(load_dtype(dtype))


def load_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype a kernel loads for an input of ``dtype``: float16 as its bits.

    Examples
    --------
    >>> load_dtype(np.dtype(np.float16)), load_dtype(np.dtype(np.float32))
    (dtype('uint16'), dtype('float32'))
    """
    return np.dtype(np.uint16) if dtype == np.float16 else dtype


def _reader(dtype: np.dtype, compute: np.dtype) -> Any:
    # What turns a loaded element of ``dtype`` into the compute dtype.
    if dtype == np.float16:
        to_single, to_double = _half_readers()
        return to_single if compute == np.float32 else to_double
    return np.float32 if compute == np.float32 else np.float64


#: The scalar formulas a kernel can be built from, the same bits either way:
#: ``"branching"`` (the kernels' own: a branch for the specials instead of
#: selects in every lane, and no conversion between types in float32) and
#: ``"select"`` (the one-element formulas before them, kept for
#: tools/gpu_check.py --sweep to time against; docs/kernels.md, "The CUDA
#: kernels").
FORMS = ("branching", "select")


def device_functions(compute: Any, form: str = "branching") -> tuple[Any, Any]:
    """``(forward, gradient)``: the scalar device functions the kernels run in ``compute``.

    What every kernel calls per element, and what :mod:`cbrtgrad.numba`
    compiles into a user's ``@cuda.jit`` code, so both give the same bits.

    Parameters
    ----------
    compute : dtype
        float32 or float64.
    form : {"branching", "select"}
        Which scalar formulas (:data:`FORMS`).

    Returns
    -------
    tuple
        ``forward(x)`` and ``gradient(g, y)``, CUDA device functions (plain
        Python under the simulator).

    Examples
    --------
    >>> [f.__name__ for f in device_functions(np.float32)]
    ['cube_root_f32_branching', 'cube_root_grad_f32_branching']
    """
    f = _formulas()
    single = np.dtype(compute) == np.float32
    if form == "branching":
        forward = f.cube_root_f32_branching if single else f.cube_root_f64_branching
        grad = f.cube_root_grad_f32_branching if single else f.cube_root_grad_f64
    elif form == "select":
        forward = f.cube_root_f32 if single else f.cube_root_f64
        grad = f.cube_root_grad_f32 if single else f.cube_root_grad_f64
    else:
        raise ValueError(f"cbrtgrad: form must be one of {FORMS}, got {form!r}")
    return forward, grad


def python_kernel(
    name: str,
    compute: np.dtype,
    inputs: tuple[np.dtype, ...],
    per_thread: int | None = None,
    form: str = "branching",
    scalar_g: bool = False,
) -> Any:
    """The Python function of kernel ``name`` for these input dtypes (not compiled).

    Parameters
    ----------
    name : {"forward", "grad", "fused"}
        Which kernel.
    compute : numpy.dtype
        float32 or float64, the dtype it computes in and writes.
    inputs : tuple of numpy.dtype
        The dtypes it reads (one for ``forward``, two otherwise).
    per_thread : int, optional
        Elements each thread loads before it computes (default: ``KERNEL_SHAPES``).
    form : {"branching", "select"}
        Which scalar formulas (:data:`FORMS`).
    scalar_g : bool
        For ``grad`` and ``fused``: ``g`` is one element, broadcast (the
        kernel reads ``g[0]`` once per thread).
    """
    per_thread = per_thread or shape_of(name, compute)[0]
    forward, grad = device_functions(compute, form)
    loads = tuple(_numba_type(dt) for dt in inputs)
    reads = tuple(_reader(dt, compute) for dt in inputs)
    width = threads_per_block()
    if name == "forward":
        return tiles.unary(forward, reads[0], loads[0], per_thread, width)
    if name == "grad":
        return tiles.binary(
            grad, reads[0], reads[1], loads[0], loads[1], per_thread, width, scalar_g
        )
    return tiles.fused(
        forward, grad, reads[0], reads[1], loads[0], loads[1], per_thread, width, scalar_g
    )


@cache
def kernel(
    name: str,
    compute: np.dtype,
    inputs: tuple[np.dtype, ...],
    per_thread: int | None = None,
    max_registers: int | None = None,
    form: str = "branching",
    scalar_g: bool = False,
) -> Any:
    """Kernel ``name`` compiled for ``inputs``, writing ``compute`` (cached).

    On a GPU it is compiled eagerly for one signature of pointers, ``void(T_in*
    ..., T_out* ..., int64)``; under the simulator it is left to type itself
    on the simulator's arrays.

    Returns
    -------
    numba.cuda dispatcher
    """
    if per_thread is None:
        per_thread, max_registers = shape_of(name, compute)
    function = python_kernel(name, compute, inputs, per_thread, form, scalar_g)
    if simulating():
        return cuda.jit(function)
    compile_for = cuda.jit(signature(name, compute, inputs), max_registers=max_registers)  # type: ignore[call-arg]
    return compile_for(function)


def signature(name: str, compute: np.dtype, inputs: tuple[np.dtype, ...]) -> Any:
    """The pointer signature of kernel ``name`` (what a GPU compiles).

    Examples
    --------
    >>> signature("grad", np.dtype(np.float32), (np.dtype(np.float16),) * 2)
    (uint16*, uint16*, float32*, int64) -> none
    """
    from numba import types

    outputs = len(BY_KERNEL[name].outputs)
    pointers = [types.CPointer(_numba_type(dt)) for dt in inputs]
    pointers += [types.CPointer(_numba_type(compute))] * outputs  # float32 or float64
    return types.void(*pointers, types.int64)
