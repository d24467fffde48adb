"""cbrtgrad's cube root and its gradient as JAX functions: ``jit``, ``vmap`` and every transform.

:func:`cbrt` is a ``jax.custom_jvp`` whose tangent is cbrtgrad's correctly
rounded gradient kernel, a JAX primitive linear in its first operand with its
own transpose rule, so ``jax.grad``, ``jax.vjp``, ``jax.jvp``, ``jax.hessian``
and higher derivatives give cbrtgrad's bits; :func:`cbrt_grad` is that
kernel, usable directly. On the CPU both run inside ``jax.jit`` as XLA FFI
handlers that are numba ``cfunc``\\ s (``cbrtgrad/kernels/handlers/xla_ffi.py``);
float16 and bfloat16, and other platforms, go through ``jax.pure_callback``.
Importing this module registers the CPU handlers the kernel cache holds, so
that programs made by ``jax.export`` (:func:`export_checks`) run here.
docs/jax.md has the routes, their cost, exporting, and what has not run on a
GPU.

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

from . import _ffi
from ._export import export_checks, register_ffi_targets
from ._functions import cbrt, cbrt_grad, route

# NOTE: at import, not on first use: a program made by jax.export and
# deserialized here calls the handlers by name and lowers nothing of ours, so
# no later moment would register them. Loaded from the kernel cache only
# (milliseconds); a cold cache is compiled on first use or by
# register_ffi_targets().
_ffi.register_cached()

__all__ = ["cbrt", "cbrt_grad", "export_checks", "register_ffi_targets", "route"]
