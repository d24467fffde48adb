"""The derivatives of the three ops, written once with a gradient function ``grad``.

``grad(g, y)`` is ``g / (3 y^2)``, correctly rounded: the custom op itself
(``torch.ops.cbrtgrad.cube_root_grad``, in the ops' ``register_autograd``)
or the differentiable function around it (``cbrtgrad.torch.cbrt_grad``'s
``autograd.Function``, which ``torch.func`` transforms). Every derivative is
made of ``grad`` and plain tensor arithmetic, so each is differentiable
again: the second derivative of the cube root is the gradient op's own
derivative, ``d/dg = 1 / (3 y^2)`` (``grad`` again) and
``d/dy = -2 g / (3 y^3)``, as the graph engine's ``CubeRootGradBackward``.

A gradient of an input that was broadcast is summed back to its shape.

The forward-mode derivatives (``*_jvp``, for ``torch.func.jvp``,
``jacfwd`` and ``torch.autograd.forward_ad``) are the same products with a
tangent in place of the cotangent: the derivatives are symmetric (one
element depends on one element), so a tangent goes through ``grad`` as a
cotangent does. An input without a tangent (``None``) contributes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

Grad = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _to(t: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    return t if t.shape == shape else t.sum_to_size(shape)


def _dy(grad: Grad, gz: torch.Tensor, g: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    # d/dy of g / (3 y^2), times gz: -2 g gz / (3 y^3), from the correctly rounded kernel.
    return grad(g * gz, y) * -2.0 / y


def cube_root(grad: Grad, gy: torch.Tensor, y: torch.Tensor, x_shape: torch.Size) -> torch.Tensor:
    """The gradient of ``y = cbrt(x)``: ``gy / (3 y^2)``, from the saved output."""
    return _to(grad(gy, y), x_shape)


def cube_root_grad(
    grad: Grad,
    gz: torch.Tensor,
    g: torch.Tensor,
    y: torch.Tensor,
    needs: Sequence[bool],
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The gradients of ``z = g / (3 y^2)`` for ``g`` and ``y`` (``None`` where not needed)."""
    dg = _to(grad(gz, y), g.shape) if needs[0] else None
    dy = _to(_dy(grad, gz, g, y), y.shape) if needs[1] else None
    return dg, dy


def cube_root_and_grad(
    grad: Grad,
    gy: torch.Tensor | None,
    gdx: torch.Tensor | None,
    g: torch.Tensor,
    y: torch.Tensor,
    shapes: tuple[torch.Size, torch.Size],
    needs: Sequence[bool],
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The gradients of ``(y, dx) = (cbrt(x), g / (3 y^2))`` for ``x`` and ``g``.

    ``dx`` depends on ``x`` through ``y``: what reaches ``y`` is ``gy`` plus
    ``dx``'s derivative in ``y``, and ``x`` gets that through ``grad``.
    """
    through = _dy(grad, gdx, g, y) if gdx is not None and needs[0] else None
    total = _plus(gy, through)
    dx = None if total is None or not needs[0] else _to(grad(total, y), shapes[0])
    dg = None if gdx is None or not needs[1] else _to(grad(gdx, y), shapes[1])
    return dx, dg


def _plus(a: torch.Tensor | None, b: torch.Tensor | None) -> torch.Tensor | None:
    return b if a is None else (a if b is None else a + b)


def cube_root_jvp(grad: Grad, tx: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The tangent of ``y = cbrt(x)`` for the tangent ``tx`` of ``x``: ``tx / (3 y^2)``."""
    return grad(tx, y)


def cube_root_grad_jvp(
    grad: Grad,
    tg: torch.Tensor | None,
    ty: torch.Tensor | None,
    g: torch.Tensor,
    y: torch.Tensor,
) -> torch.Tensor | None:
    """The tangent of ``z = g / (3 y^2)`` for the tangents ``tg`` and ``ty``."""
    return _plus(
        None if tg is None else grad(tg, y),
        None if ty is None else _dy(grad, ty, g, y),
    )


def cube_root_and_grad_jvp(
    grad: Grad,
    tx: torch.Tensor | None,
    tg: torch.Tensor | None,
    g: torch.Tensor,
    y: torch.Tensor,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The tangents of ``(y, dx) = (cbrt(x), g / (3 y^2))``: ``dx`` moves with ``g`` and ``y``."""
    ty = None if tx is None else grad(tx, y)
    return ty, cube_root_grad_jvp(grad, tg, ty, g, y)
