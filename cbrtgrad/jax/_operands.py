"""The dtype and shape rules of :mod:`cbrtgrad.jax`: the ones of ``jax.numpy``, checked once.

* float16, bfloat16, float32 and float64 keep their dtype, as ``jnp.cbrt``
  keeps it (float64 only exists with ``jax_enable_x64``; without it jax makes
  float64 input float32 itself).
* bool and integers become the float dtype ``jnp.cbrt`` gives them (asked of
  ``jnp.cbrt`` itself, so the rule follows jax: float32, or float64 with x64).
* Complex is a ``TypeError`` naming the argument and its dtype (cbrtgrad's
  cube root is the real one; ``jnp.cbrt`` refuses complex too).
* ``cbrt_grad(g, y)``: the operands are promoted together as ``jnp`` promotes
  them (Python scalars are weak) and broadcast together; shapes that do not
  broadcast are a ``ValueError`` naming both.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

#: The dtypes the kernels keep (the half ones through cbrtgrad's half rounding).
FLOATS = frozenset(np.dtype(t) for t in (jnp.float16, jnp.bfloat16, jnp.float32, jnp.float64))


@lru_cache(maxsize=64)
def _inexact(dtype: np.dtype, weak: bool) -> np.dtype:
    # The dtype jnp.cbrt gives an input of this dtype (abstractly: nothing runs).
    return np.dtype(jax.eval_shape(jnp.cbrt, jax.ShapeDtypeStruct((), dtype, weak_type=weak)).dtype)


def _checked(value: Any, name: str, function: str) -> Any:
    array = jnp.asarray(value)
    dtype = np.dtype(array.dtype)
    if dtype in FLOATS:
        return array
    if jnp.issubdtype(dtype, jnp.complexfloating) or not (
        jnp.issubdtype(dtype, jnp.integer) or dtype == np.bool_
    ):
        raise TypeError(
            f"cbrtgrad.jax.{function}: {name} has dtype {dtype}; expected a real dtype "
            "(float16, bfloat16, float32, float64, bool or an integer)"
        )
    return array


def as_float(x: Any, name: str = "x", function: str = "cbrt") -> Any:
    """``x`` as a jax array of the float dtype ``jnp.cbrt(x)`` has.

    Raises
    ------
    TypeError
        For complex (or any non-real) dtypes, naming ``name`` and the dtype.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> as_float(jnp.arange(3)).dtype == jnp.cbrt(jnp.arange(3)).dtype
    True
    >>> as_float(jnp.ones(2, jnp.complex64))
    Traceback (most recent call last):
    ...
    TypeError: cbrtgrad.jax.cbrt: x has dtype complex64; expected a real dtype ...
    """
    if type(x) in (bool, int):
        x = float(x)  # a weak float, as jnp.cbrt(2) gives (astype would make it strong)
    array = _checked(x, name, function)
    if np.dtype(array.dtype) in FLOATS:
        return array
    weak = bool(getattr(array, "weak_type", False))
    return array.astype(_inexact(np.dtype(array.dtype), weak))


def gradient_operands(g: Any, y: Any) -> tuple[Any, Any]:
    """``g`` and ``y`` of one float dtype and one shape, as ``jnp`` promotes and broadcasts.

    Raises
    ------
    TypeError
        For a complex (or non-real) operand, naming it.
    ValueError
        For shapes that do not broadcast, naming both.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> g, y = gradient_operands(1.0, jnp.ones((2, 3), jnp.bfloat16))
    >>> g.shape, g.dtype, y.dtype
    ((2, 3), dtype(bfloat16), dtype(bfloat16))
    >>> gradient_operands(jnp.ones(3), jnp.ones(4))
    Traceback (most recent call last):
    ...
    ValueError: cbrtgrad.jax.cbrt_grad: g of shape (3,) and y of shape (4,) do not broadcast...
    """
    ga = _checked(g, "g", "cbrt_grad")
    ya = _checked(y, "y", "cbrt_grad")
    # Python scalars stay weak (NEP 50, as jnp's own binary functions): a
    # gradient of 1.0 does not turn a bfloat16 computation into float32.
    dtype = jnp.result_type(g if isinstance(g, (bool, int, float)) else ga,
                            y if isinstance(y, (bool, int, float)) else ya)  # fmt: skip
    dtype = np.dtype(dtype)
    if dtype not in FLOATS:
        dtype = _inexact(dtype, False)
    try:
        shape = jnp.broadcast_shapes(ga.shape, ya.shape)
    except ValueError:
        raise ValueError(
            f"cbrtgrad.jax.cbrt_grad: g of shape {ga.shape} and y of shape {ya.shape} do not "
            "broadcast together"
        ) from None
    return (
        jnp.broadcast_to(ga.astype(dtype), shape),
        jnp.broadcast_to(ya.astype(dtype), shape),
    )
