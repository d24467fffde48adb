"""The public functions: ``cbrt``, ``cbrt_grad`` and ``cbrt_and_grad`` on tensors.

Each applies PyTorch's argument rules (:mod:`._arguments`; tensors of one
float32/float64 dtype, shape and device skip them, as they would leave
them), then calls its custom op (:mod:`._ops`) through an
``autograd.Function``, unless no autograd would record the call
(:func:`._routes.untracked`); then it calls the CPU kernel (:mod:`._host`)
directly, as the backward does for the gradient when it builds no graph.
:mod:`._routes` says which way a call goes, and calls a Function's C++
``apply`` without ``Function.apply``'s Python.

NOTE: why ``autograd.Function`` around the custom ops, when the ops have
their own ``register_autograd``: ``torch.func.grad``, ``jacrev`` and
``vjp`` refuse an op whose autograd comes from ``register_autograd`` alone
("must override the setup_context staticmethod", PyTorch issues 168393
and 179652). A ``Function`` with ``setup_context`` and
``generate_vmap_rule = True`` transforms under ``torch.func`` (its vmap rule
runs the ops' ``register_vmap`` rules); the ops keep ``register_autograd``
for their direct callers and for ``torch.library.opcheck``. Both backwards
are the same derivatives (:mod:`._derivatives`): here with these Functions,
so that a backward is itself a Function that ``torch.func`` can
differentiate again.

Each Function comes twice: ``Traced*`` (reverse mode) and a subclass with a
``jvp`` (forward mode too). Eager calls take the subclass; ``torch.compile``
traces the other, because dynamo refuses a ``Function`` with a custom
``jvp`` (a graph break, "Unsupported custom jvp").

The eager subclasses' forwards call the CPU kernels (:mod:`._host`)
themselves when the dispatcher would do nothing but run them
(:func:`._ops.reaches_cpu_kernel`), and the ops otherwise: the bits are the
same, the dispatcher's Python (10 to 20 µs a call) is skipped. A profile
then shows the Function's node (``CubeRoot``), not the op.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from ..engine.cube_root import CubeRootBackward
from . import _arguments, _derivatives, _host, _ops, _routes


def _grad(g: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if g.dtype is y.dtype and y.dtype in _routes.KERNEL_DTYPES and g.shape == y.shape:
        if _routes.untracked_float(g, y):  # NOTE: hot path (a backward without create_graph)
            return _host.cube_root_grad(g, y, y.shape)
    elif _routes.untracked(g, y):
        return _host.cube_root_grad(g, y, _grad_shape(g, y))
    return _routes.apply(CubeRootGrad, TracedCubeRootGrad, g, y)  # type: ignore[no-any-return]


def _grad_shape(g: torch.Tensor, y: torch.Tensor) -> torch.Size:
    # What the op's kernel checks, with its words: a direct call errs as the op would.
    return _arguments.kernel_shape(g, y, ("g", "y"), _ops.CUBE_ROOT_GRAD)


def _fused_shape(x: torch.Tensor, g: torch.Tensor) -> torch.Size:
    return _arguments.kernel_shape(x, g, ("x", "g"), _ops.CUBE_ROOT_AND_GRAD)


class TracedCubeRoot(torch.autograd.Function):
    """``y = cbrt(x)``, saving ``y``: reverse mode only (what ``torch.compile`` traces)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return _ops.cube_root(x)  # type: ignore[no-any-return]

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        ctx.save_for_backward(output)  # the output, not the input (the op's schema)

    @staticmethod
    def backward(ctx: Any, gy: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        (y,) = ctx.saved_tensors
        return _derivatives.cube_root(_grad, gy, y, y.shape)  # y has x's shape


class CubeRoot(TracedCubeRoot):
    """``y = cbrt(x)`` with forward mode too. Its node is ``CubeRootBackward``, as the engine's."""

    @staticmethod
    def forward(x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        if x.dtype in _routes.KERNEL_DTYPES:
            if _ops.reaches_float_kernel(x):  # NOTE: hot path (one element requiring grad)
                return _host.cube_root(x)
        elif _ops.reaches_cpu_kernel(x):
            return _host.cube_root(x)
        return _ops.cube_root(x)  # type: ignore[no-any-return]

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        ctx.save_for_backward(output)
        if _routes.forward_mode():
            ctx.save_for_forward(output)

    @staticmethod
    def jvp(ctx: Any, tx: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return _derivatives.cube_root_jvp(_grad, tx, y)


class TracedCubeRootGrad(torch.autograd.Function):
    """``g / (3 y^2)``, saving ``g`` and ``y``, differentiable again through itself."""

    generate_vmap_rule = True

    @staticmethod
    def forward(g: torch.Tensor, y: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return _ops.cube_root_grad(g, y)  # type: ignore[no-any-return]

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx: Any, gz: torch.Tensor) -> tuple[Any, Any]:  # type: ignore[override]
        g, y = ctx.saved_tensors
        return _derivatives.cube_root_grad(_grad, gz, g, y, ctx.needs_input_grad)


class CubeRootGrad(TracedCubeRootGrad):
    """``g / (3 y^2)`` with forward mode too."""

    @staticmethod
    def forward(g: torch.Tensor, y: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        if g.dtype is y.dtype and y.dtype in _routes.KERNEL_DTYPES and g.shape == y.shape:
            if _ops.reaches_float_kernel(g, y):
                return _host.cube_root_grad(g, y, y.shape)
        elif _ops.reaches_cpu_kernel(g, y):
            return _host.cube_root_grad(g, y, _grad_shape(g, y))
        return _ops.cube_root_grad(g, y)  # type: ignore[no-any-return]

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        TracedCubeRootGrad.setup_context(ctx, inputs, output)
        if _routes.forward_mode():
            ctx.save_for_forward(*inputs)

    @staticmethod
    def jvp(ctx: Any, tg: torch.Tensor | None, ty: torch.Tensor | None) -> Any:
        g, y = ctx.saved_tensors
        return _derivatives.cube_root_grad_jvp(_grad, tg, ty, g, y)


class TracedCubeRootAndGrad(torch.autograd.Function):
    """``(cbrt(x), g / (3 y^2))``, saving ``y`` and ``g``."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: torch.Tensor, g: torch.Tensor) -> Any:  # type: ignore[override]
        return _ops.cube_root_and_grad(x, g)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        x, g = inputs
        ctx.save_for_backward(output[0], g)
        ctx.shapes = (x.shape, g.shape)

    @staticmethod
    def backward(ctx: Any, gy: torch.Tensor, gdx: torch.Tensor) -> tuple[Any, Any]:  # type: ignore[override]
        y, g = ctx.saved_tensors
        return _derivatives.cube_root_and_grad(
            _grad, gy, gdx, g, y, ctx.shapes, ctx.needs_input_grad
        )


class CubeRootAndGrad(TracedCubeRootAndGrad):
    """``(cbrt(x), g / (3 y^2))`` with forward mode too."""

    @staticmethod
    def forward(x: torch.Tensor, g: torch.Tensor) -> Any:  # type: ignore[override]
        if x.dtype is g.dtype and x.dtype in _routes.KERNEL_DTYPES and x.shape == g.shape:
            if _ops.reaches_float_kernel(x, g):
                return _host.cube_root_and_grad(x, g, x.shape)
        elif _ops.reaches_cpu_kernel(x, g):
            return _host.cube_root_and_grad(x, g, _fused_shape(x, g))
        return _ops.cube_root_and_grad(x, g)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        TracedCubeRootAndGrad.setup_context(ctx, inputs, output)
        if _routes.forward_mode():
            ctx.save_for_forward(output[0], inputs[1])

    @staticmethod
    def jvp(ctx: Any, tx: torch.Tensor | None, tg: torch.Tensor | None) -> Any:
        y, g = ctx.saved_tensors
        return _derivatives.cube_root_and_grad_jvp(_grad, tx, tg, g, y)


# NOTE: Function.apply binds the forward's default arguments through
# inspect.signature on every call when setup_context is defined (PyTorch
# 2.13, torch/autograd/function.py); a signature kept on the function is
# found at once instead of being built again: one element's ``cbrt`` 42 to
# 35 us (AMD Zen 4).
for _function in (
    TracedCubeRoot,
    TracedCubeRootGrad,
    TracedCubeRootAndGrad,
    CubeRoot,
    CubeRootGrad,
    CubeRootAndGrad,
):
    _function.forward.__signature__ = inspect.signature(_function.forward)  # type: ignore[union-attr]


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
    y = _host.entry_result("cube_root", x)  # NOTE: hot path: a small untracked call, in C++
    if y is not None:
        return y  # type: ignore[no-any-return]
    if type(x) is torch.Tensor and x.dtype in _routes.KERNEL_DTYPES:
        # NOTE: hot path: PyTorch's rules and autocast leave these as they are.
        if not (x.requires_grad and torch.is_grad_enabled()):
            y = _routes.cube_root_now(x)
            if y is not None:
                return y
            if _routes.untracked_float(x):
                return _host.cube_root(x)
    else:
        x = _arguments.one(x, "x", "cbrtgrad.torch.cbrt")
        x = _arguments.autocast(x, CubeRootBackward.schema)
        if _routes.untracked(x):
            return _host.cube_root(x)
    return _routes.apply(CubeRoot, TracedCubeRoot, x)  # type: ignore[no-any-return]


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
    dx = _host.entry_result("cube_root_grad", g, y)  # NOTE: hot path: as cbrt's
    if dx is not None:
        return dx  # type: ignore[no-any-return]
    if not _routes.one_float(g, y):
        g, y = _arguments.two(g, y, ("g", "y"), "cbrtgrad.torch.cbrt_grad")
    return _grad(g, y)


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
    pair = _host.entry_result("cube_root_and_grad", x, g)  # NOTE: hot path: as cbrt's
    if pair is not None:
        return pair  # type: ignore[no-any-return]
    if _routes.one_float(x, g):
        if _routes.untracked_float(x, g):
            return _host.cube_root_and_grad(x, g, x.shape)
        return _routes.apply(CubeRootAndGrad, TracedCubeRootAndGrad, x, g)  # type: ignore[no-any-return]
    x = _arguments.one(x, "x", "cbrtgrad.torch.cbrt_and_grad")
    x = _arguments.autocast(x, _ops.FUSED)
    x, g = _arguments.two(x, g, ("x", "g"), "cbrtgrad.torch.cbrt_and_grad")
    if _routes.untracked(x, g):
        return _host.cube_root_and_grad(x, g, _fused_shape(x, g))
    return _routes.apply(CubeRootAndGrad, TracedCubeRootAndGrad, x, g)  # type: ignore[no-any-return]
