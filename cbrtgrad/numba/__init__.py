"""The cube root and its gradient for your own numba code (docs/numba.md).

``cbrt(x)`` and ``cbrt_grad(g, y)`` take one float32 or float64 scalar (two
for the gradient) and give the bits of :func:`cbrtgrad.cbrt` and
:func:`cbrtgrad.cbrt_grad`: correctly rounded, from the same formulas as the
library's kernels (``cbrtgrad/kernels/formulas/scalar.py``). They can be called from

- ``@numba.njit`` code, ``parallel=True`` and ``prange`` included, and a
  user's own ``@vectorize`` and ``@guvectorize`` functions (the CPU forms of
  ``cbrtgrad/kernels/cpu/user_loops.py``);
- ``@numba.cuda.jit`` kernels and device functions (the device functions the
  library's CUDA kernels run, ``cbrtgrad.kernels.cuda.elementwise.device_functions``;
  under numba's CUDA simulator, the same formulas as Python);
- plain Python, on scalars and arrays alike (they are then
  :func:`cbrtgrad.cbrt` and :func:`cbrtgrad.cbrt_grad`).

``cbrt_into(x, out)`` and ``cbrt_grad_into(g, y, out)`` run the library's
block functions over whole arrays (the ufuncs' own inner loops: vectorised,
the float64 forward in two passes) from numba code on the CPU; from Python they
are ``cbrtgrad.cbrt(x, out=out)`` and ``cbrtgrad.cbrt_grad(g, y, out=out)``.

Performance in a loop (docs/numba.md has the figures): a float32 ``cbrt(x[i])``
is vectorised by LLVM in your loop like any arithmetic. A float64 one is not:
its fast path leaves about one input in 10^7 to an exact path that only a
second pass over a block can keep out of a vector loop, so the scalar form is
scalar code; over an array, call ``cbrt_into``.

Types: numba code passes float32 or float64 (the result has the argument's
type; both arguments of ``cbrt_grad`` of one type). Anything else, integers
included, is a numba ``TypingError`` that names the function and the types it
takes: numba's ``np.cbrt`` would convert an integer to float64 silently, but
here the argument's type decides the result's precision, so it is yours to
write (``np.float64(n)``). From Python the functions take what
:func:`cbrtgrad.cbrt` takes, integers included (computed in float64).

NOTE: with ``cache=True``, numba caches your function with this code compiled
in, and checks only your file for changes: after upgrading cbrtgrad, clear
numba's cache (the ``__pycache__`` ``*.nbi``/``*.nbc`` files of your module).
cbrtgrad's own kernel cache (docs/cache.md) holds the block functions
``cbrt_into`` runs and the float64 rare paths.

Examples
--------
>>> import numba, numpy as np
>>> from cbrtgrad.numba import cbrt, cbrt_grad
>>> @numba.njit
... def value_and_slope(x):
...     y = cbrt(x)
...     return y, cbrt_grad(np.float32(1.0), y)
>>> value_and_slope(np.float32(-27.0))  # float32 in, float32 out (numba returns floats)
(-3.0, 0.03703703731298447)
>>> cbrt(np.array([8.0, -1.0]))     # from Python: cbrtgrad.cbrt
array([ 2., -1.])
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from numba.extending import overload, register_jitable

from .. import api
from ..kernels.cuda.primitives import simulating
from .types import SCALAR_TYPES, array_kind, scalar_kind

__all__ = ["cbrt", "cbrt_grad", "cbrt_grad_into", "cbrt_into"]

#: The options of every implementation here: cbrtgrad's, not the caller's
#: (kernels/cpu/user_loops.py says why).
_JIT_OPTIONS: Any = {"fastmath": False, "error_model": "numpy"}


# -- From Python (and the CUDA simulator) ------------------------------------------


def cbrt(x: Any) -> Any:
    """The real cube root ``sgn(x) |x|^(1/3)``, correctly rounded, for numba code.

    Parameters
    ----------
    x : float32 or float64
        In numba code (CPU or CUDA), one scalar; the result has its type.
        From Python, anything :func:`cbrtgrad.cbrt` takes.

    Returns
    -------
    float32 or float64
        The bits of :func:`cbrtgrad.cbrt`. From Python, what it returns.

    Raises
    ------
    numba.core.errors.TypingError
        When numba compiles a call with another type (an integer, a complex
        number, an array: over arrays use :func:`cbrt_into`).

    Examples
    --------
    >>> import numba, numpy as np
    >>> @numba.njit
    ... def roots(x):
    ...     y = np.empty_like(x)
    ...     for i in range(x.size):
    ...         y[i] = cbrt(x[i])
    ...     return y
    >>> roots(np.array([-27.0, 0.001, np.inf], np.float32))
    array([-3. ,  0.1,  inf], dtype=float32)
    >>> cbrt(64), cbrt([-8.0, 1.0])
    (np.float64(4.0), array([-2.,  1.]))
    """
    if _in_simulated_kernel():
        return _simulated("cbrtgrad.numba.cbrt(x)", 0, x)
    return api.cbrt(x)


def cbrt_grad(g: Any, y: Any) -> Any:
    """The cube root's gradient ``g / (3 y^2)`` from its output ``y``, for numba code.

    Parameters
    ----------
    g : float32 or float64
        The upstream gradient, of ``y``'s type (in numba code).
    y : float32 or float64
        The saved output ``cbrt(x)``.

    Returns
    -------
    float32 or float64
        The bits of :func:`cbrtgrad.cbrt_grad`: correctly rounded as it
        says; ``y = 0`` gives IEEE's ``±inf`` (``nan`` for ``g = 0``), with
        no exception and, in numba code, no warning.

    Raises
    ------
    numba.core.errors.TypingError
        When numba compiles a call with other types, or ``g`` and ``y`` of
        two types.

    Examples
    --------
    >>> import numba, numpy as np
    >>> @numba.njit
    ... def slopes(y):
    ...     dx = np.empty_like(y)
    ...     for i in range(y.size):
    ...         dx[i] = cbrt_grad(np.float32(1.0), y[i])
    ...     return dx
    >>> slopes(np.array([1.0, -2.0, 0.0], np.float32))
    array([0.33333334, 0.08333334,        inf], dtype=float32)
    >>> cbrt_grad(np.ones(2), np.array([1.0, -2.0]))
    array([0.33333333, 0.08333333])
    """
    if _in_simulated_kernel():
        return _simulated("cbrtgrad.numba.cbrt_grad(g, y)", 1, g, y)
    return api.cbrt_grad(g, y)


def cbrt_into(x: Any, out: Any) -> Any:
    """``out[...] = cbrt(x)`` over whole arrays by the library's vectorised kernel.

    In numba code (CPU) it runs the block function of the ``cbrtgrad.cbrt``
    ufunc (the same bits, about its speed): the fast way over an array,
    float64 above all (docs/numba.md).

    Parameters
    ----------
    x : ndarray of float32 or float64
        Any layout (a non-contiguous one is copied first).
    out : ndarray
        Writable, of ``x``'s dtype and shape; may be ``x`` itself.

    Returns
    -------
    ndarray
        ``out``.

    Raises
    ------
    numba.core.errors.TypingError
        When numba compiles a call with other types or dimensions.
    ValueError
        When ``x`` and ``out`` differ in shape (numba code raises it when it runs).

    Examples
    --------
    >>> import numba, numpy as np
    >>> @numba.njit
    ... def roots_in_place(x):
    ...     return cbrt_into(x, x)
    >>> roots_in_place(np.array([[-8.0, 1e-300], [27.0, 1e300]]))
    array([[-2.e+000,  1.e-100],
           [ 3.e+000,  1.e+100]])
    """
    return api.cbrt(x, out=out)


def cbrt_grad_into(g: Any, y: Any, out: Any) -> Any:
    """``out[...] = cbrt_grad(g, y)`` over whole arrays by the library's vectorised kernel.

    Parameters
    ----------
    g, y : ndarray of float32 or float64
        Of one dtype and shape, any layout.
    out : ndarray
        Writable, of their dtype and shape; may be ``g`` or ``y``.

    Returns
    -------
    ndarray
        ``out``.

    Raises
    ------
    numba.core.errors.TypingError
        When numba compiles a call with other types or dimensions.
    ValueError
        When the shapes differ.

    Examples
    --------
    >>> import numpy as np
    >>> cbrt_grad_into(np.ones(2), np.array([1.0, -2.0]), np.empty(2))
    array([0.33333333, 0.08333333])
    """
    return api.cbrt_grad(g, y, out=out)


# -- numba code on the CPU ------------------------------------------------------------


@overload(cbrt, jit_options=_JIT_OPTIONS)
def _cbrt_cpu(x):  # type: ignore[no-untyped-def]
    from ..kernels.cpu import user_loops

    forward, _ = user_loops.forms(scalar_kind("cbrtgrad.numba.cbrt(x)", x=x))
    return lambda x: forward(x)


@overload(cbrt_grad, jit_options=_JIT_OPTIONS)
def _cbrt_grad_cpu(g, y):  # type: ignore[no-untyped-def]
    from ..kernels.cpu import user_loops

    _, gradient = user_loops.forms(scalar_kind("cbrtgrad.numba.cbrt_grad(g, y)", g=g, y=y))
    return lambda g, y: gradient(g, y)


def _flat(a: Any) -> Any:
    """``a`` as a 1-D C-contiguous array: a view where it is contiguous, else a copy."""
    raise NotImplementedError("only callable from numba code")


@overload(_flat, jit_options=_JIT_OPTIONS)
def _flat_cpu(a):  # type: ignore[no-untyped-def]
    # By the layout numba knows: a C-contiguous array costs nothing (and its
    # caller's compile nothing); another may still be contiguous when it runs.
    if a.layout == "C":
        return (lambda a: a) if a.ndim == 1 else (lambda a: a.reshape(a.size))
    return lambda a: np.ascontiguousarray(a).reshape(a.size)


@register_jitable(**_JIT_OPTIONS)
def _apart(a, out):  # type: ignore[no-untyped-def]
    # a, or a copy of it where it overlaps out other than exactly: the block
    # functions take out = a (they keep each block's inputs first), but a
    # partial overlap would read elements they have already written.
    start, stop = a.ctypes.data, a.ctypes.data + a.nbytes
    out_start, out_stop = out.ctypes.data, out.ctypes.data + out.nbytes
    exact = start == out_start and stop == out_stop
    if start < out_stop and out_start < stop and not exact:
        return a.copy()
    return a


def _write_back(result: Any, out: Any) -> None:
    """Copy ``result``, which is ``_flat(out)``, into ``out`` unless it is ``out``'s memory."""
    raise NotImplementedError("only callable from numba code")


@overload(_write_back, jit_options=_JIT_OPTIONS)
def _write_back_cpu(result, out):  # type: ignore[no-untyped-def]
    if out.layout == "C":
        return lambda result, out: None

    # NOTE: element by element in C order, not ``out[...] = result.reshape(...)``:
    # numba's broadcasting array assignment took 4 s more to compile.
    def write_back(result, out):  # type: ignore[no-untyped-def]
        if result.ctypes.data != out.ctypes.data:
            k = 0
            for index in np.ndindex(out.shape):
                out[index] = result[k]
                k += 1

    return write_back


@overload(cbrt_into, jit_options=_JIT_OPTIONS)
def _cbrt_into_cpu(x, out):  # type: ignore[no-untyped-def]
    from ..kernels.cpu import user_loops

    dtype = array_kind("cbrtgrad.numba.cbrt_into(x, out)", x=x, out=out)
    block = user_loops.block_function("forward", dtype)
    message = "cbrtgrad.numba.cbrt_into(x, out): x and out must have one shape"

    def cbrt_into(x, out):  # type: ignore[no-untyped-def]
        if x.shape != out.shape:
            raise ValueError(message)
        result = _flat(out)
        block(_apart(_flat(x), result), result)
        _write_back(result, out)
        return out

    return cbrt_into


@overload(cbrt_grad_into, jit_options=_JIT_OPTIONS)
def _cbrt_grad_into_cpu(g, y, out):  # type: ignore[no-untyped-def]
    from ..kernels.cpu import user_loops

    dtype = array_kind("cbrtgrad.numba.cbrt_grad_into(g, y, out)", g=g, y=y, out=out)
    block = user_loops.block_function("grad", dtype)
    message = "cbrtgrad.numba.cbrt_grad_into(g, y, out): g, y and out must have one shape"

    def cbrt_grad_into(g, y, out):  # type: ignore[no-untyped-def]
        if g.shape != out.shape or y.shape != out.shape:
            raise ValueError(message)
        result = _flat(out)
        block(_apart(_flat(g), result), _apart(_flat(y), result), result)
        _write_back(result, out)
        return out

    return cbrt_grad_into


# -- CUDA ------------------------------------------------------------------------------
# NOTE: numba.core's overload with target="cuda": numba-cuda installs the
# CUDA-targeted templates of third-party modules when it compiles, so the
# registration needs no import of numba.cuda (about a second) here.


def _device_functions(kind: str) -> tuple[Any, Any]:
    from ..kernels.cuda.elementwise import device_functions

    return device_functions(np.dtype(kind))  # type: ignore[no-any-return]


@overload(cbrt, target="cuda")
def _cbrt_cuda(x):  # type: ignore[no-untyped-def]
    forward, _ = _device_functions(scalar_kind("cbrtgrad.numba.cbrt(x)", x=x))
    return lambda x: forward(x)


@overload(cbrt_grad, target="cuda")
def _cbrt_grad_cuda(g, y):  # type: ignore[no-untyped-def]
    _, gradient = _device_functions(scalar_kind("cbrtgrad.numba.cbrt_grad(g, y)", g=g, y=y))
    return lambda g, y: gradient(g, y)


def _in_simulated_kernel() -> bool:
    """Whether this call runs inside a kernel of numba's CUDA simulator.

    There a kernel is Python, and calls these functions as Python; they then
    run the device functions a GPU would (the simulator's, the same formulas
    on numpy scalars), with the checks a GPU compile would make. NOTE: read
    from numba-cuda's simulator, which keeps the one kernel it runs at a time
    in a module global.
    """
    if not simulating():
        return False
    running = sys.modules.get("numba.cuda.simulator.kernel")
    return running is not None and running._get_kernel_context() is not None


def _simulated(function: str, which: int, *arguments: Any) -> Any:
    """The device function ``which`` (0 forward, 1 gradient) on numpy scalars, as on a GPU."""
    names = ("x",) if len(arguments) == 1 else ("g", "y")
    kinds = {np.float32: "float32", np.float64: "float64", float: "float64"}
    found = {kinds.get(type(a)) for a in arguments}
    if len(found) != 1 or None in found:
        got = ", ".join(f"{n}: {type(a).__name__}" for n, a in zip(names, arguments, strict=True))
        takes = SCALAR_TYPES if len(arguments) == 1 else "float32 or float64 scalars of one type"
        raise TypeError(f"{function} takes {takes}; got {got}.")
    kind = found.pop()
    assert kind is not None
    scalar_type = np.float32 if kind == "float32" else np.float64
    # A GPU raises no floating-point warnings (y = 0 divides by zero): nor
    # does this thread of the simulator (numpy's error state is per thread).
    with np.errstate(all="ignore"):
        return _device_functions(kind)[which](*(scalar_type(a) for a in arguments))
