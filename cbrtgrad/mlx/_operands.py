"""The dtype and shape rules of :mod:`cbrtgrad.mlx`: the ones of MLX's own ops, checked once.

* float16, bfloat16, float32 and float64 keep their dtype (float64 is a CPU
  dtype in MLX, and the primitives run on the CPU).
* bool and integers become float32, as ``mx.sqrt`` makes them.
* Complex is a ``TypeError`` naming the argument and its dtype (cbrtgrad's
  cube root is the real one).
* ``cbrt_grad(g, y)``: the operands are promoted together as MLX promotes
  them (``mx.result_type``; a Python scalar takes the other operand's dtype,
  as in ``2.0 * x``) and broadcast together, by MLX's own ``astype`` and
  ``broadcast_to`` before the custom function sees them, as MLX's binary ops
  do; shapes that do not broadcast are a ``ValueError`` naming both.

NOTE: the broadcast is what gives a broadcast operand its gradient's shape.
An ``mx.custom_function`` passes its vjp's results through unchecked, so a
rule that saw ``g`` of shape () beside ``y`` of shape (3,) would return a
(3,) gradient for the 0-d ``g``. Broadcast first, the rules see one shape
and MLX's broadcast reduces each cotangent to its operand's shape (summed
over the broadcast axes, axes of one kept, 0-d staying 0-d) and broadcasts
each tangent, exactly as for ``g / (3 * y * y)``.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx

#: The dtypes the kernels keep, by the name cbrtgrad.kernels.handlers.buffer_loops uses.
FLOATS = {
    mx.float16: "float16",
    mx.bfloat16: "bfloat16",
    mx.float32: "float32",
    mx.float64: "float64",
}

_REAL = "expected a real dtype (float16, bfloat16, float32, float64, bool or an integer)"


def _checked(value: Any, name: str, function: str) -> Any:
    if isinstance(value, mx.array):
        array = value
    elif isinstance(value, complex):
        raise TypeError(f"cbrtgrad.mlx.{function}: {name} is a Python complex; {_REAL}")
    else:
        try:
            array = mx.array(value)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"cbrtgrad.mlx.{function}: {name} of type {type(value).__name__} is not an "
                f"mx.array nor convertible to one ({exc})"
            ) from None
    dtype = array.dtype
    if dtype in FLOATS:
        return array
    if mx.issubdtype(dtype, mx.complexfloating) or not (
        mx.issubdtype(dtype, mx.integer) or dtype == mx.bool_
    ):
        raise TypeError(f"cbrtgrad.mlx.{function}: {name} has dtype {dtype}; {_REAL}")
    return array.astype(mx.float32)


def as_float(x: Any, name: str = "x", function: str = "cbrt") -> Any:
    """``x`` as an ``mx.array`` of the float dtype ``mx.sqrt(x)`` would have.

    Raises
    ------
    TypeError
        For complex (or any non-real) dtypes, naming ``name`` and the dtype.

    Examples
    --------
    >>> import mlx.core as mx
    >>> as_float(mx.arange(3)).dtype
    mlx.core.float32
    >>> as_float(mx.ones(2, mx.complex64))
    Traceback (most recent call last):
    ...
    TypeError: cbrtgrad.mlx.cbrt: x has dtype mlx.core.complex64; expected a real dtype ...
    """
    return _checked(x, name, function)


def gradient_operands(g: Any, y: Any) -> tuple[Any, Any]:
    """``g`` and ``y`` of one float dtype, as MLX promotes them, broadcast to one shape.

    Raises
    ------
    TypeError
        For a complex (or non-real) operand, naming it.
    ValueError
        For shapes that do not broadcast, naming both.

    Examples
    --------
    >>> import mlx.core as mx
    >>> g, y = gradient_operands(1.0, mx.ones((2, 3), mx.bfloat16))
    >>> g.dtype, y.dtype, g.shape
    (mlx.core.bfloat16, mlx.core.bfloat16, (2, 3))
    >>> gradient_operands(mx.ones(3), mx.ones(4))
    Traceback (most recent call last):
    ...
    ValueError: cbrtgrad.mlx.cbrt_grad: g of shape (3,) and y of shape (4,) do not broadcast...
    """
    scalars = (bool, int, float)
    if isinstance(g, scalars) and not isinstance(y, scalars):
        ya = _checked(y, "y", "cbrt_grad")
        ga = _checked(mx.array(g, ya.dtype), "g", "cbrt_grad")
    elif isinstance(y, scalars) and not isinstance(g, scalars):
        ga = _checked(g, "g", "cbrt_grad")
        ya = _checked(mx.array(y, ga.dtype), "y", "cbrt_grad")
    else:
        ga = _checked(g, "g", "cbrt_grad")
        ya = _checked(y, "y", "cbrt_grad")
    if ga.dtype != ya.dtype:
        dtype = mx.result_type(ga, ya)
        ga, ya = ga.astype(dtype), ya.astype(dtype)
    if ga.shape == ya.shape:
        return ga, ya
    try:
        shape = mx.broadcast_shapes(ga.shape, ya.shape)
    except ValueError:
        raise ValueError(
            f"cbrtgrad.mlx.cbrt_grad: g of shape {tuple(ga.shape)} and y of shape "
            f"{tuple(ya.shape)} do not broadcast together"
        ) from None
    return mx.broadcast_to(ga, shape), mx.broadcast_to(ya, shape)
