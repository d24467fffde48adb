"""Device math on numba device arrays: the kernels of :mod:`cbrtgrad.kernels.cuda_elementwise`.

Numba device arrays in, numba device arrays out, allocated by numba's memory
manager and computed on numba's default stream (numba takes streams only
explicitly, as the ``cuda`` backend's numba path). Any other object with
``__cuda_array_interface__`` is read in place as a numba array. Under
numba's CUDA simulator the same kernels run as Python on the simulator's
arrays, which is how CI tests them.

Each operand is read through its element strides for the output's
dimensions (0 along a broadcast dimension), after dimensions that every
operand walks contiguously are merged (:func:`coalesce`): arrays of one
shape are one dimension, with one division per element.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._device_arrays import NUMBA
from ._device_math_base import DeviceMath

#: Sums: each output element's reduced elements are split into chunks of at
#: least MIN_CHUNK, so that about TARGET_ITEMS threads work on them; their
#: partial sums are then summed by a second launch. The simulator's values
#: are small so that tests with tens of elements take both paths.
MIN_CHUNK, TARGET_ITEMS = 1024, 1 << 16
SIMULATOR_MIN_CHUNK, SIMULATOR_TARGET_ITEMS = 8, 16


def element_strides(shape: tuple[int, ...], out: tuple[int, ...]) -> tuple[int, ...]:
    """The element strides of a C-contiguous ``shape`` broadcast to ``out``.

    Examples
    --------
    >>> element_strides((3, 1), (2, 3, 4))
    (0, 1, 0)
    """
    strides = []
    step = 1
    for n in reversed(shape):
        strides.append(step if n != 1 else 0)
        step *= n
    return (0,) * (len(out) - len(shape)) + tuple(reversed(strides))


def coalesce(
    shape: tuple[int, ...], strides: list[tuple[int, ...]]
) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """Merge the dimensions every operand walks as one; drop those of length 1.

    Dimension ``d`` merges into ``d - 1`` when, for each operand, a step
    along ``d - 1`` is the whole of ``d`` (``strides[d-1] == strides[d] *
    shape[d]``, true of contiguous and of broadcast pairs alike). At least
    one dimension is kept (a kernel indexes no empty tuple).

    Examples
    --------
    >>> coalesce((2, 3, 4), [(12, 4, 1), (0, 0, 1)])
    ((6, 4), [(4, 1), (0, 1)])
    >>> coalesce((1, 1), [(0, 0)])
    ((1,), [(0,)])
    """
    dims: list[tuple[int, list[int]]] = []
    for d, n in enumerate(shape):
        if n == 1:
            continue
        steps = [s[d] for s in strides]
        if dims and all(p == s * n for p, s in zip(dims[-1][1], steps, strict=True)):
            dims[-1] = (dims[-1][0] * n, steps)
        else:
            dims.append((n, steps))
    if not dims:
        return (1,), [(0,) for _ in strides]
    return tuple(n for n, _ in dims), [tuple(s[k] for _, s in dims) for k in range(len(strides))]


def _c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


class NumbaMath(DeviceMath):
    """Device math for numba device arrays (see :mod:`cbrtgrad.backends.device_math`).

    Examples
    --------
    >>> NumbaMath().library
    'numba'
    """

    library = NUMBA

    # -- plumbing -------------------------------------------------------------

    def _adopt(self, value: Any) -> Any:
        if not hasattr(value, "copy_to_host"):
            from numba import cuda

            value = cuda.as_cuda_array(value)  # any __cuda_array_interface__, zero-copy
        return value

    def _device(self, value: Any) -> Any:
        return None  # numba's arrays are all in its current context

    @staticmethod
    def _empty(shape: tuple[int, ...], dtype: np.dtype) -> Any:
        from numba import cuda

        return cuda.device_array(shape, dtype)

    @staticmethod
    def _flat(a: Any, name: str) -> Any:
        """``a`` as a 1-D view, for the kernels (C-contiguous arrays only)."""
        if not a.is_c_contiguous():
            raise ValueError(
                f"cbrtgrad: {name} must be a C-contiguous device array (got shape "
                f"{tuple(a.shape)}); copy it to a contiguous one first"
            )
        return a.reshape(a.size)

    @staticmethod
    def _launch(kernel: Any, items: int, *args: Any) -> None:
        from ..kernels.cuda_elementwise import launch_config

        blocks, threads = launch_config(items)
        kernel[blocks, threads](*args)

    # -- the hooks ------------------------------------------------------------

    def _map2(self, op: str, a: Any, b: Any, dtype: np.dtype, shape: tuple[int, ...]) -> Any:
        from ..kernels import cuda_elementwise as kernels

        out = self._empty(shape, dtype)
        n = math.prod(shape)
        if n == 0:
            return out
        compute = kernels.compute_dtype(dtype)
        args, strides = [], []
        for value, name in ((a, "a"), (b, "b")):
            if isinstance(value, np.generic):
                args.append(compute.type(value))  # exact: value is of dtype already
                strides.append((0,) * len(shape))
            else:
                args.append(self._flat(value, name))
                strides.append(element_strides(tuple(value.shape), shape))
        dims, strides = coalesce(shape, strides)
        kernel = kernels.binary(
            op, dtype, not isinstance(a, np.generic), not isinstance(b, np.generic)
        )
        self._launch(kernel, n, args[0], args[1], self._flat(out, "out"), n, dims, *strides)
        return out

    def _map1(self, op: str, a: Any, p: Any, dtype: np.dtype) -> Any:
        from ..kernels import cuda_elementwise as kernels

        shape = tuple(a.shape)
        out = self._empty(shape, dtype)
        n = math.prod(shape)
        if n:
            p = kernels.compute_dtype(dtype).type(p)
            dims, (strides,) = coalesce(shape, [_c_strides(shape)])
            kernel = kernels.unary(op, dtype)
            self._launch(kernel, n, self._flat(a, "a"), p, self._flat(out, "out"), n, dims, strides)
        return out

    def _cast(self, a: Any, dtype: np.dtype, shape: tuple[int, ...]) -> Any:
        from ..kernels import cuda_elementwise as kernels

        out = self._empty(shape, dtype)
        n = math.prod(shape)
        if n:
            dims, (strides,) = coalesce(shape, [element_strides(tuple(a.shape), shape)])
            kernel = kernels.cast_kernel(dtype)
            self._launch(kernel, n, self._flat(a, "a"), self._flat(out, "out"), n, dims, strides)
        return out

    def _sum(self, a: Any, axes: tuple[int, ...], shape: tuple[int, ...], dtype: np.dtype) -> Any:
        from ..kernels import cuda_elementwise as kernels
        from ..kernels.cuda_primitives import simulating

        have = tuple(a.shape)
        strides = _c_strides(have)
        kept = [d for d in range(len(have)) if d not in axes]
        kept_dims, (kept_strides,) = coalesce(
            tuple(have[d] for d in kept), [tuple(strides[d] for d in kept)]
        )
        red_dims, (red_strides,) = coalesce(
            tuple(have[d] for d in axes), [tuple(strides[d] for d in axes)]
        )
        outputs = math.prod(shape)
        count = math.prod(have[d] for d in axes)
        accumulator = kernels.accumulator_dtype(np.dtype(a.dtype))
        min_chunk, target = (
            (SIMULATOR_MIN_CHUNK, SIMULATOR_TARGET_ITEMS)
            if simulating()
            else (MIN_CHUNK, TARGET_ITEMS)
        )
        chunks = max(1, min(count // min_chunk, target // outputs))
        out = self._empty(shape, dtype)
        flat = self._flat(a, "a")
        if chunks == 1:
            self._launch(
                kernels.reduce_sum(accumulator, dtype), outputs, flat, self._flat(out, "out"),
                outputs, 1, count, kept_dims, kept_strides, red_dims, red_strides,
            )  # fmt: skip
            return out
        # Work item (o, c) sums elements c, c + chunks, c + 2 chunks, ... of
        # output o's reduced ones: neighbouring threads read neighbouring
        # elements when the reduced axes are the last ones.
        partial = self._empty((outputs * chunks,), accumulator)
        self._launch(
            kernels.reduce_sum(accumulator, accumulator), outputs * chunks, flat, partial,
            outputs * chunks, chunks, count, kept_dims, kept_strides, red_dims, red_strides,
        )  # fmt: skip
        self._launch(
            kernels.reduce_sum(accumulator, dtype), outputs, partial, self._flat(out, "out"),
            outputs, 1, chunks, (outputs,), (chunks,), (chunks,), (1,),
        )  # fmt: skip
        return out

    def _reshape(self, a: Any, shape: tuple[int, ...]) -> Any:
        self._flat(a, "a")  # the contiguity check: a view of a C array only
        return a.reshape(shape)

    def _full(self, shape: tuple[int, ...], value: Any, dtype: np.dtype, like: Any) -> Any:
        from ..kernels import cuda_elementwise as kernels

        out = self._empty(shape, dtype)
        n = math.prod(shape)
        if n:
            exact = kernels.compute_dtype(dtype).type(value)  # value is of dtype already
            self._launch(kernels.fill(dtype), n, self._flat(out, "out"), exact, n)
        return out

    def _all_finite(self, a: Any) -> bool:
        from ..kernels import cuda_elementwise as kernels

        n = math.prod(a.shape)
        if n == 0:
            return True
        flag = self._full((1,), np.float32(1.0), np.dtype(np.float32), a)
        self._launch(kernels.all_finite(), n, self._flat(a, "a"), flag, n)
        return bool(flag.copy_to_host()[0] == 1.0)

    def _to_host(self, a: Any) -> np.ndarray:
        return np.asarray(a.copy_to_host())

    def _from_host(self, array: np.ndarray, like: Any) -> Any:
        from numba import cuda

        return cuda.to_device(array)
