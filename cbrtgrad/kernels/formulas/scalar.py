"""The scalar cube-root formulas, written once and compiled for every target.

:func:`make_formulas` takes a namespace of primitives (multiply, add and
subtract rounded once each, exact ``fma`` and four bit casts) and a ``jit``
decorator, and returns the compiled scalar functions as a :class:`Formulas`.
The numba CPU ufuncs, the multi-threaded ``prange`` loops and the CUDA device
functions are all built from this one source, so every backend that uses it
gives the same bits. The formulas themselves, with their proofs' outlines,
are in :mod:`cbrtgrad.kernels.formulas.f64` and
:mod:`cbrtgrad.kernels.formulas.f32`.

The algorithm is branch-free so that LLVM vectorises the loops: every
``a if cond else b`` becomes a vector select, and special values are
classified on the integer bit pattern (integer compares raise no floating-point
flags, so numpy never sees a spurious ``invalid`` or ``overflow``).

The gradient ``g / (3 y^2)`` is computed from the saved output ``y`` and
correctly rounded for that ``y`` (where each module says). Against the exact
derivative at ``x`` it carries the rounding of ``y`` too: ``y`` is off by up
to half an ulp, which ``1/y^2`` doubles and the change of binade can stretch
to 1.73 ulp of the result, so the bound is 1.73 + 0.5 = 2.23 ulp whatever the
kernel does (measured: 2.21 in float32).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .f32 import make_formulas_f32
from .f64 import make_formulas_f64
from .f64_grad import make_grad_formulas_f64


@dataclass(frozen=True)
class Formulas:
    """The compiled scalar formulas of one target.

    The whole kernels, one element at a time (the CUDA threads call these):

    Attributes
    ----------
    cube_root_f64, cube_root_f32 : function
        ``x -> cbrt(x)``, correctly rounded.
    cube_root_grad_f64, cube_root_grad_f32 : function
        ``(g, y) -> g / (3 y^2)``, correctly rounded for that ``y``.
    cube_root_f32_branching : function
        ``cube_root_f32``'s bits, with a branch instead of selects and no
        conversion between types on the common path: the CUDA kernels'.
    cube_root_f64_branching : function
        ``cube_root_f64``'s bits by the CPU loops' two passes with a branch
        (``cube_root_f64_plain``, then ``cube_root_f64_exact`` if it is
        hard): the CUDA kernels'.
    cube_root_grad_f32_branching : function
        ``cube_root_grad_f32``'s bits, with no conversion between types for
        normal operands and results: the CUDA kernels'.
    cube_root_f32_normal : function
        That common path: the bits (int64) of the float32 root of a positive
        normal float32 given by its bits.

    The two passes the CPU's vector loops run instead (a branch-free fast
    path over a block, then the exact path for its few hard lanes):

    cube_root_f64_fast : function
        ``x -> (y, hard)``: ``y`` is the result unless ``hard`` is nonzero.
    cube_root_f64_plain : function
        ``cube_root_f64_fast`` for ``2^-800 <= |x| < inf`` only: the same
        bits without the specials' selects.
    cube_root_f64_exact : function
        ``x -> cbrt(x)`` for a hard lane.
    cube_root_grad_f64_fast, cube_root_grad_f32_fast : function
        ``(g, y) -> (dx, hard)``.
    cube_root_grad_f64_exact : function
        ``(g, y) -> dx`` for a hard lane (the float32 one is
        ``cube_root_grad_f32`` itself).

    The first steps, which the tools that fit the constants measure on their own:

    inverse_cbrt_guess_f64 : function
        The float64 bit trick, ``|x|^(-1/3)`` within 0.0343
        (tools/fit_cbrt_f64_inverse.py).
    inverse_cbrt_f32 : function
        The float32 bit trick and Newton step (tools/fit_cbrt_f32_series.py).
    inverse_cbrt_f32_integer_third : function
        The same from a float32's bits, its third an integer division (the
        CUDA kernels').

    The gradient's nan, which the kernels above return for every nan result:

    grad_nan_f64, grad_nan_f32 : function
        ``(g, y) -> nan``: ``g``'s nan if ``g`` is one, else ``y``'s,
        quieted, else the default nan of x86 (sign set): numpy's
        ``g / (3*y*y)`` on x86, the same on every CPU and GPU.
    """

    cube_root_f64: Any
    cube_root_f32: Any
    cube_root_f32_branching: Any
    cube_root_f64_branching: Any
    cube_root_grad_f32_branching: Any
    cube_root_f32_normal: Any
    cube_root_grad_f64: Any
    cube_root_grad_f32: Any
    cube_root_f64_fast: Any
    cube_root_f64_plain: Any
    cube_root_f64_exact: Any
    cube_root_grad_f64_fast: Any
    cube_root_grad_f32_fast: Any
    cube_root_grad_f64_exact: Any
    inverse_cbrt_guess_f64: Any
    inverse_cbrt_f32: Any
    inverse_cbrt_f32_integer_third: Any
    grad_nan_f64: Any
    grad_nan_f32: Any


def make_formulas(
    prims: Any,
    jit: Callable[[Callable[..., Any]], Any],
    gradient_f64_jit: Callable[[Callable[..., Any]], Any] | None = None,
) -> Formulas:
    """Compile the scalar formulas against one target's primitives.

    Parameters
    ----------
    prims : namespace
        ``mul``, ``add``, ``sub`` and ``mul32`` (rounded once each), ``fma``
        and ``fma32`` (exact), ``f64_as_i64``, ``i64_as_f64``,
        ``f32_as_i32`` and ``i32_as_f32`` for the target
        (:data:`cbrtgrad.kernels.formulas.primitives.CPU_PRIMITIVES`,
        :func:`cbrtgrad.kernels.cuda.primitives.cuda_primitives`).
    jit : callable
        The decorator that compiles a scalar (device) function for the target,
        e.g. ``numba.njit(inline="always")`` or ``numba.cuda.jit(device=True)``.
    gradient_f64_jit : callable, optional
        The decorator for the float64 gradient's formulas but its exact path
        (which ``jit`` compiles); default ``jit``.

    Returns
    -------
    Formulas
        The 19 compiled scalar functions.

    Examples
    --------
    >>> import numba
    >>> from cbrtgrad.kernels.formulas.primitives import CPU_PRIMITIVES
    >>> f = make_formulas(CPU_PRIMITIVES, numba.njit)
    >>> float(f.cube_root_f64(-27.0))
    -3.0
    """
    return Formulas(
        **make_formulas_f64(prims, jit),
        **make_grad_formulas_f64(prims, gradient_f64_jit or jit, exact_jit=jit),
        **make_formulas_f32(prims, jit),
    )
