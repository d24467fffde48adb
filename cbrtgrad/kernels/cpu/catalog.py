"""The numba CPU kernels: forward, grad and fused, on one thread or on all of them.

The kernels are built in three layers, one module each:

- :mod:`cbrtgrad.kernels.cpu.blocks`: each kernel over one 1-D contiguous block,
  from the scalar formulas (:mod:`cbrtgrad.kernels.formulas.scalar`);
- :mod:`cbrtgrad.kernels.cpu.ufuncs`: the single-thread numpy ufuncs
  ``cube_root`` and ``cube_root_grad`` around them, and the fused kernel as
  the two over L2-sized blocks;
- :mod:`cbrtgrad.kernels.cpu.prange_loops`: the multi-threaded ``prange`` loops
  over blocks of the same functions, so with the same bits.

This module gathers what the backends, the CLI and the tools call, and lists
every loop (:func:`loop_plan`, :func:`cached_kernels`). Every kernel is
compiled lazily, on first use, once per process (:mod:`cbrtgrad.kernels.cpu.lazy`).
"""

from __future__ import annotations

from typing import Any

from ..kernel_ops import DTYPES, ELEMENTARY, KERNEL_OPS, elementary_op
from .blocks import FORMULAS, SECOND_PASS_BLOCK, cube_root, forward_block_f32, forward_block_f64
from .grad_blocks import grad_block
from .prange_loops import (
    LOOPS,
    PARALLEL_BLOCK,
    ParallelLoops,
    dtype_of,
    parallel_loop,
    parallel_loop_shape,
    parallel_loops,
)
from .ufuncs import ENTRIES, UFUNCS, CpuUfuncs, fused_blocks, ufunc, ufunc_loop_shape, ufuncs

__all__ = [
    "FORMULAS",
    "SECOND_PASS_BLOCK",
    "CpuUfuncs",
    "ParallelLoops",
    "cached_kernels",
    "cube_root",
    "forward_block_f32",
    "forward_block_f64",
    "fused_blocks",
    "grad_block",
    "loop_plan",
    "parallel_loop",
    "parallel_loops",
    "ufunc",
    "ufuncs",
]


def loop_plan() -> list[tuple[str, str, str, str]]:
    """Every CPU loop with its SIMD shape on this CPU and the formula it runs.

    Returns
    -------
    list of (loop, dtype, shape, variant)
        ``loop`` is ``"ufunc forward"``, ``"parallel fused"`` and so on.

    Examples
    --------
    >>> plan = loop_plan()
    >>> plan[0][:2], plan[2][:2]
    (('ufunc forward', 'float32'), ('ufunc grad', 'float32'))
    """
    # What each runs: its op's formula (kernel_ops.py; formulas_f64.py and
    # formulas_f32.py have the proofs' outlines), or the fused op's parts.
    plan = []
    for op in ELEMENTARY:
        for dtype in DTYPES:
            shape = ufunc_loop_shape(dtype, op.kernel).describe()
            plan.append((f"ufunc {op.kernel}", dtype, shape, op.variants[dtype]))
    for op in KERNEL_OPS.values():
        for name in op.parallel_loops:
            for signature in LOOPS[name][0]:
                dtype = dtype_of(signature)
                variant = op.variants.get(dtype) or (
                    f"{' then '.join(op.kernels)} per {PARALLEL_BLOCK}-element block"
                )
                shape = parallel_loop_shape(name, signature).describe()
                plan.append((f"parallel {name}", dtype, shape, variant))
    return plan


def cached_kernels() -> dict[str, tuple[tuple[Any, ...], str]]:
    """Every kernel the on-disk cache can hold: ``{name: (functions, tag)}``.

    A ufunc is its loop and its block entry (kernels/cpu/ufunc_loops.py): cached
    when both are.

    Examples
    --------
    >>> sorted(cached_kernels())[0]
    'parallel forward float32'
    >>> len(cached_kernels()["ufunc cube_root float64"][0])
    2
    """
    kernels: dict[str, tuple[tuple[Any, ...], str]] = {}
    for op, loops in UFUNCS.items():
        kernel = elementary_op(op).kernel
        for dtype, loop in loops.items():
            kernels[f"ufunc {op} {dtype}"] = ((loop, ENTRIES[kernel][dtype][0]), dtype)
    for name, (signatures, function) in LOOPS.items():
        for signature in signatures:
            dtype = dtype_of(signature)
            kernels[f"parallel {name} {dtype}"] = ((function,), dtype)
    return kernels
