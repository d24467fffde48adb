"""The custom operators ``torch.ops.cbrtgrad.*``: kernels, fake kernels, autograd, vmap, autocast.

Three ops, named by the graph engine's schemas (:mod:`cbrtgrad.engine.cube_root`):

* ``cbrtgrad::cube_root(x)``: ``cbrt(x)``; saves its output.
* ``cbrtgrad::cube_root_grad(g, y)``: ``g / (3 y^2)`` (broadcast); saves both inputs.
* ``cbrtgrad::cube_root_and_grad(x, g)``: both in one pass over memory.

Each runs cbrtgrad's kernels on CPU tensors (:mod:`._host`) and CUDA tensors
(:mod:`._cuda`). The fake kernels say what a call returns without running
it (a new contiguous tensor of the broadcast shape, in the input dtype), so
``torch.compile`` traces the ops, ``torch.library.opcheck`` checks them and
meta tensors go through them. Autograd (``register_autograd``) uses the ops
themselves (:mod:`._derivatives`), so every derivative is differentiable
again; ``register_vmap`` batches them as the element-wise ops they are; an op
whose schema says ``FORCE_FP32`` casts half precision to float32 under
``torch.autocast`` (``register_autocast``).

NOTE: annotations are evaluated here (no ``from __future__ import
annotations``): ``custom_op`` reads the op's schema from them.
"""

from typing import Any

import torch
from torch import Tensor

from ..engine.cube_root import CubeRootBackward, CubeRootGradBackward
from ..engine.schema import AmpPolicy, schema_of
from ..kernels import kernel_ops
from . import _arguments, _cuda, _derivatives, _host

NAMESPACE = "cbrtgrad"
#: The fused op: the cube root's input and policy, both outputs (kernel_ops.py).
FUSED = schema_of(kernel_ops.CUBE_ROOT_AND_GRAD)
CUBE_ROOT = f"{NAMESPACE}::{CubeRootBackward.schema.name}"
CUBE_ROOT_GRAD = f"{NAMESPACE}::{CubeRootGradBackward.schema.name}"
CUBE_ROOT_AND_GRAD = f"{NAMESPACE}::{FUSED.name}"

# What would make a call of an op do more than run its CPU kernel (see
# reaches_cpu_kernel). NOTE: private functions of torch._C, the ones
# torch.autograd.Function.apply itself asks; without one of them (another
# PyTorch), every call goes through the dispatcher.


def _absent() -> bool:
    return True  # an answer that sends the call through the dispatcher


transforms_active = getattr(torch._C, "_are_functorch_transforms_active", _absent)
dispatch_modes = getattr(torch._C, "_len_torch_dispatch_stack", _absent)
function_modes = getattr(torch._C, "_is_torch_function_mode_enabled", _absent)
tracing = getattr(torch._C, "_get_tracing_state", _absent)  # None when not tracing
_autocast = torch.is_autocast_enabled
_PLAIN = (Tensor, torch.nn.Parameter)


def reaches_cpu_kernel(*tensors: Tensor) -> bool:
    """Whether a call of an op on ``tensors`` now would run its CPU kernel and nothing else.

    The dispatcher's way to a custom op's kernel is Python (the op's
    autograd, the disable-dynamo wrappers, the output checks): some 10 µs a
    call with one input, 19 with two (AMD Zen 4), several times the kernel's
    own call on a small tensor. The eager ``autograd.Function``s
    (:mod:`._functions`), which do the autograd themselves, call the kernel
    directly when this says nothing on that way would act: plain CPU tensors
    (no subclass, no meta or fake tensor), no ``torch.func`` transform, no
    dispatch or function mode, no ``torch.jit`` trace, no CPU autocast.

    Examples
    --------
    >>> reaches_cpu_kernel(torch.ones(2)), reaches_cpu_kernel(torch.ones(2, device="meta"))
    (True, False)
    >>> torch.func.vmap(lambda t: torch.tensor(reaches_cpu_kernel(t)))(torch.ones(2))
    tensor([False, False])
    """
    return reaches_float_kernel(*tensors) and not _autocast("cpu")


def reaches_float_kernel(*tensors: Tensor) -> bool:
    """:func:`reaches_cpu_kernel` for float32 and float64 tensors.

    NOTE: hot path (one-element calls): CPU autocast is not asked, as it
    leaves these dtypes as they are (``register_autocast`` casts neither
    float64 nor, to float32, float32; the gradient op has no autocast rule).

    Examples
    --------
    >>> with torch.autocast("cpu"):
    ...     reaches_float_kernel(torch.ones(2)), reaches_cpu_kernel(torch.ones(2))
    (True, False)
    """
    for t in tensors:
        if type(t) not in _PLAIN or not t.is_cpu:
            return False
    return not (
        transforms_active() or dispatch_modes() or function_modes() or tracing() is not None
    )


# -- cube_root -----------------------------------------------------------------


@torch.library.custom_op(CUBE_ROOT, mutates_args=(), device_types="cpu")
def cube_root(x: Tensor) -> Tensor:
    """``cbrt(x)``, correctly rounded in ``x``'s float dtype (the op ``cbrtgrad::cube_root``).

    Examples
    --------
    >>> torch.ops.cbrtgrad.cube_root(torch.tensor([-8.0, 27.0]))
    tensor([-2.,  3.])
    """
    _arguments.op_input(x, CUBE_ROOT)
    return _host.cube_root(x)


@cube_root.register_kernel("cuda")
def _cube_root_cuda(x: Tensor) -> Tensor:
    _arguments.op_input(x, CUBE_ROOT)
    return _cuda.cube_root(x)


@cube_root.register_fake
def _cube_root_fake(x: Tensor) -> Tensor:
    _arguments.op_input(x, CUBE_ROOT)
    return x.new_empty(x.shape)


# -- cube_root_grad --------------------------------------------------------------


@torch.library.custom_op(CUBE_ROOT_GRAD, mutates_args=(), device_types="cpu")
def cube_root_grad(g: Tensor, y: Tensor) -> Tensor:
    """``g / (3 y^2)`` broadcast, correctly rounded (the op ``cbrtgrad::cube_root_grad``).

    Examples
    --------
    >>> torch.ops.cbrtgrad.cube_root_grad(torch.tensor(12.0), torch.tensor([2.0, -2.0]))
    tensor([1., 1.])
    """
    shape = _arguments.kernel_shape(g, y, ("g", "y"), CUBE_ROOT_GRAD)
    return _host.cube_root_grad(g, y, shape)


@cube_root_grad.register_kernel("cuda")
def _cube_root_grad_cuda(g: Tensor, y: Tensor) -> Tensor:
    shape = _arguments.kernel_shape(g, y, ("g", "y"), CUBE_ROOT_GRAD)
    return _cuda.cube_root_grad(g, y, shape)


@cube_root_grad.register_fake
def _cube_root_grad_fake(g: Tensor, y: Tensor) -> Tensor:
    return y.new_empty(_arguments.op_shape(g, y, ("g", "y"), CUBE_ROOT_GRAD))


# -- cube_root_and_grad ----------------------------------------------------------


@torch.library.custom_op(CUBE_ROOT_AND_GRAD, mutates_args=(), device_types="cpu")
def cube_root_and_grad(x: Tensor, g: Tensor) -> tuple[Tensor, Tensor]:
    """``(cbrt(x), g / (3 y^2))`` broadcast (the op ``cbrtgrad::cube_root_and_grad``).

    Examples
    --------
    >>> torch.ops.cbrtgrad.cube_root_and_grad(torch.tensor([8.0]), torch.tensor([12.0]))
    (tensor([2.]), tensor([1.]))
    """
    shape = _arguments.kernel_shape(x, g, ("x", "g"), CUBE_ROOT_AND_GRAD)
    return _host.cube_root_and_grad(x, g, shape)


@cube_root_and_grad.register_kernel("cuda")
def _cube_root_and_grad_cuda(x: Tensor, g: Tensor) -> tuple[Tensor, Tensor]:
    shape = _arguments.kernel_shape(x, g, ("x", "g"), CUBE_ROOT_AND_GRAD)
    return _cuda.cube_root_and_grad(x, g, shape)


@cube_root_and_grad.register_fake
def _cube_root_and_grad_fake(x: Tensor, g: Tensor) -> tuple[Tensor, Tensor]:
    shape = _arguments.op_shape(x, g, ("x", "g"), CUBE_ROOT_AND_GRAD)
    return x.new_empty(shape), x.new_empty(shape)


# -- autograd: the derivatives made of the ops -------------------------------------


def _grad_op(g: Tensor, y: Tensor) -> Tensor:
    return cube_root_grad(g, y)  # type: ignore[no-any-return]


def _save_output(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    ctx.save_for_backward(output)
    ctx.x_shape = inputs[0].shape


def _cube_root_backward(ctx: Any, gy: Tensor) -> Tensor:
    (y,) = ctx.saved_tensors
    return _derivatives.cube_root(_grad_op, gy, y, ctx.x_shape)


def _save_inputs(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    ctx.save_for_backward(*inputs)


def _cube_root_grad_backward(ctx: Any, gz: Tensor) -> tuple[Tensor | None, Tensor | None]:
    g, y = ctx.saved_tensors
    return _derivatives.cube_root_grad(_grad_op, gz, g, y, ctx.needs_input_grad)


def _save_fused(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    x, g = inputs
    ctx.save_for_backward(output[0], g)
    ctx.shapes = (x.shape, g.shape)


def _fused_backward(ctx: Any, gy: Tensor, gdx: Tensor) -> tuple[Tensor | None, Tensor | None]:
    y, g = ctx.saved_tensors
    return _derivatives.cube_root_and_grad(
        _grad_op, gy, gdx, g, y, ctx.shapes, ctx.needs_input_grad
    )


cube_root.register_autograd(_cube_root_backward, setup_context=_save_output)
cube_root_grad.register_autograd(_cube_root_grad_backward, setup_context=_save_inputs)
cube_root_and_grad.register_autograd(_fused_backward, setup_context=_save_fused)


# -- vmap: element-wise ops batch as they are --------------------------------------


def _batch_first(tensors: tuple[Tensor, ...], in_dims: tuple[int | None, ...]) -> list[Tensor]:
    """The batched tensors with their batch dimension first, padded to one logical rank.

    An unbatched tensor stays as it is: broadcasting aligns it on the right.
    """
    rank = max(t.dim() - (d is not None) for t, d in zip(tensors, in_dims, strict=True))
    lifted = []
    for t, d in zip(tensors, in_dims, strict=True):
        if d is not None:
            t = t.movedim(d, 0)
            t = t.reshape(t.shape[:1] + (1,) * (rank + 1 - t.dim()) + t.shape[1:])
        lifted.append(t)
    return lifted


def _cube_root_vmap(info: Any, in_dims: tuple[int | None], x: Tensor) -> tuple[Tensor, Any]:
    return cube_root(x), in_dims[0]


def _cube_root_grad_vmap(
    info: Any, in_dims: tuple[int | None, int | None], g: Tensor, y: Tensor
) -> tuple[Tensor, Any]:
    return cube_root_grad(*_batch_first((g, y), in_dims)), 0


def _fused_vmap(
    info: Any, in_dims: tuple[int | None, int | None], x: Tensor, g: Tensor
) -> tuple[tuple[Tensor, Tensor], Any]:
    return cube_root_and_grad(*_batch_first((x, g), in_dims)), (0, 0)


cube_root.register_vmap(_cube_root_vmap)
cube_root_grad.register_vmap(_cube_root_grad_vmap)
cube_root_and_grad.register_vmap(_fused_vmap)


# -- autocast: the schemas' AMP policy ---------------------------------------------


def _register_autocast() -> None:
    # PyTorch's autocast has a rule per device type; the policy is the op's schema's.
    for op, schema in (
        (cube_root, CubeRootBackward.schema),
        (cube_root_grad, CubeRootGradBackward.schema),
        (cube_root_and_grad, FUSED),
    ):
        if schema.amp_policy is AmpPolicy.FORCE_FP32:
            for device in ("cpu", "cuda"):
                torch.library.register_autocast(op, device, torch.float32)


_register_autocast()
