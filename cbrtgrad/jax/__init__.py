"""cbrtgrad's cube root and its gradient as JAX functions: ``jit``, ``vmap`` and every transform.

:func:`cbrt` is a ``jax.custom_jvp`` whose tangent is cbrtgrad's correctly
rounded gradient kernel, a JAX primitive linear in its first operand with its
own transpose rule, so ``jax.grad``, ``jax.vjp``, ``jax.jvp``, ``jax.hessian``
and higher derivatives give cbrtgrad's bits; :func:`cbrt_grad` is that
kernel, usable directly. On the CPU both run inside ``jax.jit`` as XLA FFI
handlers that are numba ``cfunc``\\ s (``cbrtgrad/kernels/xla_ffi.py``);
float16 and bfloat16, and other platforms, go through ``jax.pure_callback``.
docs/jax.md has the routes, their cost and what has not run on a GPU.

This subpackage is the only part of cbrtgrad that imports jax: ``import
cbrtgrad`` never does. Install jax with ``pip install 'cbrtgrad[jax]'``.
"""

from __future__ import annotations

try:
    import jax as _jax  # noqa: F401  (imported here so that a missing jax fails at once)
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        "cbrtgrad.jax needs jax, which is not installed: pip install 'cbrtgrad[jax]'"
    ) from exc

from ._functions import cbrt, cbrt_grad, route

__all__ = ["cbrt", "cbrt_grad", "route"]
