"""The custom operators ``torch.ops.cbrtgrad.*``: kernels, fake kernels, autograd, vmap, autocast.

Three ops, named by the graph engine's schemas (:mod:`cbrtgrad.engine.cube_root`):

* ``cbrtgrad::cube_root(x)``: ``cbrt(x)``; saves its output.
* ``cbrtgrad::cube_root_grad(g, y)``: ``g / (3 y^2)`` (broadcast); saves both inputs.
* ``cbrtgrad::cube_root_and_grad(x, g)``: both in one pass over memory.

Each runs cbrtgrad's kernels on CPU tensors (:mod:`._cpu`) and CUDA tensors
(:mod:`._cuda`). The fake kernels say what a call returns without running
it (a new contiguous tensor of the broadcast shape, in the input dtype), so
``torch.compile`` and ``torch.export`` trace the ops, ``torch.library.opcheck``
checks them and meta tensors go through them. ``register_vmap`` batches them
as the element-wise ops they are; an op whose schema says ``FORCE_FP32``
casts half precision to float32 under ``torch.autocast``.

Every call of the bridge that is traced or transformed (``torch.compile``,
``torch.export``, ``torch.func``, ``torch.autograd.forward_ad``, PyTorch's
batched gradients, ``torch.jit``) is a call of these ops, so each transform
takes the ops' own rules. Their autograd kernel (:func:`register_autograd`)
applies an ``autograd.Function`` with a ``setup_context``, a ``backward``
and a ``jvp`` (:mod:`._functions`): reverse and forward mode, at every
level of nested ``torch.func`` transforms, as PyTorch's own ops have them.

NOTE: why not ``torch.library.custom_op`` with ``register_autograd``: the
autograd kernel that registers applies an old-style ``Function`` (no
``setup_context``), which ``torch.func.grad``, ``vjp`` and ``jacrev``
refuse ("must override the setup_context staticmethod", PyTorch issues
168393 and 179652), and has no forward-mode rule (``torch.library`` has no
forward-mode registration): under ``torch.func.jvp`` or ``forward_ad`` the
op's tangent came out zero, without a word. The ops are defined with
``torch.library.Library`` instead, whose Autograd key takes a kernel of
ours; the rest (fake kernels, vmap, autocast) is ``torch.library``'s.
"""

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor
from torch.autograd import forward_ad

from ..engine.cube_root import CubeRootBackward, CubeRootGradBackward
from ..engine.schema import AmpPolicy, schema_of
from ..kernels import kernel_ops
from . import _arguments, _cpu, _cuda

NAMESPACE = "cbrtgrad"
#: The fused op: the cube root's input and policy, both outputs (kernel_ops.py).
FUSED = schema_of(kernel_ops.CUBE_ROOT_AND_GRAD)
CUBE_ROOT = f"{NAMESPACE}::{CubeRootBackward.schema.name}"
CUBE_ROOT_GRAD = f"{NAMESPACE}::{CubeRootGradBackward.schema.name}"
CUBE_ROOT_AND_GRAD = f"{NAMESPACE}::{FUSED.name}"
#: Each op's arguments and results (what ``custom_op`` would infer from a signature).
_SIGNATURES = {
    CUBE_ROOT: "(Tensor x) -> Tensor",
    CUBE_ROOT_GRAD: "(Tensor g, Tensor y) -> Tensor",
    CUBE_ROOT_AND_GRAD: "(Tensor x, Tensor g) -> (Tensor, Tensor)",
}
LIBRARY = torch.library.Library(NAMESPACE, "DEF")
for _qualified, _signature in _SIGNATURES.items():
    # pt2_compliant, as custom_op tags its ops: no mutation, no aliasing, fake kernels.
    LIBRARY.define(_qualified.split("::")[1] + _signature, tags=(torch.Tag.pt2_compliant_tag,))

#: The ops (``torch.ops.cbrtgrad.*.default``): every traced or transformed call is one of these.
cube_root = torch.ops.cbrtgrad.cube_root.default
cube_root_grad = torch.ops.cbrtgrad.cube_root_grad.default
cube_root_and_grad = torch.ops.cbrtgrad.cube_root_and_grad.default

# What would make a call of an op do more than run its CPU kernel (see
# reaches_cpu_kernel). NOTE: private functions of torch._C, the ones
# torch.autograd.Function.apply itself asks; without one of them (another
# PyTorch), every call goes through the dispatcher.


def _absent() -> bool:
    return True  # an answer that sends the call through the dispatcher


def _not_known(t: Tensor) -> bool:
    return True  # as _absent, for a test of one tensor


transforms_active = getattr(torch._C, "_are_functorch_transforms_active", _absent)
dispatch_modes = getattr(torch._C, "_len_torch_dispatch_stack", _absent)
function_modes = getattr(torch._C, "_is_torch_function_mode_enabled", _absent)
tracing = getattr(torch._C, "_get_tracing_state", _absent)  # None when not tracing
#: PyTorch's own batched tensors (``torch.autograd.functional.jacobian(vectorize=True)``,
#: ``is_grads_batched``, ``gradcheck(check_batched_grad=True)``), which look like plain CPU
#: tensors (type, device, dtype, strides) and have no memory of their own to read.
legacy_batched = getattr(
    getattr(torch._C, "_functorch", None), "is_legacy_batchedtensor", _not_known
)
_autocast = torch.is_autocast_enabled
_PLAIN = (Tensor, torch.nn.Parameter)


def reaches_cpu_kernel(*tensors: Tensor) -> bool:
    """Whether a call of an op on ``tensors`` now would run its CPU kernel and nothing else.

    The dispatcher's way to a custom op's kernel is Python (the op's
    autograd, the disable-dynamo wrappers, the output checks): several
    times the kernel's
    own call on a small tensor. The eager ``autograd.Function``s
    (:mod:`._functions`), which do the autograd themselves, call the kernel
    directly when this says nothing on that way would act: plain CPU tensors
    (no subclass, no meta or fake tensor), no ``torch.func`` transform, no
    dispatch or function mode, no ``torch.jit`` trace, no CPU autocast, no
    batched tensor of PyTorch's batched gradients. Every other call goes
    through the ops.

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
        if type(t) not in _PLAIN or not t.is_cpu or legacy_batched(t):
            return False
    return not (
        transforms_active() or dispatch_modes() or function_modes() or tracing() is not None
    )


# -- the kernels ------------------------------------------------------------------
# NOTE: each wrapped in torch._disable_dynamo, as custom_op wraps its kernels:
# a kernel is Python that the dispatcher runs, never something for dynamo to trace.


def _cube_root_cpu(x: Tensor) -> Tensor:
    _arguments.op_input(x, CUBE_ROOT)
    return _cpu.cube_root(x)


def _cube_root_cuda(x: Tensor) -> Tensor:
    _arguments.op_input(x, CUBE_ROOT)
    return _cuda.cube_root(x)


def _cube_root_fake(x: Tensor) -> Tensor:
    _arguments.op_input(x, CUBE_ROOT)
    return x.new_empty(x.shape)


def _cube_root_grad_cpu(g: Tensor, y: Tensor) -> Tensor:
    shape = _arguments.kernel_shape(g, y, ("g", "y"), CUBE_ROOT_GRAD)
    return _cpu.cube_root_grad(g, y, shape)


def _cube_root_grad_cuda(g: Tensor, y: Tensor) -> Tensor:
    shape = _arguments.kernel_shape(g, y, ("g", "y"), CUBE_ROOT_GRAD)
    return _cuda.cube_root_grad(g, y, shape)


def _cube_root_grad_fake(g: Tensor, y: Tensor) -> Tensor:
    return y.new_empty(_arguments.op_shape(g, y, ("g", "y"), CUBE_ROOT_GRAD))


def _fused_cpu(x: Tensor, g: Tensor) -> tuple[Tensor, Tensor]:
    shape = _arguments.kernel_shape(x, g, ("x", "g"), CUBE_ROOT_AND_GRAD)
    return _cpu.cube_root_and_grad(x, g, shape)


def _fused_cuda(x: Tensor, g: Tensor) -> tuple[Tensor, Tensor]:
    shape = _arguments.kernel_shape(x, g, ("x", "g"), CUBE_ROOT_AND_GRAD)
    return _cuda.cube_root_and_grad(x, g, shape)


def _fused_fake(x: Tensor, g: Tensor) -> tuple[Tensor, Tensor]:
    shape = _arguments.op_shape(x, g, ("x", "g"), CUBE_ROOT_AND_GRAD)
    return x.new_empty(shape), x.new_empty(shape)


_KERNELS: tuple[tuple[str, Callable[..., Any], Callable[..., Any], Callable[..., Any]], ...] = (
    (CUBE_ROOT, _cube_root_cpu, _cube_root_cuda, _cube_root_fake),
    (CUBE_ROOT_GRAD, _cube_root_grad_cpu, _cube_root_grad_cuda, _cube_root_grad_fake),
    (CUBE_ROOT_AND_GRAD, _fused_cpu, _fused_cuda, _fused_fake),
)
for _name, _host_kernel, _device, _fake in _KERNELS:
    LIBRARY.impl(_name.split("::")[1], torch._disable_dynamo(_host_kernel), "CPU")
    LIBRARY.impl(_name.split("::")[1], torch._disable_dynamo(_device), "CUDA")
    torch.library.register_fake(_name, _fake, lib=LIBRARY)


# -- autograd: a Function per op, at the Autograd key ------------------------------


def below_autograd(op: Any, *args: Tensor) -> Any:
    """``op(*args)`` with this level's autograd done: a Function's forward, from the op's kernel.

    Under ``torch.func`` transforms the lower levels differentiate the op
    again, each with its own autograd kernel: grad mode and forward mode are
    on for them, as ``torch.func`` turns them on in a ``Function``'s forward
    (``custom_function_call``), which ``Function.apply`` turns off.
    """
    if transforms_active():
        with (
            torch.enable_grad(),
            forward_ad._set_fwd_grad_enabled(True),
            torch._C._AutoDispatchBelowAutograd(),
        ):
            return op(*args)
    with torch._C._AutoDispatchBelowAutograd():
        return op(*args)


def register_autograd(op: Any, function: Any) -> None:
    """Make ``function`` (an ``autograd.Function``) ``op``'s autograd: its Autograd-key kernel.

    Its forward calls ``op`` again through :func:`below_autograd`. Every
    call applies the Function, which decides in C++, as PyTorch's own ops'
    autograd kernels do, whether reverse mode records the call (grad mode,
    inputs requiring grad) and whether forward mode asks its ``jvp`` (an
    input with a tangent at the forward-mode level).

    NOTE: why no shortcut below autograd where nothing seems to
    differentiate the call: forward mode cannot be told from Python.
    ``forward_ad``'s level counter is Python's own; a graph of
    ``torch.compile`` enters a ``dual_level`` written inside the compiled
    function with ``torch._C._enter_dual_level``, which leaves the counter
    at -1, so a shortcut read from it dropped every tangent there (``None``,
    without a word). Asking each input for its tangent
    (``torch._VF._unpack_dual``) makes a view per input and costs more than
    the Function's own test. The eager routes (:mod:`._routes`) run outside
    compiled graphs, where the counter is right, and keep their shortcuts.

    NOTE: the Function is applied with its C++ ``apply``: inside a
    ``torch.func`` level (the dispatcher has already entered it) its
    tensors are that level's, and ``Function.apply``'s way into the
    transforms (``custom_function_call``) would enter the level again;
    PyTorch allows the C++ ``apply`` there only inside
    ``enable_single_level_autograd_function``, which ``torch.func`` itself
    uses for each level of a ``Function``.
    """
    from torch._functorch.utils import enable_single_level_autograd_function

    apply = super(torch.autograd.Function, function).apply

    def kernel(*args: Tensor) -> Any:
        if transforms_active():
            with enable_single_level_autograd_function():
                return apply(*args)
        return apply(*args)

    LIBRARY.impl(op._schema.name.split("::")[1], kernel, "Autograd")


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


torch.library.register_vmap(CUBE_ROOT, _cube_root_vmap, lib=LIBRARY)
torch.library.register_vmap(CUBE_ROOT_GRAD, _cube_root_grad_vmap, lib=LIBRARY)
torch.library.register_vmap(CUBE_ROOT_AND_GRAD, _fused_vmap, lib=LIBRARY)


# -- autocast: the schemas' AMP policy ---------------------------------------------


def _register_autocast() -> None:
    # PyTorch's autocast has a rule per device type; the policy is the op's schema's.
    for op, schema in (
        (CUBE_ROOT, CubeRootBackward.schema),
        (CUBE_ROOT_GRAD, CubeRootGradBackward.schema),
        (CUBE_ROOT_AND_GRAD, FUSED),
    ):
        if schema.amp_policy is AmpPolicy.FORCE_FP32:
            for device in ("cpu", "cuda"):
                torch.library.register_autocast(op, device, torch.float32, lib=LIBRARY)


_register_autocast()
