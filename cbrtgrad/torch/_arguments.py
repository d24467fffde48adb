"""What the bridge takes: PyTorch's rules for a float op, applied once per call.

* Tensors, and Python numbers beside a tensor (as ``torch.add`` takes them);
  anything else is a ``TypeError`` naming the argument.
* float16, bfloat16, float32 and float64 are computed in their own dtype
  (half precision correctly rounded in it); bool and integers become
  PyTorch's default dtype, as ``torch.sqrt`` makes them; complex and every
  other dtype is a ``TypeError`` naming the dtype.
* Two inputs are promoted as ``torch.add`` promotes them (the casts are
  widening, so exact, and recorded, so each gradient comes back in its
  input's dtype), must be on one device (a 0-d CPU tensor beside a device
  tensor moves, as in ``torch.add``) and broadcast together; else a
  ``RuntimeError`` naming both.
* Under ``torch.autocast`` an op whose engine schema says ``FORCE_FP32``
  (the cube root) takes half precision as float32.

The custom ops check what they are given again (:func:`op_dtype`,
:func:`op_shape`), for callers of ``torch.ops.cbrtgrad`` who skip this module.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..engine.schema import AmpPolicy, OpSchema

#: The dtypes computed as they are (the kernels' and half precision).
FLOATS = frozenset({torch.float16, torch.bfloat16, torch.float32, torch.float64})
HALF = frozenset({torch.float16, torch.bfloat16})

#: The numpy dtype of each dtype the kernels compute in (the CPU and the CUDA
#: paths alike).
NUMPY = {torch.float32: np.dtype(np.float32), torch.float64: np.dtype(np.float64)}
#: The dtypes computed in PyTorch's default dtype, as ``torch.sqrt`` computes them.
INTEGERS = frozenset(
    {torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64}
    | {getattr(torch, f"uint{bits}") for bits in (16, 32, 64) if hasattr(torch, f"uint{bits}")}
)
_NUMBERS = (bool, int, float)


def _describe(value: Any) -> str:
    return type(value).__name__


def float_dtype(dtype: torch.dtype, name: str, where: str) -> torch.dtype:
    """The dtype an input of ``dtype`` is computed in (see the module's rules).

    Examples
    --------
    >>> float_dtype(torch.int32, "x", "f"), float_dtype(torch.bfloat16, "x", "f")
    (torch.float32, torch.bfloat16)
    >>> float_dtype(torch.complex64, "x", "cbrtgrad.torch.cbrt")
    Traceback (most recent call last):
    ...
    TypeError: cbrtgrad.torch.cbrt: x has dtype torch.complex64; expected float16, bfloat16, ...
    """
    if dtype in FLOATS:
        return dtype
    if dtype in INTEGERS:
        return torch.get_default_dtype()
    raise TypeError(
        f"{where}: {name} has dtype {dtype}; expected float16, bfloat16, "
        "float32, float64, bool or an integer dtype"
    )


def tensor(value: Any, name: str, where: str) -> torch.Tensor:
    """``value`` when it is a tensor, else a ``TypeError`` naming ``name`` (as ``torch.sqrt``)."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{where}: argument {name!r} must be a Tensor, not {_describe(value)}")
    return value


def autocast(x: torch.Tensor, schema: OpSchema) -> torch.Tensor:
    """``x`` as ``torch.autocast`` gives it to an op of ``schema`` (a recorded cast, or ``x``).

    PyTorch's own ``fp32`` list casts half precision to float32 and leaves
    float64 alone; the engine's ``FORCE_FP32`` policy is that list.

    Examples
    --------
    >>> from cbrtgrad.engine.cube_root import CubeRootBackward
    >>> with torch.autocast("cpu"):
    ...     autocast(torch.ones(1, dtype=torch.bfloat16), CubeRootBackward.schema).dtype
    torch.float32
    """
    if schema.amp_policy is not AmpPolicy.FORCE_FP32 or x.dtype not in HALF:
        return x
    device = x.device.type
    if torch.amp.is_autocast_available(device) and torch.is_autocast_enabled(device):
        return x.to(torch.float32)
    return x


def one(x: Any, name: str, where: str) -> torch.Tensor:
    """The input of a one-argument op: a tensor of a float dtype (integers cast, recorded)."""
    x = tensor(x, name, where)
    dtype = float_dtype(x.dtype, name, where)
    return x if dtype is x.dtype else x.to(dtype)


def two(a: Any, b: Any, names: tuple[str, str], where: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Two inputs promoted to one float dtype on one device, checked to broadcast.

    Examples
    --------
    >>> g, y = two(1, torch.ones(2, dtype=torch.float64), ("g", "y"), "cbrtgrad.torch.cbrt_grad")
    >>> g.dtype, y.dtype, g.shape
    (torch.float64, torch.float64, torch.Size([]))
    """
    if not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor):
        tensor(a, names[0], where)
    for value, name in ((a, names[0]), (b, names[1])):
        if not isinstance(value, (torch.Tensor, *_NUMBERS)):
            tensor(value, name, where)
        if isinstance(value, torch.Tensor):
            float_dtype(value.dtype, name, where)  # complex named before promotion hides it
    dtype = float_dtype(result_type(a, b), ", ".join(names), where)
    device = _device(a, b, names, where)
    a, b = _as(a, dtype, device), _as(b, dtype, device)
    broadcast_shape(a, b, names, where)
    return a, b


def _rank(value: Any) -> tuple[int, torch.dtype]:
    """An operand's priority in PyTorch's promotion (a tensor with dimensions over a 0-d
    tensor over a Python number) and its dtype (a number's: bool, int64 or the default)."""
    if isinstance(value, torch.Tensor):
        return (2 if value.dim() else 1), value.dtype
    if isinstance(value, bool):
        return 0, torch.bool
    return 0, torch.int64 if isinstance(value, int) else torch.get_default_dtype()


def result_type(a: Any, b: Any) -> torch.dtype:
    """``torch.result_type(a, b)`` for real operands, in what ``torch.compile`` traces.

    NOTE: dynamo refuses ``torch.result_type`` (a torch function returning a
    dtype: a graph break); ``torch.promote_types`` of two dtypes it folds.
    The rule is PyTorch's (c10's ``combine_categories``): an operand of a
    lower priority counts only where its category (bool, integer, float) is
    higher.

    Examples
    --------
    >>> result_type(torch.ones(2, dtype=torch.float16), 2.5)
    torch.float16
    >>> result_type(torch.ones(2, dtype=torch.int32), torch.tensor(1.0, dtype=torch.float64))
    torch.float64
    """
    (rank_a, da), (rank_b, db) = _rank(a), _rank(b)
    if rank_a == rank_b:
        return torch.promote_types(da, db)
    higher, lower = (da, db) if rank_a > rank_b else (db, da)
    if higher.is_floating_point:
        return higher
    if higher is torch.bool or lower.is_floating_point:
        return torch.promote_types(higher, lower)
    return higher


def _as(value: Any, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    # A number becomes a 0-d tensor; a tensor is cast (recorded) only where it differs.
    if not isinstance(value, torch.Tensor):
        return torch.as_tensor(value, dtype=dtype, device=device)
    if value.dtype is dtype and value.device == device:
        return value
    return value.to(device=device, dtype=dtype)


def _device(a: Any, b: Any, names: tuple[str, str], where: str) -> torch.device:
    tensors = [(v, n) for v, n in ((a, names[0]), (b, names[1])) if isinstance(v, torch.Tensor)]
    if len(tensors) == 1 or tensors[0][0].device == tensors[1][0].device:
        return tensors[0][0].device
    # As torch.add: a 0-d CPU tensor goes with a tensor on another device.
    (ta, na), (tb, nb) = tensors
    if ta.dim() == 0 and ta.device.type == "cpu":
        return tb.device
    if tb.dim() == 0 and tb.device.type == "cpu":
        return ta.device
    raise RuntimeError(
        f"{where}: expected all tensors to be on the same device, but {na} is "
        f"on {ta.device} and {nb} on {tb.device}"
    )


def broadcast_shape(
    a: torch.Tensor, b: torch.Tensor, names: tuple[str, str], where: str
) -> torch.Size:
    """The shape ``a`` and ``b`` broadcast to, or a ``RuntimeError`` naming both (as ``torch.add``).

    Examples
    --------
    >>> broadcast_shape(torch.ones(3), torch.ones(4), ("g", "y"), "cbrtgrad.torch.cbrt_grad")
    Traceback (most recent call last):
    ...
    RuntimeError: cbrtgrad.torch.cbrt_grad: g of shape (3,) and y of shape (4,) do not ...
    """
    try:
        return torch.broadcast_shapes(a.shape, b.shape)
    except RuntimeError as exc:
        raise RuntimeError(
            f"{where}: {names[0]} of shape {tuple(a.shape)} and {names[1]} of "
            f"shape {tuple(b.shape)} do not broadcast together ({exc})"
        ) from None


def op_dtype(a: torch.Tensor, b: torch.Tensor, names: tuple[str, str], where: str) -> torch.dtype:
    """The one float dtype and device of a two-input custom op's tensors, checked."""
    for value, name in ((a, names[0]), (b, names[1])):
        if value.dtype not in FLOATS:
            raise TypeError(
                f"{where}: {name} has dtype {value.dtype}; the op takes float16, "
                "bfloat16, float32 or float64 (cbrtgrad.torch's functions cast the others)"
            )
    if a.dtype != b.dtype:
        raise TypeError(
            f"{where}: {names[0]} has dtype {a.dtype} and {names[1]} {b.dtype}; the "
            "op takes one dtype (cbrtgrad.torch's functions promote them)"
        )
    if a.device != b.device:
        raise RuntimeError(
            f"{where}: expected all tensors to be on the same device, but "
            f"{names[0]} is on {a.device} and {names[1]} on {b.device}"
        )
    return a.dtype


def op_shape(a: torch.Tensor, b: torch.Tensor, names: tuple[str, str], where: str) -> torch.Size:
    """The checked dtypes and broadcast shape of a two-input custom op (its output's)."""
    op_dtype(a, b, names, where)
    return broadcast_shape(a, b, names, where)


def kernel_shape(
    a: torch.Tensor, b: torch.Tensor, names: tuple[str, str], where: str
) -> torch.Size:
    """:func:`op_shape` in a kernel, whose tensors have real sizes: equal shapes at once.

    ``torch.broadcast_shapes`` is Python (PyTorch's reference
    implementation), some 5 µs a call; the fake kernels keep it, which may
    see symbolic sizes.
    """
    op_dtype(a, b, names, where)
    if a.shape == b.shape:
        return a.shape
    return broadcast_shape(a, b, names, where)


def op_input(x: torch.Tensor, where: str) -> None:
    """Check the one input of a custom op: a float dtype the kernels compute."""
    if x.dtype not in FLOATS:
        raise TypeError(
            f"{where}: x has dtype {x.dtype}; the op takes float16, bfloat16, "
            "float32 or float64 (cbrtgrad.torch.cbrt casts the others)"
        )
