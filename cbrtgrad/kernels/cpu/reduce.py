"""A multi-threaded sum of float32 data, accumulated in float64.

The graph engine's ``sum`` op sends large float32 arrays here on the
``parallel`` backend: ``cbrt(x).sum().backward()`` reads ``y`` once more
between the two kernels, and numpy's single-thread pairwise sum of 10^6
float32 values takes half as long as ``np.cbrt`` itself.

Each thread sums blocks of ``SUM_BLOCK`` elements in float64, so the result
is more accurate than numpy's float32 pairwise sum (which rounds every partial
sum to 24 bits): the float64 total of up to 2^29 float32 terms is within
2^-24 of the exact sum, relatively, and is rounded to float32 once.

NOTE: this kernel alone is compiled with the ``reassoc`` fast-math flag: a
strict left-to-right float64 sum cannot be vectorised, and the reassociated
one (several float64 partial sums per SIMD lane) has the same error bound.
Signed zeros, infinities and nan propagate as in IEEE addition (each block
starts from -0.0, the additive identity, so a sum of negative zeros is -0.0
as numpy gives).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from ...build import compile as _compile
from . import lazy
from .prange_loops import _end_block, _start_block, check_behaved

#: Elements per block: small enough to spread 10^6 elements over the threads,
#: large enough that the per-block cost (one float64 store) is negligible.
SUM_BLOCK = 1 << 14


def _sum_blocks(x):  # type: ignore[no-untyped-def]
    n = x.shape[0]
    blocks = (n + SUM_BLOCK - 1) // SUM_BLOCK
    partial = np.empty(blocks, np.float64)
    for block in numba.prange(blocks):
        # Subnormals read as they are on every thread (prange_loops._start_block).
        old = _start_block()
        start = block * SUM_BLOCK
        # NOTE: a slice and indices from 0: with ``range(start, stop)`` numba
        # cannot prove the index non-negative, and the wraparound check makes
        # LLVM gather instead of load (docs/kernels.md, "Measured choices").
        chunk = x[start : min(start + SUM_BLOCK, n)]
        total = -0.0
        for i in range(chunk.shape[0]):
            total += np.float64(chunk[i])
        partial[block] = total
        _end_block(old)
    total = -0.0
    for block in range(blocks):
        total += partial[block]
    return total


def _build() -> Any:
    options = _compile.cpu_options()
    if options["fastmath"] is False:
        options["fastmath"] = {"reassoc"}  # see the module's NOTE
    with _compile.compiling_for(_compile.loop_shape(512)):
        return numba.njit(["float64(float32[::1])"], parallel=True, **options)(_sum_blocks)


def _kernel() -> Any:
    # Compiled on first use, once per process, like every cpu kernel.
    return lazy.once("sum_float32", _build)


def sum_float32(x: np.ndarray) -> np.float32:
    """Sum a 1-D C-contiguous float32 array on numba's threads, in float64.

    Parameters
    ----------
    x : numpy.ndarray
        1-D, C-contiguous, float32.

    Returns
    -------
    numpy.float32
        The float64 sum, rounded once to float32.

    Raises
    ------
    TypeError
        If ``x`` is not a 1-D C-contiguous float32 array, or is unaligned
        or read-only (:func:`cbrtgrad.kernels.cpu.prange_loops.check_behaved`).

    Examples
    --------
    >>> import numpy as np
    >>> sum_float32(np.full(10**6, 0.1, np.float32))  # numpy's float32 sum: 100000.01
    np.float32(100000.0)
    """
    if not (
        type(x) is np.ndarray and x.dtype == np.float32 and x.ndim == 1 and x.flags.c_contiguous
    ):
        raise TypeError(
            "x must be a 1-D C-contiguous float32 numpy array, got "
            f"{type(x).__name__} {getattr(x, 'dtype', '')} {getattr(x, 'shape', '')}"
        )
    check_behaved("sum", (x,))
    # NOTE: a float64 total beyond the float32 range is an overflow to inf, as
    # numpy's float32 sum gives; its warning follows np.errstate, as numpy's.
    return np.float32(_kernel()(x))
