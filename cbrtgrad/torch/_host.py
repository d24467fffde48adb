"""The ops on CPU tensors: numpy views of the tensors, cbrtgrad's api, no copy.

A CPU tensor of any strides is a numpy array over the same memory
(``Tensor.numpy()``); the result is allocated by PyTorch (contiguous, as the
ops' fake implementations say) and written through the api's ``out=``, so
the bits are cbrtgrad's own. Half precision is rounded once, exactly, into a
half ``out=`` by the api (:mod:`cbrtgrad._half`): PyTorch's casts from
float64 to float16 round twice. numpy has no bfloat16: a bfloat16 tensor is
viewed as int16 and reinterpreted as ml_dtypes' bfloat16.
"""

from __future__ import annotations

import numpy as np
import torch

from .. import _half, api


def _quiet() -> np.errstate:
    # Where the gradient meets y = 0 it is ±inf or nan, as IEEE division gives
    # it, and a signalling nan is quieted; PyTorch's own ops do not warn there,
    # so numpy's floating-point warnings are off around the kernels.
    return np.errstate(all="ignore")


def host_array(t: torch.Tensor) -> np.ndarray:
    """The numpy array over a CPU tensor's memory (its strides, no copy).

    Examples
    --------
    >>> t = torch.tensor([1.0, 2.0], dtype=torch.bfloat16)
    >>> a = host_array(t)
    >>> a.dtype.name, a.tolist()
    ('bfloat16', [1.0, 2.0])
    >>> a[0] = 4  # the tensor's own memory
    >>> t
    tensor([4., 2.], dtype=torch.bfloat16)
    """
    if t.requires_grad:  # Tensor.numpy() refuses it (a tensor that needs none is not detached)
        t = t.detach()
    if t.dtype is not torch.bfloat16:
        return t.numpy()
    bfloat16 = _half.bfloat16()
    if bfloat16 is None:
        raise TypeError(
            "cbrtgrad.torch: bfloat16 tensors need ml_dtypes (numpy has no bfloat16): "
            "python -m pip install 'cbrtgrad[torch]'"
        )
    return t.view(torch.int16).numpy().view(bfloat16)


def _empty(shape: torch.Size, dtype: torch.dtype) -> tuple[torch.Tensor, np.ndarray]:
    out = torch.empty(shape, dtype=dtype)
    return out, host_array(out)


def cube_root(x: torch.Tensor) -> torch.Tensor:
    """``cbrt(x)`` in ``x``'s dtype, correctly rounded.

    Examples
    --------
    >>> cube_root(torch.tensor([-8.0, 27.0], dtype=torch.float16))
    tensor([-2.,  3.], dtype=torch.float16)
    """
    out, target = _empty(x.shape, x.dtype)
    with _quiet():
        api.cbrt(host_array(x), out=target)
    return out


def cube_root_grad(g: torch.Tensor, y: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """``g / (3 y^2)`` of one dtype, broadcast to ``shape``, correctly rounded in it.

    Examples
    --------
    >>> g, y = torch.tensor([12.0, 0.0]), torch.tensor([2.0, 0.0])
    >>> cube_root_grad(g, y, torch.Size([2]))
    tensor([1., nan])
    """
    if _broadcast_constant(g, y, shape):
        # The gradient of a sum: one value broadcast (stride 0). Without out=
        # the backends read it once (their constant-g kernel, twice as fast
        # at 10^6 elements) into a new C-contiguous array, which PyTorch takes
        # over without a copy.
        with _quiet():
            return torch.from_numpy(api.cbrt_grad(host_array(g), host_array(y)))
    out, target = _empty(shape, y.dtype)
    with _quiet():
        api.cbrt_grad(host_array(g), host_array(y), out=target)
    return out


def _broadcast_constant(g: torch.Tensor, y: torch.Tensor, shape: torch.Size) -> bool:
    return (
        y.dtype in (torch.float32, torch.float64)
        and g.dtype is y.dtype
        and g.shape == y.shape == shape
        and y.dim() > 0
        and y.is_contiguous()
        and not any(g.stride())
    )


def cube_root_and_grad(
    x: torch.Tensor, g: torch.Tensor, shape: torch.Size
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(cbrt(x), g / (3 y^2))`` of one dtype, both of the broadcast ``shape``.

    Half precision is the two ops in turn (the gradient from the rounded
    ``y``, the bits of ``cbrt_grad(g, cbrt(x))``); float32 and float64 the
    api's fused kernel, which gives those bits in one pass.

    Examples
    --------
    >>> cube_root_and_grad(torch.tensor([8.0]), torch.tensor([12.0]), torch.Size([1]))
    (tensor([2.]), tensor([1.]))
    """
    if x.dtype in (torch.float16, torch.bfloat16):
        y = cube_root(x.expand(shape))
        return y, cube_root_grad(g, y, shape)
    y, y_target = _empty(shape, x.dtype)
    dx, dx_target = _empty(shape, x.dtype)
    with _quiet():
        api.cbrt_and_grad(host_array(x), host_array(g), out=(y_target, dx_target))
    return y, dx
