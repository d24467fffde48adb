"""cbrtgrad's cube root and its gradient on MLX arrays: differentiable, ``vmap`` and ``compile``.

:func:`cbrt` and :func:`cbrt_grad` take and return ``mx.array``; each is an
``mx.custom_function`` around an MLX primitive of cbrtgrad's
(``cbrtgrad/mlx/_primitive.cpp``) whose CPU evaluation runs cbrtgrad's numba
kernels on the arrays' memory, so ``mx.grad``, ``mx.value_and_grad``,
``mx.vjp``, ``mx.jvp``, second derivatives, ``mx.vmap`` and ``mx.compile``
all give cbrtgrad's bits. The primitive is built with CMake and a C++
compiler on first use, once per machine (:class:`BuildError` where they are
missing). :func:`metal_cbrt` is the float32 forward as an
``mx.fast.metal_kernel`` generated from the float32-only formula, for Apple
GPUs: checked on the CPU as C++ for all 2^32 inputs, never run on Apple
hardware. docs/mlx.md has the routes, their cost and what has not run on
Apple hardware.

This subpackage is the only part of cbrtgrad that imports mlx: ``import
cbrtgrad`` never does. Install it with ``pip install 'cbrtgrad[mlx]'``.

Examples
--------
>>> import mlx.core as mx
>>> import cbrtgrad.mlx as cm
>>> y, dx = mx.value_and_grad(lambda x: cm.cbrt(x).sum())(mx.array([-27.0, 8.0]))
>>> y.item(), dx
(-1.0, array([0.037037, 0.0833333], dtype=float32))
"""

try:
    import mlx.core as _mx  # noqa: F401  (the one place the bridge asks for mlx)
except ImportError as exc:
    raise ImportError(
        "cbrtgrad.mlx needs MLX, which is not installed: python -m pip install 'cbrtgrad[mlx]'"
    ) from exc

from ._build import BuildError
from ._functions import cbrt, cbrt_grad
from ._metal import metal_cbrt

__all__ = ["BuildError", "cbrt", "cbrt_grad", "metal_cbrt"]
