"""Which way a call of the bridge goes: the CPU kernel directly, or an ``autograd.Function``.

A call that no autograd records and that the dispatcher would only hand to
the CPU kernel (:func:`untracked`) needs no Function: it calls
:mod:`._host` directly (``Function.apply`` and the Function's saves are
some 4.5 µs more a call on one element, AMD Zen 4). Every other eager call
goes through its Function, by its C++ ``apply`` (:func:`apply`).

NOTE: PyTorch has no public test for forward mode: under ``torch.func.jvp``
or ``forward_ad`` the op alone would get a zero tangent without a word
(``torch.library`` has no forward-mode registration), so the tests read
private state (as ``Function.apply`` itself does); the ``Function``'s
``jvp`` gives the right tangent.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.autograd import forward_ad

from .._host import KEPT, forward_of, selected_backend
from . import _ops
from ._arguments import NUMPY
from ._ops import dispatch_modes, function_modes, tracing, transforms_active

#: The dtypes that PyTorch's rules and autocast leave as they are (the kernels' own).
KERNEL_DTYPES = frozenset({torch.float32, torch.float64})

_is_compiling = torch.compiler.is_compiling  # NOTE: dynamo folds it by its identity
_unwrap_if_dead = getattr(getattr(torch._C, "_functorch", None), "unwrap_if_dead", None)
#: Each eager Function's C++ ``apply``, bound to it (filled by :func:`apply`).
_DIRECT: dict[Any, Any] = {}


def apply(eager: Any, traced: Any, *args: torch.Tensor) -> Any:
    """``Function.apply`` of the Function with a jvp, or of the one ``torch.compile`` traces.

    NOTE: outside ``torch.func`` transforms ``Function.apply`` is Python
    around the C++ ``apply`` (``torch._C._FunctionBase``): it binds the
    forward's default arguments with ``inspect`` (our forwards have none)
    and unwraps ``torch.func`` wrappers whose level is dead
    (``unwrap_dead_wrappers``, PyTorch 2.13 torch/autograd/function.py).
    The C++ ``apply`` with the same unwrapping is some 3 µs less a call.
    Under a transform, ``Function.apply`` (its ``custom_function_call``).
    """
    if _is_compiling():
        return traced.apply(*args)
    if _unwrap_if_dead is None or _ops.transforms_active():
        return eager.apply(*args)
    direct = _DIRECT.get(eager)
    if direct is None:
        direct = _DIRECT[eager] = super(torch.autograd.Function, eager).apply
    if len(args) == 1:
        return direct(_unwrap_if_dead(args[0]))
    return direct(*[_unwrap_if_dead(a) for a in args])


def forward_mode() -> bool:
    """Whether a ``jvp`` may be asked of a Function called now (a forward-mode level, a transform).

    Outside both no tangent reaches the call, and its ``setup_context``
    skips ``save_for_forward``.
    """
    return getattr(forward_ad, "_current_level", 0) >= 0 or _ops.transforms_active()


def untracked(*tensors: torch.Tensor) -> bool:
    """Whether no autograd records a call on ``tensors`` and it would run the CPU kernel.

    No input that reverse mode records (grad mode off, as in a backward
    without ``create_graph``, or no input requiring grad), no forward-mode
    level (``forward_ad.dual_level``; NOTE: its private level counter, -1
    outside every level: without it, every call takes the Function), and
    nothing but the kernel on the dispatcher's way (no ``torch.func``
    transform, which :func:`._ops.reaches_cpu_kernel` also rules out). Such a
    call needs no Function.
    """
    return untracked_float(*tensors) and not torch.is_autocast_enabled("cpu")


def untracked_float(*tensors: torch.Tensor) -> bool:
    """:func:`untracked` for float32 and float64 tensors (:func:`._ops.reaches_float_kernel`).

    NOTE: hot path: CPU autocast is not asked (it leaves these dtypes as they are).
    """
    if _is_compiling() or getattr(forward_ad, "_current_level", 0) >= 0:
        return False
    if torch.is_grad_enabled():
        for t in tensors:
            if t.requires_grad:
                return False
    return _ops.reaches_float_kernel(*tensors)


def one_float(a: Any, b: Any) -> bool:
    """Whether two arguments are tensors of one float32/float64 dtype, shape and device.

    NOTE: hot path: PyTorch's rules (``_arguments.one``, ``autocast``,
    ``two``) leave such a pair as it is, and the kernels' shape is theirs.
    """
    return (
        type(a) is torch.Tensor
        and type(b) is torch.Tensor
        and a.dtype is b.dtype
        and a.dtype in KERNEL_DTYPES
        and a.shape == b.shape
        and (a.is_cpu and b.is_cpu or a.device == b.device)
    )


def cube_root_now(x: torch.Tensor) -> torch.Tensor | None:
    """``cbrt(x)`` by the cpu backend's ufunc now, or None where the call must go another way.

    ``x`` is a plain tensor of float32 or float64 that reverse mode does not
    record (the caller's tests). NOTE: hot path: the one-element call. The
    tests of :func:`untracked_float` (:func:`._ops.reaches_float_kernel`)
    and of :func:`._host.cube_root`'s short route, written out in one
    function: three calls fewer, some 0.5 of 3.5 µs (AMD Zen 4).
    tests/test_torch_small_calls.py checks that this says None wherever
    those would send the call elsewhere.
    """
    if _is_compiling():  # first: dynamo folds it, and traces none of the rest (numpy dtypes)
        return None
    forward = forward_of(NUMPY.get(x.dtype))
    if (
        forward is None
        or getattr(forward_ad, "_current_level", 0) >= 0
        or not x.is_cpu
        or transforms_active()
        or dispatch_modes()
        or function_modes()
        or tracing() is not None
        or x.numel() >= KEPT[1]
        or selected_backend() is not None
        or not x.is_contiguous()
    ):
        return None
    try:
        y = forward(x.numpy(force=True) if x.requires_grad else x.numpy())
    except RuntimeError:  # a negative-bit view (z.conj().imag), resolved by the general route
        if not x.is_neg():
            raise
        return None
    return torch.from_numpy(y if type(y) is np.ndarray else np.asarray(y))
