"""The public functions ``cbrt``, ``cbrt_grad`` and ``cbrt_and_grad``, and the ops' autograd.

Each public function applies PyTorch's argument rules (:mod:`._arguments`;
tensors of one float32/float64 dtype, shape and device skip them, as they
would leave them), then goes one of three ways (:mod:`._routes`):

* a call that no autograd records on plain CPU tensors: the CPU kernel
  (:mod:`._cpu`), in C++ where the entry is built (:mod:`._native`);
* an eager call on plain CPU tensors that autograd records: its op's
  ``autograd.Function`` below, by its C++ ``apply``;
* every other call, traced or transformed (``torch.compile``,
  ``torch.export``, ``torch.func``, ``forward_ad``, PyTorch's batched
  gradients, ``torch.jit``), and on other tensors: the op
  (``torch.ops.cbrtgrad.*``, :mod:`._ops`), whose autograd kernel is the
  same Function (:func:`._ops.register_autograd`).

So there is one Function per op: its ``setup_context`` saves what the op's
schema says, its ``backward`` and ``jvp`` are the derivatives of
:mod:`._derivatives`, made of the gradient op, so every derivative is
differentiable again, in reverse and forward mode. The eager call applies
it with a forward that calls the CPU kernel (the route has checked that the
op would do nothing else, :func:`._ops.reaches_cpu_kernel`: the op's Python
dispatch is 10 to 20 µs); the op's autograd kernel applies its twin
(:data:`OP_FUNCTIONS`), whose forward is the op below autograd. Both make
the node ``CubeRootBackward`` (``CubeRootGradBackward``, ...).

TorchScript compiles the public functions' ``torch.jit.is_scripting()``
branch, a call of the op, as torchvision's ops do; ``torch.jit.trace``
records the op (a trace is a mode under which every call is the op's).
"""

from __future__ import annotations

from typing import Any

import torch

from ..engine.cube_root import CubeRootBackward
from . import _arguments, _cpu, _derivatives, _ops, _routes


def _grad(g: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    # NOTE: the shapes are compared only where untracked (so not in a
    # torch.jit trace, which would record the test, with a TracerWarning).
    if g.dtype is y.dtype and y.dtype in _routes.KERNEL_DTYPES:
        if _routes.untracked_float(g, y):  # NOTE: hot path (a backward without create_graph)
            return _cpu.cube_root_grad(g, y, y.shape if g.shape == y.shape else _grad_shape(g, y))
    elif _routes.untracked(g, y):
        return _cpu.cube_root_grad(g, y, _grad_shape(g, y))
    return _routes.call(CubeRootGrad, _ops.cube_root_grad, g, y)


def _grad_shape(g: torch.Tensor, y: torch.Tensor) -> torch.Size:
    # What the op's kernel checks, with its words: a direct call errs as the op would.
    return _arguments.kernel_shape(g, y, ("g", "y"), _ops.CUBE_ROOT_GRAD)


def _fused_shape(x: torch.Tensor, g: torch.Tensor) -> torch.Size:
    return _arguments.kernel_shape(x, g, ("x", "g"), _ops.CUBE_ROOT_AND_GRAD)


class CubeRoot(torch.autograd.Function):
    """``y = cbrt(x)``, saving ``y``. Its node is ``CubeRootBackward``, as the engine's."""

    @staticmethod
    def forward(x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return _cpu.cube_root(x)  # NOTE: hot path (one element requiring grad)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        ctx.save_for_backward(output)  # the output, not the input (the op's schema)
        # NOTE: always: no Python test tells forward mode inside a compiled
        # graph (_ops.register_autograd); the C++ apply asks the jvp where an
        # input has a tangent and drops these saves when it returns.
        ctx.save_for_forward(output)

    @staticmethod
    def backward(ctx: Any, gy: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        (y,) = ctx.saved_tensors
        return _derivatives.cube_root(_grad, gy, y, y.shape)  # y has x's shape

    @staticmethod
    def jvp(ctx: Any, tx: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return _derivatives.cube_root_jvp(_grad, tx, y)


class CubeRootGrad(torch.autograd.Function):
    """``g / (3 y^2)``, saving ``g`` and ``y``, differentiable again through itself."""

    @staticmethod
    def forward(g: torch.Tensor, y: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        if g.dtype is y.dtype and y.dtype in _routes.KERNEL_DTYPES and g.shape == y.shape:
            return _cpu.cube_root_grad(g, y, y.shape)
        return _cpu.cube_root_grad(g, y, _grad_shape(g, y))

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        ctx.save_for_backward(*inputs)
        ctx.save_for_forward(*inputs)

    @staticmethod
    def backward(ctx: Any, gz: torch.Tensor) -> tuple[Any, Any]:  # type: ignore[override]
        g, y = ctx.saved_tensors
        return _derivatives.cube_root_grad(_grad, gz, g, y, ctx.needs_input_grad)

    @staticmethod
    def jvp(ctx: Any, tg: torch.Tensor | None, ty: torch.Tensor | None) -> Any:
        g, y = ctx.saved_tensors
        return _derivatives.cube_root_grad_jvp(_grad, tg, ty, g, y)


class CubeRootAndGrad(torch.autograd.Function):
    """``(cbrt(x), g / (3 y^2))``, saving ``y`` and ``g``."""

    @staticmethod
    def forward(x: torch.Tensor, g: torch.Tensor) -> Any:  # type: ignore[override]
        if x.dtype is g.dtype and x.dtype in _routes.KERNEL_DTYPES and x.shape == g.shape:
            return _cpu.cube_root_and_grad(x, g, x.shape)
        return _cpu.cube_root_and_grad(x, g, _fused_shape(x, g))

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        x, g = inputs
        ctx.save_for_backward(output[0], g)
        ctx.shapes = (x.shape, g.shape)
        ctx.save_for_forward(output[0], g)

    @staticmethod
    def backward(ctx: Any, gy: torch.Tensor, gdx: torch.Tensor) -> tuple[Any, Any]:  # type: ignore[override]
        y, g = ctx.saved_tensors
        return _derivatives.cube_root_and_grad(
            _grad, gy, gdx, g, y, ctx.shapes, ctx.needs_input_grad
        )

    @staticmethod
    def jvp(ctx: Any, tx: torch.Tensor | None, tg: torch.Tensor | None) -> Any:
        y, g = ctx.saved_tensors
        return _derivatives.cube_root_and_grad_jvp(_grad, tx, tg, g, y)


def _op_twin(function: Any, op: Any) -> Any:
    """``function`` for ``op``'s autograd kernel: its forward is ``op`` below autograd.

    The same class otherwise (its name, so the node is ``CubeRootBackward``
    on every route, its saves and derivatives): the eager ``function``'s
    forward calls the CPU kernel, which :func:`._routes.call` has checked
    is all the op would run.
    """

    def forward(*args: torch.Tensor) -> Any:
        return _ops.below_autograd(op, *args)

    doc = f"{function.__name__}, whose forward is the op {op._schema.name} below autograd."
    return type(function.__name__, (function,), {"forward": staticmethod(forward), "__doc__": doc})


#: The ops' autograd: each op's Function (:func:`._ops.register_autograd`).
OP_FUNCTIONS = {
    op: _op_twin(function, op)
    for op, function in (
        (_ops.cube_root, CubeRoot),
        (_ops.cube_root_grad, CubeRootGrad),
        (_ops.cube_root_and_grad, CubeRootAndGrad),
    )
}
for _op, _function in OP_FUNCTIONS.items():
    _ops.register_autograd(_op, _function)
_scripting = (
    torch.jit.is_scripting
)  # NOTE: TorchScript knows it by identity; a name less to look up


def cbrt(x: torch.Tensor) -> torch.Tensor:
    """Element-wise real cube root of a tensor, ``sgn(x) |x|^(1/3)``, correctly rounded.

    Differentiable (the gradient ``g / (3 y^2)`` from the saved output,
    correctly rounded, and differentiable again), traceable by
    ``torch.compile`` and transformable by ``torch.func``.

    Parameters
    ----------
    x : torch.Tensor
        On the CPU or a CUDA device, of any strides.

    Returns
    -------
    torch.Tensor
        A new contiguous tensor on ``x``'s device. float16, bfloat16, float32
        and float64 give their own dtype, correctly rounded in it; bool and
        integers give PyTorch's default dtype (as ``torch.sqrt``). Under
        ``torch.autocast`` half precision gives float32 (the op's
        ``FORCE_FP32`` policy), and its gradient comes back in the input's dtype.

    Raises
    ------
    TypeError
        For an argument that is not a tensor, and for complex and other
        dtypes, naming it.

    See Also
    --------
    cbrtgrad.cbrt : the same bits on numpy arrays.

    Examples
    --------
    >>> import torch, cbrtgrad.torch as ct
    >>> ct.cbrt(torch.tensor([-27.0, -0.0, 8.0, float("inf")]))
    tensor([-3., -0.,  2., inf])
    >>> x = torch.tensor([8.0], dtype=torch.float64, requires_grad=True)
    >>> (dx,) = torch.autograd.grad(ct.cbrt(x).sum(), x, create_graph=True)
    >>> dx, torch.autograd.grad(dx.sum(), x)[0]  # 1 / (3 y^2), -2 / (9 y^5)
    (tensor([0.0833], dtype=torch.float64, grad_fn=...), tensor([-0.0069], dtype=torch.float64))
    >>> ct.cbrt(torch.tensor([1, 8, 64]))
    tensor([1., 2., 4.])
    """
    if not _scripting():  # TorchScript compiles the op's call below, as torchvision's ops
        y = _cpu.entry_result("cube_root", x)  # NOTE: hot path: a small untracked call, in C++
        if y is not None:
            return y  # type: ignore[no-any-return]
        if type(x) is torch.Tensor and x.dtype in _routes.KERNEL_DTYPES:
            # NOTE: hot path: PyTorch's rules and autocast leave these as they are.
            if not (x.requires_grad and torch.is_grad_enabled()):
                y = _routes.cube_root_now(x)
                if y is not None:
                    return y
                if _routes.untracked_float(x):
                    return _cpu.cube_root(x)
        else:
            x = _arguments.one(x, "x", "cbrtgrad.torch.cbrt")
            x = _arguments.autocast(x, CubeRootBackward.schema)
            if _routes.untracked(x):
                return _cpu.cube_root(x)
            return _routes.call(CubeRoot, _ops.cube_root, x)  # type: ignore[no-any-return]
        return _routes.call_float(CubeRoot, _ops.cube_root, x)  # type: ignore[no-any-return]
    return torch.ops.cbrtgrad.cube_root(_script_float(x))


def cbrt_grad(g: Any, y: Any) -> torch.Tensor:
    """Gradient of the cube root from its saved output: ``g / (3 y^2)``, correctly rounded.

    Parameters
    ----------
    g : torch.Tensor or number
        Upstream gradient ``dL/dy``.
    y : torch.Tensor or number
        The saved output ``cbrt(x)`` (not ``x``). At least one of ``g`` and
        ``y`` is a tensor; they broadcast together.

    Returns
    -------
    torch.Tensor
        In the dtype ``torch.add(g, y)`` would have (bool and integers: the
        default dtype), on their device. At ``y = 0`` IEEE division: ``inf``
        with the sign of ``g``, ``nan`` for ``g = 0`` (as ``jax.grad(jnp.cbrt)(0.0)``).

    Raises
    ------
    TypeError
        For an argument that is neither a tensor nor a number, and for complex
        dtypes, naming it.
    RuntimeError
        For tensors on two devices, or shapes that do not broadcast, naming both.

    Examples
    --------
    >>> import torch, cbrtgrad.torch as ct
    >>> ct.cbrt_grad(torch.tensor([12.0, 1.0, 1.0]), torch.tensor([2.0, -1.0, 0.0]))
    tensor([1.0000, 0.3333,    inf])
    """
    if not _scripting():  # TorchScript compiles the op's call below, as torchvision's ops
        dx = _cpu.entry_result("cube_root_grad", g, y)  # NOTE: hot path: as cbrt's
        if dx is not None:
            return dx  # type: ignore[no-any-return]
        if not _routes.one_float(g, y):
            g, y = _arguments.two(g, y, ("g", "y"), "cbrtgrad.torch.cbrt_grad")
        return _grad(g, y)
    g, y = _script_pair(g, y, "g", "y")
    return torch.ops.cbrtgrad.cube_root_grad(g, y)


def cbrt_and_grad(x: Any, g: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Forward and backward in one pass over memory: ``(cbrt(x), g / (3 y^2))``.

    The bits of :func:`cbrt` then :func:`cbrt_grad` (the fused kernel of
    :func:`cbrtgrad.cbrt_and_grad` on float32 and float64).

    Parameters
    ----------
    x : torch.Tensor
        Input of the cube root.
    g : torch.Tensor or number
        Upstream gradient, broadcast against ``x``.

    Returns
    -------
    (torch.Tensor, torch.Tensor)
        ``y`` and ``dL/dx``, both of the broadcast shape, in the promoted dtype.
        Both are differentiable in ``x`` and ``g``.

    Raises
    ------
    TypeError, RuntimeError
        As :func:`cbrt` and :func:`cbrt_grad`.

    Examples
    --------
    >>> import torch, cbrtgrad.torch as ct
    >>> ct.cbrt_and_grad(torch.tensor([8.0, -1.0]), torch.tensor([12.0, 3.0]))
    (tensor([ 2., -1.]), tensor([1., 1.]))
    """
    if not _scripting():  # TorchScript compiles the op's call below, as torchvision's ops
        pair = _cpu.entry_result("cube_root_and_grad", x, g)  # NOTE: hot path: as cbrt's
        if pair is not None:
            return pair  # type: ignore[no-any-return]
        if _routes.one_float(x, g):
            if _routes.untracked_float(x, g):
                return _cpu.cube_root_and_grad(x, g, x.shape)
            return _routes.call_float(CubeRootAndGrad, _ops.cube_root_and_grad, x, g)
        x = _arguments.one(x, "x", "cbrtgrad.torch.cbrt_and_grad")
        x = _arguments.autocast(x, _ops.FUSED)
        x, g = _arguments.two(x, g, ("x", "g"), "cbrtgrad.torch.cbrt_and_grad")
        if _routes.untracked(x, g):
            return _cpu.cube_root_and_grad(x, g, _fused_shape(x, g))
        return _routes.call(CubeRootAndGrad, _ops.cube_root_and_grad, x, g)
    x, g = _script_pair(x, g, "x", "g")
    return torch.ops.cbrtgrad.cube_root_and_grad(x, g)


def _script_float(x: torch.Tensor) -> torch.Tensor:
    # In TorchScript: bool and integers in the default dtype, as torch.sqrt
    # (a float's promotion with a tensor); the op names any other dtype.
    return x.to(torch.result_type(x, 1.0))


def _script_pair(a: Any, b: Any, name_a: str, name_b: str) -> tuple[torch.Tensor, torch.Tensor]:
    # In TorchScript: two tensors, promoted as torch.add, then as _script_float.
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        dtype = torch.result_type(torch.empty(0, dtype=torch.result_type(a, b)), 1.0)
        return a.to(dtype), b.to(dtype)
    raise TypeError(
        "cbrtgrad.torch: in TorchScript, " + name_a + " and " + name_b + " must be tensors"
    )
