"""Half precision correctly rounded on the device, with PyTorch's own tensor ops.

The CUDA kernels compute half precision in float32 (the cube root) and
float64 (the gradient). :mod:`cbrtgrad.arrays.half` rounds such a result to half
precision exactly on the host; this is the same rule in tensor ops, so that a
CUDA tensor never leaves the device: one rounding to nearest even of the
float32 result ``q``, except where ``q`` is exactly the midpoint ``m`` of two
half values, where the exact value ``t`` is compared with ``m`` instead
(the cube root: ``|x|`` with ``m^3``; the gradient: ``|g|`` with
``3 m y^2``; both exact in float64 for half-precision operands, at most 36
significant bits and well inside float64's exponent range).

``q`` may be any faithful float32 rounding of ``t`` (the gradient's float64
result rounded once more): every midpoint is a float32, so a faithful ``q``
is a midpoint or lies between the same two midpoints as ``t``.

NOTE: written for CUDA tensors and tested on CPU tensors against
:mod:`cbrtgrad.arrays.half` (tests/test_torch_bridge.py), bit for bit but for nan
payloads (PyTorch's float32-to-half conversion makes its own nans).
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def _round(
    q: torch.Tensor, half: torch.dtype, compare: Callable[[torch.Tensor], torch.Tensor]
) -> torch.Tensor:
    """``q`` (float32) rounded to ``half`` as ``t`` is; ``compare(m)`` is ``sign(t - m)``."""
    mag = q.abs()
    h = mag.to(half)  # one rounding to nearest even: right but at midpoints
    mag64, wide = mag.double(), h.double()
    inexact = (wide != mag64) & mag64.isfinite()
    bits = h.view(torch.int16)  # non-negative: the sign is put back at the end
    # The other half value beside |q|: below it where h rounded up (h may be inf).
    other = torch.where(wide > mag64, bits - 1, bits + 1)
    low, high = torch.minimum(bits, other), torch.maximum(bits, other)
    low64, high64 = low.view(half).double(), high.view(half).double()
    below = (low - 1).view(half).double()
    # Past the largest finite value the midpoint is the overflow threshold.
    m = torch.where(high64.isinf(), low64 + (low64 - below) * 0.5, (low64 + high64) * 0.5)
    at_mid = inexact & (m == mag64)
    side = compare(m)
    chosen = torch.where(at_mid & (side > 0), high, torch.where(at_mid & (side < 0), low, bits))
    result = chosen.view(half)
    return torch.where(q.signbit(), -result, result)


def _sign(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a > b).to(torch.int8) - (a < b).to(torch.int8)


def cube_root(x: torch.Tensor, q: torch.Tensor, half: torch.dtype) -> torch.Tensor:
    """``cbrt(x)`` in ``half`` from ``q``, the correctly rounded float32 cube root of ``x``.

    Examples
    --------
    >>> x = torch.tensor([8.112e-05], dtype=torch.float16).float()
    >>> q = torch.tensor([0.0432891845703125])  # cbrt(x) in float32: a float16 midpoint
    >>> cube_root(x, q, torch.float16).item(), q.half().item()  # the cast rounds it to even
    (0.043304443359375, 0.04327392578125)
    """
    x64 = x.abs().double()
    return _round(q, half, lambda m: _sign(x64, m * m * m))


def gradient(g: torch.Tensor, y: torch.Tensor, q: torch.Tensor, half: torch.dtype) -> torch.Tensor:
    """``g / (3 y^2)`` in ``half`` from ``q``, within a rounding of it (float32 or float64).

    ``g`` and ``y`` hold half-precision values (in any wider dtype).

    Examples
    --------
    >>> g, y = torch.tensor([1.0]), torch.tensor([2.0])
    >>> gradient(g, y, torch.tensor([1 / 12], dtype=torch.float64), torch.float16)
    tensor([0.0833], dtype=torch.float16)
    """
    g64, y64 = g.abs().double(), y.double()
    return _round(q.float(), half, lambda m: _sign(g64, 3 * m * (y64 * y64)))
