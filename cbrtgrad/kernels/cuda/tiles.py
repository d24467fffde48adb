"""The CUDA kernels' tile loops: each kernel's Python function, around a scalar formula.

:mod:`cbrtgrad.kernels.cuda.elementwise` builds every kernel from one of these with the
formulas, readers and shape of its kind, and compiles it. A block owns a tile
of ``width`` times ``per_thread`` elements; each thread loads its elements of
the tile (coalesced, ``width`` apart) before it computes and stores any of
them, so several loads are in flight per thread and ``out=x`` is safe. Only
the last tile checks bounds element by element; tiles past the grid are taken
by the same blocks in a loop. ``width`` is a compile-time constant, so a
thread's elements lie at immediate offsets of its loads and stores.

NOTE: ``numba.cuda`` must be a module global (not a closure variable) of the
kernels: the simulator swaps the kernels' global ``cuda`` for its fake
thread-index API.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numba import cuda


def unary(
    scalar: Callable[..., Any], read: Any, load_type: Any, per_thread: int, width: int
) -> Callable[..., Any]:
    """``y[i] = scalar(read(x[i]))`` over the tiles: the forward kernel."""

    def kernel(x, y, n):  # type: ignore[no-untyped-def]
        tile = np.int64(cuda.blockIdx.x) * (width * per_thread)
        step = np.int64(cuda.gridDim.x) * (width * per_thread)
        while tile < n:
            first = tile + cuda.threadIdx.x
            if first + (per_thread - 1) * width < n:
                # All loads first: y may be x (out=x), and each thread reads
                # its own elements before it writes them.
                held = cuda.local.array(per_thread, load_type)
                for k in range(per_thread):
                    held[k] = x[first + k * width]
                for k in range(per_thread):
                    y[first + k * width] = scalar(read(held[k]))
            else:
                i = first
                while i < n:
                    y[i] = scalar(read(x[i]))
                    i += width
            tile += step

    return kernel


def binary(
    scalar: Callable[..., Any],
    read_g: Any,
    read_y: Any,
    g_type: Any,
    y_type: Any,
    per_thread: int,
    width: int,
    one_g: bool = False,
) -> Callable[..., Any]:
    """``dx[i] = scalar(read_g(g[i]), read_y(y[i]))`` over the tiles: the grad kernel.

    ``one_g``: ``g`` is one element, broadcast as numpy would, read once per
    thread. NOTE: a compile-time constant, so each kernel holds only its own
    branch; the other kernel's ``g[0]`` read is dead code the compiler drops
    (the same machine code as two separate kernels: checked on the SASS).
    """

    def kernel(g, y, dx, n):  # type: ignore[no-untyped-def]
        g_once = read_g(g[0])
        tile = np.int64(cuda.blockIdx.x) * (width * per_thread)
        step = np.int64(cuda.gridDim.x) * (width * per_thread)
        while tile < n:
            first = tile + cuda.threadIdx.x
            if first + (per_thread - 1) * width < n:
                gs = cuda.local.array(per_thread, g_type)
                ys = cuda.local.array(per_thread, y_type)
                for k in range(per_thread):
                    if not one_g:
                        gs[k] = g[first + k * width]
                    ys[k] = y[first + k * width]
                for k in range(per_thread):
                    gv = g_once if one_g else read_g(gs[k])
                    dx[first + k * width] = scalar(gv, read_y(ys[k]))
            else:
                i = first
                while i < n:
                    gv = g_once if one_g else read_g(g[i])
                    dx[i] = scalar(gv, read_y(y[i]))
                    i += width
            tile += step

    return kernel


def fused(
    forward: Callable[..., Any],
    grad: Callable[..., Any],
    read_x: Any,
    read_g: Any,
    x_type: Any,
    g_type: Any,
    per_thread: int,
    width: int,
    one_g: bool = False,
) -> Callable[..., Any]:
    """``y = cbrt(x)`` and ``dx = grad(g, y)`` in one pass: the fused kernel (``one_g`` as
    in :func:`binary`)."""

    def kernel(x, g, y, dx, n):  # type: ignore[no-untyped-def]
        g_once = read_g(g[0])  # before any store: y may be g
        tile = np.int64(cuda.blockIdx.x) * (width * per_thread)
        step = np.int64(cuda.gridDim.x) * (width * per_thread)
        while tile < n:
            first = tile + cuda.threadIdx.x
            if first + (per_thread - 1) * width < n:
                xs = cuda.local.array(per_thread, x_type)
                gs = cuda.local.array(per_thread, g_type)
                for k in range(per_thread):
                    xs[k] = x[first + k * width]
                    if not one_g:
                        gs[k] = g[first + k * width]
                for k in range(per_thread):
                    # y in the compute dtype, so dx comes from the same bits
                    # the unfused grad kernel would read.
                    yv = forward(read_x(xs[k]))
                    y[first + k * width] = yv
                    dx[first + k * width] = grad(g_once if one_g else read_g(gs[k]), yv)
            else:
                i = first
                while i < n:
                    # g[i] read before y[i] is written: y may be g (out=(g, ...)).
                    gv = g_once if one_g else read_g(g[i])
                    yv = forward(read_x(x[i]))
                    y[i] = yv
                    dx[i] = grad(gv, yv)
                    i += width
            tile += step

    return kernel
