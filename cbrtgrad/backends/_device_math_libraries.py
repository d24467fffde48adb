"""Device math on CuPy arrays and PyTorch CUDA tensors, with those libraries' own functions.

Results come from the input library's allocator (CuPy's memory pool,
PyTorch's caching allocator), on the input's device and the library's
current stream. numpy's rules are enforced here rather than left to the
library: :mod:`cbrtgrad.backends.device_math` finds the result dtype with
``np.result_type`` and rounds scalars to it; the operands are then converted
to the compute dtype (float32 for float16 results, computed there and
rounded once) and the library computes in that one dtype. PyTorch gets its
scalars as 0-d tensors on the device: with a Python number, PyTorch's CUDA
division multiplies by the reciprocal (not IEEE division), its float16
arithmetic uses the scalar unrounded, and its ``pow`` takes shortcuts numpy
does not (``rsqrt`` for -0.5). numpy's own shortcuts for ``power`` (a square
for 2, a square root for 0.5, a reciprocal for -1) are taken explicitly.

A float64 to float16 conversion goes through float32 rounded to odd (see
:meth:`_LibraryMath._to_half`): both libraries' converters may go through
float32 rounded to nearest, which can round twice.

NOTE: neither library is imported here; an array of theirs exists only once
its library is imported, so it is taken from ``sys.modules``. These paths
are written from the libraries' documentation and not run in CI (which has
no GPU, CuPy or PyTorch).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from .._array_kinds import NUMPY_TO_TORCH, torch_dtypes
from ..kernels.cuda_elementwise import accumulator_dtype, compute_dtype
from ._device_arrays import CUPY, TORCH
from ._device_math_base import DeviceMath

_F16, _F32, _F64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))


class _LibraryMath(DeviceMath):
    """What CuPy and PyTorch share: compute dtypes and the float64 -> float16 cast."""

    def _convert(self, a: Any, dtype: np.dtype) -> Any:
        """``a`` in ``dtype`` (no copy if it has it), one rounding, except float64 -> float16."""
        raise NotImplementedError

    def _scalar(self, value: np.generic, like: Any) -> Any:
        """``value`` as an operand: what the library computes with exactly."""
        raise NotImplementedError

    def _to_half(self, a: Any) -> Any:
        """float64 ``a`` rounded once to float16: through float32 rounded to odd.

        A float32 rounded to odd (truncated, its last bit set if anything was
        cut off) keeps 13 bits more than float16 and remembers inexactness,
        so rounding it to float16 is rounding ``a`` once.
        """
        xp = self._xp()
        nearest = self._convert(a, _F32)
        over = abs(self._convert(nearest, _F64)) > abs(a)
        truncated = xp.where(over, xp.nextafter(nearest, xp.zeros_like(nearest)), nearest)
        inexact = (self._convert(truncated, _F64) != a) & xp.isfinite(a)
        bits = self._view(truncated, np.dtype(np.int32)) | self._convert_bool(inexact)
        return self._convert(self._view(bits, _F32), _F16)

    def _convert_exact(self, a: Any, dtype: np.dtype) -> Any:
        if self._dtype(a) == _F64 and dtype == _F16:
            return self._to_half(a)
        return self._convert(a, dtype)

    def _map2(self, op: str, a: Any, b: Any, dtype: np.dtype, shape: tuple[int, ...]) -> Any:
        compute = compute_dtype(dtype)
        like = b if isinstance(a, np.generic) else a
        a, b = (
            self._scalar(compute.type(x), like)
            if isinstance(x, np.generic)
            else self._convert_exact(x, compute)
            for x in (a, b)
        )
        return self._convert(self._apply(op, a, b, compute), dtype)

    def _map1(self, op: str, a: Any, p: Any, dtype: np.dtype) -> Any:
        compute = compute_dtype(dtype)
        a = self._convert_exact(a, compute)
        if op == "negative":
            result = self._apply("negative", a, None, compute)
        elif dtype != _F16 and p in (2.0, 0.5, -1.0, 1.0):
            # numpy's float32 and float64 power loops compute these without
            # pow (as the numba kernels do); the libraries' own fast paths
            # differ (PyTorch's rsqrt for -0.5, x * x * x for 3).
            if p == 2.0:
                result = self._apply("multiply", a, a, compute)
            elif p == 0.5:
                result = self._apply("sqrt", a, None, compute)
            elif p == -1.0:
                result = self._apply("divide", self._scalar(compute.type(1.0), a), a, compute)
            else:
                result = self._contiguous_copy(a, tuple(a.shape))
        else:
            exponent = self._scalar(compute.type(p), a)
            result = self._apply("power", a, exponent, compute)
        return self._convert(result, dtype)

    def _cast(self, a: Any, dtype: np.dtype, shape: tuple[int, ...]) -> Any:
        copied = self._contiguous_copy(a, shape)
        return self._convert_exact(copied, dtype)

    # The library's own functions.
    def _xp(self) -> Any:
        raise NotImplementedError

    def _dtype(self, a: Any) -> np.dtype:
        raise NotImplementedError

    def _view(self, a: Any, dtype: np.dtype) -> Any:
        raise NotImplementedError

    def _convert_bool(self, a: Any) -> Any:
        raise NotImplementedError

    def _apply(self, op: str, a: Any, b: Any, dtype: np.dtype) -> Any:
        raise NotImplementedError

    def _contiguous_copy(self, a: Any, shape: tuple[int, ...]) -> Any:
        raise NotImplementedError


class CupyMath(_LibraryMath):
    """Device math for CuPy arrays (untested in CI: no GPU, no CuPy).

    Examples
    --------
    >>> CupyMath().library
    'cupy'
    """

    library = CUPY

    def _xp(self) -> Any:
        return sys.modules["cupy"]

    def _device(self, value: Any) -> Any:
        return value.device.id

    def _dtype(self, a: Any) -> np.dtype:
        return np.dtype(a.dtype)

    def _convert(self, a: Any, dtype: np.dtype) -> Any:
        return a.astype(dtype, copy=False)

    def _scalar(self, value: np.generic, like: Any) -> Any:
        return value  # a numpy scalar is a kernel argument of its dtype

    def _view(self, a: Any, dtype: np.dtype) -> Any:
        return a.view(dtype)

    def _convert_bool(self, a: Any) -> Any:
        return a.astype(np.int32)

    def _apply(self, op: str, a: Any, b: Any, dtype: np.dtype) -> Any:
        cp = self._xp()
        with (b if isinstance(a, np.generic) else a).device:
            if op in ("negative", "sqrt"):
                return getattr(cp, op)(a)
            ufunc = {"divide": cp.true_divide}.get(op) or getattr(cp, op)
            return ufunc(a, b, dtype=dtype)  # the one loop of dtype

    def _contiguous_copy(self, a: Any, shape: tuple[int, ...]) -> Any:
        cp = self._xp()
        with a.device:
            if tuple(a.shape) == shape:
                return a.copy(order="C")
            return cp.ascontiguousarray(cp.broadcast_to(a, shape))

    def _sum(self, a: Any, axes: tuple[int, ...], shape: tuple[int, ...], dtype: np.dtype) -> Any:
        cp = self._xp()
        with a.device:
            total = cp.sum(a, axis=axes, dtype=accumulator_dtype(np.dtype(a.dtype)), keepdims=True)
            return self._convert_exact(total, dtype).reshape(shape)

    def _reshape(self, a: Any, shape: tuple[int, ...]) -> Any:
        return a.reshape(shape)

    def _full(self, shape: tuple[int, ...], value: Any, dtype: np.dtype, like: Any) -> Any:
        with like.device:
            return self._xp().full(shape, value, dtype)

    def _all_finite(self, a: Any) -> bool:
        with a.device:
            return bool(self._xp().isfinite(a).all())

    def _to_host(self, a: Any) -> np.ndarray:
        return np.asarray(self._xp().asnumpy(a))

    def _from_host(self, array: np.ndarray, like: Any) -> Any:
        with like.device:
            return self._xp().asarray(array)


class TorchMath(_LibraryMath):
    """Device math for PyTorch CUDA tensors (untested in CI: no GPU, no PyTorch).

    Examples
    --------
    >>> TorchMath().library
    'torch'
    """

    library = TORCH

    def _xp(self) -> Any:
        return sys.modules["torch"]

    def _device(self, value: Any) -> Any:
        return value.device.index

    def _dtype(self, a: Any) -> np.dtype:
        return torch_dtypes()[a.dtype]

    def _torch_dtype(self, dtype: np.dtype) -> Any:
        torch_dtypes()
        return NUMPY_TO_TORCH[np.dtype(dtype)]

    def _adopt(self, value: Any) -> Any:
        return value.detach()  # no autograd graph for the engine's own arithmetic

    def _convert(self, a: Any, dtype: np.dtype) -> Any:
        return a.to(self._torch_dtype(dtype))

    def _scalar(self, value: np.generic, like: Any) -> Any:
        torch = self._xp()
        return torch.full(
            (), float(value), dtype=self._torch_dtype(value.dtype), device=like.device
        )

    def _view(self, a: Any, dtype: np.dtype) -> Any:
        return a.view(self._torch_dtype(dtype))

    def _convert_bool(self, a: Any) -> Any:
        return a.to(self._xp().int32)

    def _apply(self, op: str, a: Any, b: Any, dtype: np.dtype) -> Any:
        torch = self._xp()
        if op in ("negative", "sqrt"):
            return torch.neg(a) if op == "negative" else torch.sqrt(a)
        function = {
            "add": torch.add,
            "subtract": torch.sub,
            "multiply": torch.mul,
            "divide": torch.div,
            "power": torch.pow,
        }[op]
        return function(a, b)

    def _contiguous_copy(self, a: Any, shape: tuple[int, ...]) -> Any:
        if tuple(a.shape) == shape:
            return a.clone(memory_format=self._xp().contiguous_format)
        return a.expand(shape).contiguous()

    def _sum(self, a: Any, axes: tuple[int, ...], shape: tuple[int, ...], dtype: np.dtype) -> Any:
        torch = self._xp()
        wide = self._torch_dtype(accumulator_dtype(self._dtype(a)))
        total = torch.sum(a, dim=axes, keepdim=True, dtype=wide)
        return self._convert_exact(total, dtype).reshape(shape)

    def _reshape(self, a: Any, shape: tuple[int, ...]) -> Any:
        return a.reshape(shape)

    def _full(self, shape: tuple[int, ...], value: Any, dtype: np.dtype, like: Any) -> Any:
        torch = self._xp()
        return torch.full(shape, float(value), dtype=self._torch_dtype(dtype), device=like.device)

    def _all_finite(self, a: Any) -> bool:
        return bool(self._xp().isfinite(a).all())

    def _to_host(self, a: Any) -> np.ndarray:
        return np.asarray(a.cpu().numpy())

    def _from_host(self, array: np.ndarray, like: Any) -> Any:
        return self._xp().tensor(array, device=like.device)
