"""The public functions of :mod:`cbrtgrad.jax`: ``cbrt``, ``cbrt_grad`` and ``route``."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from . import _ffi
from ._operands import as_float, gradient_operands
from ._primitives import cbrt_grad_p, cbrt_p


@jax.custom_jvp
def _cbrt(x: Any) -> Any:
    return cbrt_p.bind(x, route="auto")


@_cbrt.defjvp
def _cbrt_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (t,) = primals, tangents
    # NOTE: y through _cbrt itself, not cbrt_p: the rule is differentiated
    # again for second derivatives (jax.hessian), and _cbrt has a rule.
    y = _cbrt(x)
    return y, cbrt_grad_p.bind(t, y, route="auto")


def cbrt(x: Any) -> Any:
    """Element-wise real cube root, ``sgn(x) |x|^(1/3)``, correctly rounded, differentiable.

    The bits of :func:`cbrtgrad.cbrt` for every input, in every dtype
    ``jnp.cbrt`` keeps. A ``jax.custom_jvp``: its tangent (and, transposed,
    its cotangent) is cbrtgrad's correctly rounded gradient kernel applied to
    the tangent, ``t / (3 y^2)`` from the output ``y``, so ``jax.grad`` gives
    ``cbrtgrad.cbrt_grad(ct, y)`` bit for bit; ``jax.jvp``, ``jax.vjp``,
    ``jax.hessian`` and higher derivatives work. Works under ``jax.jit`` and
    ``jax.vmap``.

    Parameters
    ----------
    x : array_like
        float16, bfloat16, float32 or float64 (the last with
        ``jax_enable_x64``) keep their dtype, each correctly rounded in it;
        bool and integers give ``jnp.cbrt``'s float dtype.

    Returns
    -------
    jax.Array

    Raises
    ------
    TypeError
        For complex input, naming the dtype.

    Notes
    -----
    The gradient at 0 is ``+inf`` for a positive cotangent (``-inf`` for a
    negative one, ``nan`` for 0), as ``jax.grad(jnp.cbrt)(0.0)``.

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> import cbrtgrad.jax as cj
    >>> cj.cbrt(jnp.array([-27.0, 8.0, 0.0]))
    Array([-3.,  2.,  0.], dtype=float32)
    >>> jax.jit(jax.grad(lambda x: cj.cbrt(x).sum()))(jnp.array([8.0, -1.0]))
    Array([0.08333334, 0.33333334], dtype=float32)
    >>> float(jax.grad(jax.grad(cj.cbrt))(8.0))  # -2 / (9 y^5)
    -0.0069444...
    >>> cj.cbrt(jnp.array([8, 27], jnp.bfloat16))
    Array([2, 3], dtype=bfloat16)
    """
    return _cbrt(as_float(x))


def cbrt_grad(g: Any, y: Any) -> Any:
    """Gradient of the cube root from its output: ``g / (3 y^2)``, cbrtgrad's kernel.

    The bits of :func:`cbrtgrad.cbrt_grad`; differentiable in ``g`` and ``y``
    (``d/dg`` is this kernel again, ``d/dy = -2 g / (3 y^3)``).

    Parameters
    ----------
    g : array_like
        The cotangent ``dL/dy``.
    y : array_like
        The saved output ``cbrt(x)`` (not ``x``).

    Returns
    -------
    jax.Array
        Of the operands' promoted dtype (as ``jnp`` promotes; Python scalars
        are weak) and broadcast shape.

    Raises
    ------
    TypeError
        For a complex operand, naming it.
    ValueError
        For shapes that do not broadcast, naming both.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import cbrtgrad.jax as cj
    >>> cj.cbrt_grad(jnp.array([12.0, 3.0]), jnp.array([2.0, -1.0]))
    Array([1., 1.], dtype=float32)
    >>> cj.cbrt_grad(1.0, jnp.array([1.0, 0.0]))
    Array([0.33333334,        inf], dtype=float32)
    """
    g, y = gradient_operands(g, y)
    return cbrt_grad_p.bind(g, y, route="auto")


def route(dtype: Any = "float32") -> str:
    """How a jitted call of ``dtype`` runs on the CPU: ``"ffi"`` or ``"callback"``, with why.

    ``"ffi"``: an XLA FFI handler, cbrtgrad's numba kernels called by XLA on
    its own buffers. ``"callback"``: ``jax.pure_callback`` to cbrtgrad's api
    (half precision, correctly rounded in its own dtype by the api's half
    ``out=``; or wherever the FFI route is refused, with the reason).
    Asking registers the forward handler of ``dtype`` (compiled, or loaded
    from the kernel cache), as a first call would.

    Parameters
    ----------
    dtype : dtype-like
        float16, bfloat16, float32 or float64.

    Returns
    -------
    str

    Examples
    --------
    >>> route("float32")
    'ffi: XLA FFI handler (numba cfunc), one thread (CBRTGRAD_JAX_PARALLEL_MIN unset)'
    >>> route("bfloat16")
    'callback: jax.pure_callback to cbrtgrad.cbrt with a bfloat16 out= (half precision)'
    """
    from .. import _config

    dt = np.dtype(dtype)
    threshold = _config.settings().jax_parallel_min_size
    if dt.itemsize == 2:
        return f"callback: jax.pure_callback to cbrtgrad.cbrt with a {dt} out= (half precision)"
    if _ffi.target("forward", dt, False) is not None:
        if threshold is None:
            return (
                "ffi: XLA FFI handler (numba cfunc), one thread (CBRTGRAD_JAX_PARALLEL_MIN unset)"  # noqa: E501
            )
        return f"ffi: XLA FFI handler (numba cfunc), numba's threads from {threshold:,} elements"
    return f"callback: jax.pure_callback to cbrtgrad.cbrt (the FFI route: {_ffi.problem()})"
