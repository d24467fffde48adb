"""cbrtgrad's cube root and its gradient as real numpy ufuncs: ``cbrt`` and ``cbrt_grad``.

``cbrtgrad.ufunc.cbrt`` and ``cbrtgrad.ufunc.cbrt_grad`` are ``numpy.ufunc``
objects (``isinstance(cbrtgrad.ufunc.cbrt, np.ufunc)``), with the same
correctly rounded kernels as :func:`cbrtgrad.cbrt` and
:func:`cbrtgrad.cbrt_grad` on one thread: use them where numpy's protocol
wants a ufunc (``xarray.apply_ufunc``, ``ufunc.at`` scatter updates,
``nin``/``nout``, a library that dispatches on the ufunc). Each has a float32
and a float64 loop, and numpy's loop selection picks one: float16, bool,
int8, int16, uint8 and uint16 compute in float32, the larger integers in
float64 (``dtype=`` chooses). They take no ``where=`` (numba-built ufuncs
refuse it, with numpy's ``ValueError``), and ``cbrt.reduce`` is refused as
numpy refuses it for every one-input ufunc.

The functions, :func:`cbrtgrad.cbrt` and the others, are the rest: a
backend (``backend=``, the automatic choice's multi-threaded loops for
large arrays, the GPU), dask and device arrays, ``where=``, a half-precision
``out=`` rounded once in it, integers computed in float64. Given a container
that computes numpy ufuncs itself (``__array_ufunc__``: xarray, pint, pandas),
the functions hand it these ufuncs, as ``np.cbrt`` is handed over.

Each attribute is built on first access (compiled, or loaded from the
kernel cache), never at import.

Examples
--------
>>> import numpy as np
>>> from cbrtgrad import ufunc
>>> isinstance(ufunc.cbrt, np.ufunc), ufunc.cbrt.nin, ufunc.cbrt_grad.nin
(True, 1, 2)
>>> ufunc.cbrt(np.array([-27.0, 8.0]))
array([-3.,  2.])
>>> a = np.array([8.0, 64.0, 27.0])
>>> ufunc.cbrt.at(a, [0, 2]); a
array([ 2., 64.,  3.])
>>> ufunc.cbrt_grad(np.ones(2), np.array([1.0, -2.0]))
array([0.33333333, 0.08333333])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .kernels.kernel_ops import CUBE_ROOT, CUBE_ROOT_GRAD

if TYPE_CHECKING:  # for type checkers; made by __getattr__ on first read
    import numpy as np

    cbrt: np.ufunc
    cbrt_grad: np.ufunc

__all__ = ["cbrt", "cbrt_grad"]

#: The public name -> the op it runs (kernels/kernel_ops.py).
_OPS = {CUBE_ROOT.function: CUBE_ROOT.name, CUBE_ROOT_GRAD.function: CUBE_ROOT_GRAD.name}


def __getattr__(name: str) -> Any:
    # NOTE: lazy: an attribute read compiles or loads its ufunc's loops, so
    # importing the module (or cbrtgrad) compiles nothing.
    op = _OPS.get(name)
    if op is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .backends.host import CPU

    ufunc = CPU.public_ufunc(op)
    globals()[name] = ufunc  # later reads find it without this function
    return ufunc


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
