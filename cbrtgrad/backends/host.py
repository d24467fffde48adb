"""The host path of the api: numpy's ufunc machinery over the ``cpu`` backend's ufuncs.

numpy's ufunc call already does, for the cpu backend's numba-built ufuncs,
what a numpy function's arguments need: ``out=`` (checked, cast
``same_kind``), broadcasting, the inputs' casts to the loop's dtype, overlap
between inputs and outputs, Python scalars and array_likes, and every
``__array_ufunc__`` override and ``__array_wrap__`` (masked arrays, ndarray
subclasses, a tensor's ``.data``). The api hands it its host calls
(:func:`ufunc_call`) and keeps only what numpy does not do: ``where=``
(numba-built ufuncs refuse it), the dtype rule (:mod:`cbrtgrad.arrays.dtypes`),
the half-precision ``out=`` (:mod:`cbrtgrad.arrays.half`), cbrtgrad's words for
what numpy refuses, and the backend choice, kept here for small plain arrays
(:func:`keep_choice`) so that their calls are one ufunc call and a few tests.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _config
from ..arrays import dtypes as _dtypes
from ..arrays import half as _half
from ..arrays import subclasses as _subclasses
from ..arrays.ufunc_args import check_out
from . import _registry
from ._layout import call_ufunc, into_other_dtype

# NOTE: hot path: what the api's small calls read, bound once: the cpu
# backend's ufuncs by dtype (filled as calls build them; their ``get``
# methods bound too), the settings object last seen with the size below which
# the automatic choice gives cpu (keep_choice), and use_backend's choice.
CPU: Any = _registry.get_backend("cpu")
#: Its name, as an explicit ``backend=`` gives it to the small calls' route:
#: compared by identity (a literal "cpu" is interned, as this constant; any
#: other equal string takes the general route, to the same result).
CPU_NAME = "cpu"
FORWARD: dict[Any, np.ufunc] = CPU.forward
GRADIENT: dict[Any, np.ufunc] = CPU.gradient
forward_of = FORWARD.get
gradient_of = GRADIENT.get
KEPT: list[Any] = [None, 0]
settings = _config.settings
selected_backend = _registry.selected_backend


def keep_choice() -> None:
    """Keep the automatic choice's answer for small plain arrays under the current settings.

    NOTE: hot path: the small calls compare a plain float array's size with
    ``KEPT[1]`` (``_registry.small_cpu_size``; 0 under a ``CBRTGRAD_BACKEND``)
    instead of running the rules; inside a ``use_backend`` block they take
    the general route. ``settings.cache_clear()`` sets it to 0
    (:func:`_drop_choice`), so that the first call after the settings
    change, which takes the general route, renews it here: the small calls
    never read the settings themselves.
    """
    current = settings()
    if KEPT[0] is not current:
        limit = _registry.small_cpu_size(current) if current.backend == "auto" else 0
        KEPT[:] = [current, limit]
        if settings() is not current:  # cleared meanwhile (another thread): not kept
            _drop_choice()


def _drop_choice() -> None:
    # The settings changed: every small call takes the general route until keep_choice.
    KEPT[:] = [None, 0]


settings.on_clear(_drop_choice)


def ufunc_call(ufunc: np.ufunc, args: tuple[Any, ...], out: Any, where: Any, compute: Any) -> Any:
    """``ufunc(*args, out=out)`` by numpy's ufunc machinery, computing in ``compute``.

    numpy does ``out=`` (its type, a shape the operands broadcast to, a
    ``same_kind`` cast, writable), broadcasting, the inputs' casts, overlap
    between inputs and outputs (the inner loops take the overlaps numpy
    leaves them, kernels/cpu/ufunc_loops.py), scalars and array_likes, and every
    ``__array_ufunc__`` override and ``__array_wrap__`` (masked arrays, ndarray
    subclasses, a tensor's ``.data``). What numpy refuses is worded as for
    every backend (``check_out``). Left to cbrtgrad: ``where=``, which
    numba-built ufuncs refuse (``_layout.call_ufunc``), and an ``out`` that
    is not an ndarray (refused or unwrapped by ``check_out``, as for every
    backend).
    """
    if where is not True or (out is not None and not isinstance(out, np.ndarray)):
        out = check_out(out, args, compute, where, writes=type(out) is np.ndarray)
        if where is not True:
            return call_ufunc(ufunc, *args, out=out, where=where, dtype=compute)
    try:
        if type(out) is np.ndarray and out.dtype != compute:
            return into_other_dtype(ufunc, args, out, compute)
        for a in args:
            if getattr(a, "dtype", None) is not compute:
                return ufunc(*args, out=out, dtype=compute)
        return ufunc(*args, out=out)
    except (TypeError, ValueError):
        check_out(out, args, compute)  # cbrtgrad's words for what numpy refused
        raise


def half_out(
    func: Any, args: tuple[Any, ...], out: Any, where: Any, backend: Any, dtype: Any = None
) -> Any:
    """``func(*args)`` (``cbrt``, ``cbrt_grad``) written into a half ``out``, rounded once in it.

    ``out`` is any ndarray of a half dtype (either byte order, a subclass
    such as a tensor's ``.data``). The kernel's result is rounded to
    ``out``'s dtype by :mod:`cbrtgrad.arrays.half`, never rounded twice: the cube
    root from the compute dtype's correctly rounded result, the gradient from
    the float64 kernel's. Only the elements ``where`` selects are computed
    (no flag from the others) and written.
    """
    forward = len(args) == 1  # cbrt(x), else cbrt_grad(g, y)
    if forward:
        compute = _dtypes.compute_dtype_of(*args, dtype=dtype)
    else:
        compute = _dtypes.compute_dtype_of(*args, argument="g, y")
    # The values the kernel takes, which the exact comparisons must see.
    arrays = tuple(np.asarray(_subclasses.plain(a), compute) for a in args)
    plain = type(out) is np.ndarray
    check_out(_subclasses.plain(out), arrays, compute, where, writes=plain)
    # The gradient in float64 whatever the operands: correctly rounded over all of half's range.
    wide_dtype = compute if forward else np.dtype(np.float64)
    rounding: Any = _half.cube_root if forward else _half.gradient

    def rounded(*selected: Any) -> Any:
        wide = func(*(np.asarray(a, wide_dtype) for a in selected), backend=backend)
        return rounding(*selected, wide, out.dtype)

    shape = out.shape
    if where is True:
        result = rounded(*(np.broadcast_to(a, shape) for a in arrays))
    else:
        where = np.broadcast_to(where, shape)
        result = np.zeros(shape, out.dtype.newbyteorder("="))
        result[where] = rounded(*(np.broadcast_to(a, shape)[where] for a in arrays))
    if plain:
        np.copyto(out, result, where=where)
    else:
        # An exact copy through the subclass's own ufunc route, which sees the
        # write (a tensor's .data opens itself and bumps the tensor's version).
        np.positive(result, out=out, where=where)
    return out


def half_target(out: Any, *args: Any) -> Any:
    """``out`` when the call writes a half-precision ``out=`` (a tuple of one unwrapped), else None.

    A masked input keeps numpy's masked-array route (its mask decides what is written).
    """
    if isinstance(out, tuple) and len(out) == 1:
        out = out[0]
    if not isinstance(out, np.ndarray) or not _half.is_half(out.dtype):
        return None
    if any(isinstance(a, np.ma.MaskedArray) for a in (*args, out)):
        return None
    return out
