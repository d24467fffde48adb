"""The ops on CUDA tensors: cbrtgrad's cuda backend on PyTorch's current stream.

The cuda backend reads PyTorch CUDA tensors in place and writes into a
tensor allocated here by PyTorch (its caching allocator, on the tensor's
device). Everything runs on ``torch.cuda.current_stream()``, the stream
PyTorch's own kernels would run on, so the results are ordered with them
(and the temporaries below, freed while a kernel may still read them, are
reused by the allocator only on that same stream, after it). No host copy.

The backend takes C-contiguous float32/float64 operands of one shape (but a
``g`` of one element): inputs are widened (exactly), broadcast and made
contiguous here, on the device. Half precision is computed by the float32
kernel (the cube root) or the float64 kernel (the gradient, correctly
rounded over all of half's range) and rounded once, exactly, by
:mod:`cbrtgrad.torch._device_half`.

NOTE: this path has not run on a GPU yet (docs/pytorch.md); CI runs the
bridge on CPU tensors, and the half rounding on CPU tensors.
"""

from __future__ import annotations

from typing import Any

import torch

from . import _device_half
from ._arguments import HALF, NUMPY


def _run(method: str, *inputs: torch.Tensor, out: Any) -> None:
    from ..backends import get_backend  # raises BackendUnavailableError saying why not

    first = inputs[0]
    stream = torch.cuda.current_stream(first.device)
    dtype = NUMPY[first.dtype]
    getattr(get_backend("cuda"), method)(*inputs, out=out, dtype=dtype, stream=stream)


def _operand(t: torch.Tensor, dtype: torch.dtype, shape: torch.Size) -> torch.Tensor:
    # resolve_neg: a negative-bit view (``z.conj().imag``) holds its values
    # negated in memory, which the kernels read (a no-op for other tensors).
    return t.to(dtype).expand(shape).contiguous().resolve_neg()


def cube_root(x: torch.Tensor) -> torch.Tensor:
    """``cbrt(x)`` in ``x``'s dtype (a CUDA tensor), correctly rounded."""
    wide = _operand(x, torch.float32 if x.dtype in HALF else x.dtype, x.shape)
    out = torch.empty_like(wide)
    _run("cube_root", wide, out=out)
    return out if x.dtype is wide.dtype else _device_half.cube_root(wide, out, x.dtype)


def cube_root_grad(g: torch.Tensor, y: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """``g / (3 y^2)`` of one dtype, broadcast to ``shape`` (CUDA tensors)."""
    compute = torch.float64 if y.dtype in HALF else y.dtype
    gw, yw = _operand(g, compute, shape), _operand(y, compute, shape)
    out = torch.empty_like(yw)
    _run("cube_root_grad", gw, yw, out=out)
    return out if y.dtype is compute else _device_half.gradient(gw, yw, out, y.dtype)


def cube_root_and_grad(
    x: torch.Tensor, g: torch.Tensor, shape: torch.Size
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(cbrt(x), g / (3 y^2))`` of one dtype, broadcast to ``shape`` (CUDA tensors)."""
    if x.dtype in HALF:  # the two ops in turn, as on the host
        y = cube_root(x.expand(shape))
        return y, cube_root_grad(g, y, shape)
    xw, gw = _operand(x, x.dtype, shape), _operand(g, x.dtype, shape)
    y, dx = torch.empty_like(xw), torch.empty_like(xw)
    _run("cube_root_and_grad", xw, gw, out=(y, dx))
    return y, dx
