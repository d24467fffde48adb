"""CUDA kernels: forward, backward and fused, from the one scalar formula source.

The scalar formulas of :mod:`cbrtgrad.kernels.formulas` are compiled as CUDA
device functions against :mod:`cbrtgrad.kernels.cuda_primitives`, so a GPU
(or the simulator) gives the same bits as the numba CPU kernels.

Each kernel is a grid-stride loop over 1-D contiguous arrays with 64-bit
indices (arrays of more than 2^31 elements work), one kernel per compute dtype
and compiled lazily per input dtype: float16 inputs are read into the float32
kernels (the force-fp32 policy) and integer inputs into the float64 ones.

NOTE: importing this module imports ``numba.cuda``; the ``cuda`` backend does
that only once it knows numba-cuda is installed. ``numba.cuda`` must be a
module global (not a closure variable) of the kernels: the simulator swaps
the kernels' global ``cuda`` for its fake thread-index API.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from types import SimpleNamespace
from typing import Any

import numpy as np
from numba import cuda

from .cuda_primitives import cuda_primitives, simulating
from .formulas import make_formulas

#: Threads per block on a GPU: a multiple of the warp size that lets every
#: multiprocessor hold several blocks (full occupancy of a memory-bound loop).
THREADS_PER_BLOCK = 256
#: The simulator runs every thread of a block as a Python thread: keep it small.
SIMULATOR_THREADS_PER_BLOCK = 32


@dataclass(frozen=True)
class DeviceLimits:
    """The device properties the launch configuration is computed from."""

    multiprocessors: int
    threads_per_multiprocessor: int
    max_grid_x: int


#: What the launch configuration assumes under the simulator (it has no
#: device attributes): two small blocks, so the grid-stride loops are exercised.
SIMULATOR_LIMITS = DeviceLimits(1, 2 * SIMULATOR_THREADS_PER_BLOCK, 2**31 - 1)


def device_limits() -> DeviceLimits:
    """Read the current device's limits (the simulator's fixed ones under it)."""
    if simulating():
        return SIMULATOR_LIMITS
    device = cuda.get_current_device()
    return DeviceLimits(
        int(device.MULTIPROCESSOR_COUNT),
        int(device.MAX_THREADS_PER_MULTI_PROCESSOR),
        int(device.MAX_GRID_DIM_X),
    )


def launch_config(n: int, limits: DeviceLimits) -> tuple[int, int]:
    """``(blocks, threads)`` for ``n`` elements: one wave of resident blocks at most.

    A grid-stride loop needs no more threads than the device holds at once;
    more blocks would only add scheduling, fewer would leave multiprocessors idle.

    Examples
    --------
    >>> launch_config(10**9, DeviceLimits(132, 2048, 2**31 - 1))  # an H100/H200
    (1056, 256)
    >>> launch_config(100, DeviceLimits(132, 2048, 2**31 - 1))
    (1, 256)
    """
    threads = SIMULATOR_THREADS_PER_BLOCK if limits == SIMULATOR_LIMITS else THREADS_PER_BLOCK
    threads = min(threads, limits.threads_per_multiprocessor)
    resident = limits.multiprocessors * max(1, limits.threads_per_multiprocessor // threads)
    blocks = max(1, min(math.ceil(n / threads), resident, limits.max_grid_x))
    return blocks, threads


def _kernels_for(cube_root: Any, cube_root_grad: Any, cast: Any) -> SimpleNamespace:
    """The three grid-stride kernels of one compute dtype."""

    @cuda.jit
    def forward(x, y):  # type: ignore[no-untyped-def]
        i = np.int64(cuda.blockIdx.x) * np.int64(cuda.blockDim.x) + np.int64(cuda.threadIdx.x)
        stride = np.int64(cuda.gridDim.x) * np.int64(cuda.blockDim.x)
        n = x.shape[0]
        while i < n:
            y[i] = cube_root(cast(x[i]))
            i += stride

    @cuda.jit
    def backward(g, y, dx):  # type: ignore[no-untyped-def]
        i = np.int64(cuda.blockIdx.x) * np.int64(cuda.blockDim.x) + np.int64(cuda.threadIdx.x)
        stride = np.int64(cuda.gridDim.x) * np.int64(cuda.blockDim.x)
        n = g.shape[0]
        while i < n:
            dx[i] = cube_root_grad(cast(g[i]), cast(y[i]))
            i += stride

    @cuda.jit
    def fused(x, g, y, dx):  # type: ignore[no-untyped-def]
        i = np.int64(cuda.blockIdx.x) * np.int64(cuda.blockDim.x) + np.int64(cuda.threadIdx.x)
        stride = np.int64(cuda.gridDim.x) * np.int64(cuda.blockDim.x)
        n = x.shape[0]
        while i < n:
            # y is computed in the compute dtype and stored in it, so dx is
            # computed from the same bits the unfused backward would read.
            yv = cube_root(cast(x[i]))
            y[i] = yv
            dx[i] = cube_root_grad(cast(g[i]), yv)
            i += stride

    return SimpleNamespace(forward=forward, backward=backward, fused=fused)


@lru_cache(maxsize=1)
def kernels() -> dict[np.dtype, SimpleNamespace]:
    """The kernels by compute dtype (float32, float64), built on first use.

    Returns
    -------
    dict
        ``numpy.dtype -> namespace(forward, backward, fused)``; each kernel
        takes 1-D contiguous device arrays.
    """
    formulas = make_formulas(cuda_primitives(), cuda.jit(device=True))
    return {
        np.dtype(np.float32): _kernels_for(
            formulas.cube_root_f32, formulas.cube_root_grad_f32, np.float32
        ),
        np.dtype(np.float64): _kernels_for(
            formulas.cube_root_f64, formulas.cube_root_grad_f64, np.float64
        ),
    }
