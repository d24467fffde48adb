"""Array plumbing shared by the host backends: numpy ufunc semantics around 1-D kernels.

``out`` and ``where`` arrive checked (:mod:`cbrtgrad.arrays.ufunc_args`), inputs in
the compute dtype the caller decided (:mod:`cbrtgrad.arrays.dtypes`).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from ..arrays import dtypes as _dtypes
from ..arrays.ufunc_args import (
    broadcast_shape,
    check_fused_out,
    fused_overlap,
    fused_shape,
    same_view,
)


def fused_outputs(
    x: Any, g: Any, out: Any, dtype: Any = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, ...] | None]:
    """Broadcast ``x`` and ``g``; check or allocate ``out = (y, dx)``.

    Returns ``x, g, y, dx`` (broadcast, in ``dtype``: by default the compute
    dtype of the inputs; new outputs in the inputs' memory order) and, when
    all four can be viewed as 1-D contiguous arrays without a copy (all
    C-ordered or all Fortran-ordered), those flat views in memory order
    (else ``None``). The fused
    kernels' ``out`` is checked here (by
    :func:`cbrtgrad.arrays.ufunc_args.check_fused_out`), the entry every host
    backend's ``cube_root_and_grad`` goes through, whether the api or a user
    calls it.
    """
    x, g = np.asarray(x), np.asarray(g)
    shape = fused_shape(x.shape, g.shape)
    # NOTE: np.broadcast_to, not np.broadcast_arrays: the latter's views warn
    # (FutureWarning) when their writeable flag is read, as the backends do.
    x = x if x.shape == shape else np.broadcast_to(x, shape)
    g = g if g.shape == shape else np.broadcast_to(g, shape)
    dtype = _dtypes.compute_dtype_of(x, g, argument="x, g", dtype=dtype)
    x = x.astype(dtype, copy=False)
    g = g.astype(dtype, copy=False)
    # NOTE: outputs in the inputs' memory order, as numpy's ufuncs make them
    # (order="K"): Fortran-ordered inputs (a transposed array) give
    # Fortran-ordered outputs, which the kernels then run over as one flat
    # pass in memory order; C-ordered outputs would make them strided passes,
    # several times slower than cbrt and cbrt_grad called apart.
    fortran = x.flags.f_contiguous and g.flags.f_contiguous and not x.flags.c_contiguous
    order: Literal["C", "F"] = "F" if fortran else "C"
    if out is None:
        y = np.empty(x.shape, dtype, order=order)
        dx = np.empty(x.shape, dtype, order=order)
    else:
        y, dx = check_fused_out(out, x.shape, dtype)
    arrays = (x, g, y, dx)
    if all(a.flags.c_contiguous for a in arrays):
        return x, g, y, dx, tuple(a.reshape(-1) for a in arrays)
    if all(a.flags.f_contiguous for a in arrays):
        return x, g, y, dx, tuple(a.reshape(-1, order="F") for a in arrays)
    return x, g, y, dx, None


def written_back(results: tuple[Any, Any], y: np.ndarray, dx: np.ndarray) -> tuple[Any, Any]:
    """``y`` then ``dx`` written from ``results``; returns ``(y, dx)``.

    For a fused call whose out pair overlaps its inputs or each other
    (:func:`cbrtgrad.arrays.ufunc_args.fused_overlap`): a host backend whose kernel
    writes ``y`` then ``dx`` block by block, or array by array, could read
    what it wrote, so it computes into new arrays and writes them here, as
    numpy's ufuncs behave (every input read before any output is written,
    ``y`` before ``dx``, so ``out=(a, a)`` holds ``dx``).

    Examples
    --------
    >>> a = np.zeros(2)
    >>> written_back((np.ones(2), np.full(2, 2.0)), a, a)[1]
    array([2., 2.])
    """
    np.copyto(y, results[0])
    np.copyto(dx, results[1])
    return y, dx


def fused_by_parts(backend: Any, x: Any, g: Any, out: Any, dtype: Any) -> tuple[Any, Any]:
    """``cube_root_and_grad`` as its two parts on ``backend``: ``y`` array by array, then ``dx``.

    For host backends without a fused kernel (``numpy``, ``accelerate``):
    the outputs broadcast and checked as every host backend's
    (:func:`fused_outputs`), an overlapping ``out`` pair computed apart and
    written back (:func:`written_back`).

    Examples
    --------
    >>> from cbrtgrad.backends import get_backend
    >>> fused_by_parts(get_backend("numpy"), np.array([8.0]), np.array([12.0]), None, None)
    (array([2.]), array([1.]))
    """
    x, g, y, dx, _ = fused_outputs(x, g, out, dtype)
    if out is not None and fused_overlap(x, g, y, dx):
        return written_back(fused_by_parts(backend, x, g, None, y.dtype), y, dx)
    backend.cube_root(x, out=y, dtype=y.dtype)
    backend.cube_root_grad(g, y, out=dx, dtype=y.dtype)
    return y, dx


def into_other_dtype(
    ufunc: np.ufunc, args: tuple[Any, ...], out: np.ndarray, compute: np.dtype
) -> np.ndarray:
    """``ufunc(*args, out=out)`` for an ``out`` not of the loop's dtype ``compute``: computed, cast.

    NOTE: for a numba-built ufunc (not for numpy's own, nor scipy's), numpy
    copies the old content of an ``out`` it must cast into its buffer before
    the loop, casting it too: uninitialised memory that holds a signalling
    nan raised a spurious "invalid value encountered in cast" (an error
    under ``np.errstate(invalid="raise")``, which left ``out`` unwritten).
    Computing into an array of the loop's dtype, then one ``same_kind``
    copy, never reads ``out``; the ufunc checks the shapes as it would.

    Examples
    --------
    >>> out = np.full(2, np.nan, np.float32)
    >>> into_other_dtype(np.negative, (np.array([1.0, -2.0]),), out, np.dtype(np.float64))
    array([-1.,  2.], dtype=float32)
    """
    computed = ufunc(*args, out=np.empty(out.shape, compute))
    np.copyto(out, computed, casting="same_kind")
    return out


def call_ufunc(
    ufunc: np.ufunc, *args: Any, out: Any = None, where: Any = True, dtype: Any = None
) -> Any:
    """Call one of cbrtgrad's ufuncs with numpy's ``out=``/``where=`` meaning.

    ``out`` and ``where`` were checked by the api. The ufunc writes any
    ``out`` itself (its loops take any strides); a mask is left to numpy,
    as ``np.copyto(out, result, where=where)``. NOTE: numba-made ufuncs reject
    ``where=`` under numpy 2 ("An iterator operand was flagged as the
    ARRAYMASK, but no WRITEMASKED operands were given"). Elements where the
    mask is false keep ``out``'s values (or are uninitialised when no ``out``
    is given, as in numpy).

    Examples
    --------
    >>> import numpy as np
    >>> from cbrtgrad.kernels.cpu.catalog import ufuncs
    >>> out = np.zeros(3)
    >>> call_ufunc(ufuncs().cube_root, np.array([8.0, 27.0, 64.0]), out=out,
    ...            where=np.array([True, False, True]))
    array([2., 0., 4.])
    """
    if where is True:
        return ufunc(*args, out=out, dtype=dtype)
    return masked(lambda *selected: ufunc(*selected, dtype=dtype), args, where, out, dtype)


def masked(compute: Any, inputs: tuple[Any, ...], where: Any, out: Any, dtype: Any = None) -> Any:
    """``compute`` on the elements ``where`` selects only, written into ``out`` there.

    As a numpy ufunc with ``where=``: the other elements are neither computed
    (so they raise no IEEE flag: ``np.errstate`` sees only the selected ones)
    nor written (``out`` keeps them; uninitialised without ``out``).
    ``compute`` takes and returns 1-D arrays of the selected elements. The
    result is ``out`` when given, else a new array (a numpy scalar when 0-d).

    Examples
    --------
    >>> import numpy as np
    >>> out = np.zeros(3)
    >>> masked(np.sqrt, (np.array([4.0, -1.0, 9.0]),), np.array([True, False, True]), out)
    array([2., 0., 3.])
    """
    arrays = [np.asarray(a) for a in inputs]
    shapes = [a.shape for a in arrays] + [np.shape(where)]
    shape = broadcast_shape(*shapes) if out is None else out.shape
    mask = np.broadcast_to(where, shape)
    selected = [np.broadcast_to(a, shape)[mask] for a in arrays]
    result = np.asarray(compute(*selected))
    if out is None:
        new = np.empty(shape, dtype or result.dtype)
        new[mask] = result
        # A 0-d result is a scalar, as numpy's ufuncs give it without out=.
        return new[()] if new.ndim == 0 else new
    out[mask] = result
    return out


def _flat(a: np.ndarray, order: str) -> np.ndarray:
    # A 1-D view in memory order; ``a`` is contiguous in ``order`` here.
    return a.reshape(-1, order=order)  # type: ignore[call-overload]


def apply_elementwise(
    kernel: Any,
    inputs: tuple[Any, ...],
    dtype: np.dtype,
    out: Any = None,
    where: Any = True,
) -> Any:
    """Run a 1-D contiguous ``kernel(*inputs, result)`` with numpy ufunc semantics.

    The kernel only ever sees 1-D arrays that are contiguous, writable (numba's
    compiled signatures are for writable arrays), aligned and of dtype
    ``dtype`` (native byte order: see
    :func:`cbrtgrad.kernels.cpu.prange_loops.check_behaved` for why a numba
    loop must never see an unaligned or byte-swapped array).
    ``out`` and ``where`` were checked by the api. One fast path, the layout
    of almost every call (:func:`direct_operands`: the kernel reads and
    writes the arrays as they are), and one general path for everything else
    a ufunc call allows (Python scalars, broadcasting, 0-d, any strides, C or
    Fortran order, ``out=`` of another float dtype, ``where=``, overlap): the
    inputs made contiguous, the kernel run into a fresh result, and numpy
    writing it out (``np.copyto(out, result, where=where, casting=...)``).

    Parameters
    ----------
    kernel : callable
        ``kernel(a, [b,] result)`` over 1-D arrays of equal length.
    inputs : tuple
        One or two array_likes.
    dtype : numpy.dtype
        The dtype the kernel computes in.
    out : ndarray, optional
        Written as a ufunc would (cast ``same_kind``, only where ``where``).
    where : array_like of bool or True

    Returns
    -------
    ndarray or numpy scalar
        ``out`` when given; else a new array (a scalar for 0-d results).

    Examples
    --------
    >>> import numpy as np
    >>> def twice(a, r): r[:] = 2 * a
    >>> apply_elementwise(twice, ([[1.0], [2.0]],), np.dtype(np.float64))
    array([[2.],
           [4.]])
    >>> apply_elementwise(twice, (3.0,), np.dtype(np.float64))
    np.float64(6.0)
    """
    if where is not True:
        # Only the selected elements are computed (numpy's where=), by the
        # general path below on their 1-D copy.
        return masked(
            lambda *selected: apply_elementwise(kernel, selected, dtype), inputs, where, out, dtype
        )
    direct_call = direct_operands(inputs, dtype, out, where)
    if direct_call is not None:
        flats, result = direct_call
        if result.size:
            kernel(*flats, result.reshape(-1))
        return result
    arrays = [np.asarray(a) for a in inputs]
    shapes = [a.shape for a in arrays]
    if where is not True:
        shapes.append(np.shape(where))
    shape = broadcast_shape(*shapes) if out is None else out.shape
    # Keep a Fortran-ordered input Fortran-ordered, as numpy's order='K' does.
    fortran = len(shape) > 1 and all(
        a.shape == shape and a.flags.f_contiguous and not a.flags.c_contiguous for a in arrays
    )
    order: Literal["C", "F"] = "F" if fortran else "C"
    flats = []
    for a in arrays:
        full = a if a.shape == shape else np.broadcast_to(a, shape)
        c = np.asarray(full, dtype=dtype, order=order)  # type: ignore[call-overload]
        # NOTE: read-only inputs (np.frombuffer, broadcast views, read-only
        # memmaps) do not match the kernels' writable signatures, and
        # unaligned ones (a view at an odd byte offset) must never reach a
        # numba loop (prange_loops.check_behaved): copied, which aligns them.
        # A byte-swapped input was made native by the cast just above.
        if not c.flags.behaved:
            c = c.copy(order=order)
        flats.append(_flat(c, order))
    if _takes_result(out, dtype, order, flats):
        # Written in place of a result and its copy into out: a pass over
        # memory and a fresh array fewer (a broadcast or strided input).
        if out.size:
            kernel(*flats, out.reshape(-1))
        return out
    result = np.empty(shape, dtype, order=order)
    if result.size:
        kernel(*flats, _flat(result, order))
    if out is None:
        # Where the mask is false the values are numpy's "uninitialised".
        return result[()] if result.ndim == 0 else result
    np.copyto(out, result, casting="same_kind", where=where)
    return out


def _plain(a: Any, dtype: np.dtype) -> bool:
    # An ndarray a 1-D kernel reads or writes as it is: of ``dtype``,
    # C-contiguous and behaved (aligned and writable: prange_loops.check_behaved).
    return type(a) is np.ndarray and a.dtype == dtype and a.flags.c_contiguous and a.flags.behaved


def _takes_result(out: Any, dtype: np.dtype, order: str, flats: list[np.ndarray]) -> bool:
    # Whether the general path's kernel can write out= itself: plain, and
    # sharing memory with no operand the kernel reads.
    return (
        order == "C" and _plain(out, dtype) and not any(np.may_share_memory(f, out) for f in flats)
    )


#: Below this many elements a broadcast gradient is not worth a special path.
CONSTANT_MIN = 1 << 12


def constant_operand(g: Any, y: Any, out: Any, where: Any, dtype: Any = None) -> Any:
    """The single value of ``g`` when ``g / (3 y^2)`` can take it as a scalar, else None.

    That is the case the gradient of a sum produces: ``g`` a stride-0
    broadcast of one value to the shape of a large, C-contiguous, writable
    ``y`` of the same float dtype (and ``dtype``, if given), no ``where=``,
    and no ``out=`` or one like ``y`` that is ``y`` or shares no memory with
    it (the value is read first). The kernels then read one value instead of
    a broadcast array (whose general strided loop is slower, or a copy).

    Examples
    --------
    >>> import numpy as np
    >>> y = np.ones(1 << 12)
    >>> constant_operand(np.broadcast_to(2.0, y.shape), y, None, True)
    np.float64(2.0)
    >>> constant_operand(np.broadcast_to(2.0, y.shape), y, np.empty_like(y), True)
    np.float64(2.0)
    >>> constant_operand(np.ones(y.shape), y, None, True) is None
    True
    """
    if where is not True or (dtype is not None and dtype != y.dtype):
        return None
    if type(g) is not np.ndarray or type(y) is not np.ndarray or g.shape != y.shape:
        return None
    if y.size < CONSTANT_MIN or any(g.strides) or g.dtype != y.dtype:
        return None
    if y.dtype.kind != "f" or y.dtype.itemsize not in (4, 8):
        return None
    # Aligned and in native byte order, as every array a numba loop takes
    # (prange_loops.check_behaved); a numpy scalar is always native.
    if not (y.flags.c_contiguous and y.flags.behaved and y.dtype.isnative):
        return None
    if out is not None:
        # An out= the constant kernel writes as it is: y itself, or like y in memory of its own.
        if not (_plain(out, y.dtype) and out.shape == y.shape):
            return None
        if np.may_share_memory(out, y) and not same_view(out, y):
            return None
    return g[(0,) * g.ndim]


def direct_operands(
    inputs: tuple[Any, ...], dtype: np.dtype, out: Any, where: Any
) -> tuple[list[np.ndarray], np.ndarray] | None:
    """The flat views a 1-D kernel can take as they are, or None.

    The common case, checked in a few microseconds instead of the general
    path of :func:`apply_elementwise`: inputs that are writable, aligned,
    C-contiguous ndarrays of ``dtype`` (native byte order) and one shape (at
    least 1-D), no ``where=``, and an ``out`` that is absent or such an array
    too, either the same view as an input (in place) or sharing no memory
    with any. Returns the flat inputs
    and the (possibly new) result array.

    Examples
    --------
    >>> import numpy as np
    >>> flats, result = direct_operands((np.ones((2, 3)),), np.dtype(np.float64), None, True)
    >>> flats[0].shape, result.shape
    ((6,), (2, 3))
    >>> direct_operands((np.ones(3)[::2],), np.dtype(np.float64), None, True) is None
    True
    """
    if where is not True:
        return None
    shape = None
    for a in inputs:
        if not _plain(a, dtype) or a.ndim == 0:
            return None
        if shape is None:
            shape = a.shape
        elif a.shape != shape:
            return None
    assert shape is not None
    if out is None:
        return [a.reshape(-1) for a in inputs], np.empty(shape, dtype)
    if not (_plain(out, dtype) and out.shape == shape):
        return None
    for a in inputs:
        if np.may_share_memory(a, out) and not same_view(a, out):
            return None
    return [a.reshape(-1) for a in inputs], out
