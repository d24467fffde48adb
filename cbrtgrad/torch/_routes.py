"""Which way a call of the bridge goes: the CPU kernel, an ``autograd.Function``, or the op.

A call that no autograd records and that the dispatcher would only hand to
the CPU kernel (:func:`untracked`) needs no Function: it calls
:mod:`._cpu` directly (``Function.apply`` and the Function's saves are
several times the kernel's call on one element: docs/pytorch.md). An eager call on plain
CPU tensors that autograd records applies the op's Function by its C++
``apply`` (:func:`call`); every other call, traced or transformed, is a
call of the op (:mod:`._ops`), whose autograd kernel is that Function.

NOTE: PyTorch has no public test for forward mode: the tests read its
private level counter (as ``Function.apply`` itself does). It is right
here, in eager code; inside a graph of ``torch.compile`` it is not, and
the op's autograd kernel, which graphs call, reads nothing of it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.autograd import forward_ad

from ..backends.host import KEPT, forward_of, selected_backend
from . import _ops
from ._arguments import NUMPY
from ._ops import (
    dispatch_modes,
    function_modes,
    legacy_batched,
    tracing,
    transforms_active,
)

#: The dtypes that PyTorch's rules and autocast leave as they are (the kernels' own).
KERNEL_DTYPES = frozenset({torch.float32, torch.float64})

_is_compiling = torch.compiler.is_compiling  # NOTE: dynamo folds it by its identity
_unwrap_if_dead = getattr(getattr(torch._C, "_functorch", None), "unwrap_if_dead", None)
#: Each eager Function's C++ ``apply``, bound to it (filled by :func:`apply`).
_DIRECT: dict[Any, Any] = {}


def call(function: Any, op: Any, *args: torch.Tensor) -> Any:
    """``op(*args)``, or ``function``'s C++ ``apply`` where the call is eager on plain CPU tensors.

    The one way into the ops: every call that ``torch.compile`` traces,
    ``torch.func`` or PyTorch's batched gradients transform, ``torch.jit``
    traces, a mode sees, or that is on other tensors, is a call of the op
    (:mod:`._ops`), whose autograd kernel applies ``function``'s op twin.
    An eager call on plain CPU tensors (:func:`._ops.reaches_cpu_kernel`)
    applies ``function`` itself, without the op's Python dispatch (10 to
    20 µs); its forward calls the CPU kernel, as the op would.

    NOTE: ``Function.apply`` outside ``torch.func`` transforms is Python
    around the C++ ``apply`` (``torch._C._FunctionBase``): it binds the
    forward's default arguments with ``inspect`` (our forwards have none)
    and unwraps ``torch.func`` wrappers whose level is dead
    (``unwrap_dead_wrappers``, PyTorch 2.13 torch/autograd/function.py).
    The C++ ``apply`` with the same unwrapping is some 3 µs less a call.
    """
    if _is_compiling() or not _ops.reaches_cpu_kernel(*args):
        return op(*args)
    return _direct(function, args)


def call_float(function: Any, op: Any, *args: torch.Tensor) -> Any:
    """:func:`call` for float32 and float64 tensors (:func:`._ops.reaches_float_kernel`).

    NOTE: hot path (one element requiring grad): CPU autocast is not asked.
    """
    if _is_compiling() or not _ops.reaches_float_kernel(*args):
        return op(*args)
    return _direct(function, args)


def _direct(function: Any, args: tuple[torch.Tensor, ...]) -> Any:
    direct = _DIRECT.get(function)
    if direct is None:
        direct = _DIRECT[function] = super(torch.autograd.Function, function).apply
    if _unwrap_if_dead is None:
        return direct(*args)
    if len(args) == 1:
        return direct(_unwrap_if_dead(args[0]))
    return direct(*[_unwrap_if_dead(a) for a in args])


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
        and tracing() is None  # a trace would record the shapes' test (a TracerWarning)
        and a.shape == b.shape
        and (a.is_cpu and b.is_cpu or a.device == b.device)
    )


def cube_root_now(x: torch.Tensor) -> torch.Tensor | None:
    """``cbrt(x)`` by the cpu backend's ufunc now, or None where the call must go another way.

    ``x`` is a plain tensor of float32 or float64 that reverse mode does not
    record (the caller's tests). NOTE: hot path: the one-element call. The
    tests of :func:`untracked_float` (:func:`._ops.reaches_float_kernel`)
    and of :func:`._cpu.cube_root`'s short route, written out in one
    function: three Python calls fewer on the one-element call.
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
    except RuntimeError:
        # A negative-bit view (z.conj().imag), resolved by the general route;
        # or one of PyTorch's batched tensors, which have no memory to view
        # and go through the op (asked only here: the hot path's tests stay as few).
        if not (x.is_neg() or legacy_batched(x)):
            raise
        return None
    return torch.from_numpy(y if type(y) is np.ndarray else np.asarray(y))
