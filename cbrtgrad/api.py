"""The public element-wise functions: ``cbrt``, ``cbrt_grad``, ``cbrt_and_grad``.

Each call (1) hands over to an argument that overrides cbrtgrad functions
(``__cbrtgrad_function__``, as graph-engine tensors do), (2) decides, once,
everything the backends then trust: the compute dtype
(:func:`cbrtgrad._dtypes.compute_dtype_of`), the casts of host inputs to it,
``where=`` and ``out=`` (:mod:`cbrtgrad._ufunc_args`), (3) picks a
backend from the registry and (4) runs its kernel with numpy ufunc semantics
(broadcasting, ``out=``, ``where=``, 0-d and empty arrays, any strides, Python
scalars and lists).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _dtypes, _half, _subclasses
from ._array_kinds import is_dask_array, is_device_array
from ._dtypes import _NATIVE  # NOTE: looked up directly on the hot path (_dtypes.native)
from ._subclasses import has_subclass
from ._ufunc_args import (
    check_fused_out,
    check_out,
    check_where,
    fused_overlap,
    fused_shape,
    unaliased,
)
from .backends import _registry

#: The public functions, and the checks the graph engine's ``cbrt`` with
#: ``out=``/``where=`` makes through the api (defined in ``_ufunc_args``).
__all__ = ["cbrt", "cbrt_and_grad", "cbrt_grad", "check_out", "check_where", "unaliased"]

_NO_OVERRIDE = object()


def _override(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    # NEP-18 style: the first argument whose type defines the hook decides.
    for arg in args:
        hook = getattr(type(arg), "__cbrtgrad_function__", None)
        if hook is not None:
            result = hook(arg, func, args, kwargs)
            if result is not NotImplemented:
                return result
    return _NO_OVERRIDE


def _fused_aliasing(x: Any, g: Any, out: Any) -> bool:
    # Whether cbrt_and_grad's host out=(y, dx) needs temporaries (fused_overlap).
    if not (isinstance(out, tuple) and len(out) == 2):
        return False
    arrays = (x, g, *out)
    return all(type(a) is np.ndarray for a in arrays) and fused_overlap(*arrays)


def _half_out(
    func: Any, args: tuple[Any, ...], out: Any, where: Any, backend: Any, dtype: Any = None
) -> Any:
    """``func(*args)`` written into a half-precision ``out``, correctly rounded in its dtype.

    ``out`` is any ndarray of a half dtype (either byte order, a subclass
    such as a tensor's ``.data``). The kernel's result is rounded to
    ``out``'s dtype by :mod:`cbrtgrad._half`, never rounded twice: the cube
    root from the compute dtype's correctly rounded result, the gradient from
    the float64 kernel's. Only the elements ``where`` selects are computed
    (no flag from the others) and written.
    """
    if func is cbrt:
        compute = _dtypes.compute_dtype_of(*args, dtype=dtype)
    else:
        compute = _dtypes.compute_dtype_of(*args, argument="g, y")
    # The values the kernel takes, which the exact comparisons must see.
    arrays = tuple(np.asarray(_subclasses.plain(a), compute) for a in args)
    plain = type(out) is np.ndarray
    check_out(_subclasses.plain(out), arrays, compute, where, writes=plain)
    # The gradient in float64 whatever the operands: correctly rounded over all of half's range.
    wide_dtype = compute if func is cbrt else np.dtype(np.float64)
    rounding: Any = _half.cube_root if func is cbrt else _half.gradient

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


def _numpy_takes(chosen: Any, out: Any, where: Any) -> bool:
    """Whether numpy's ufunc machinery takes this ``out=`` for the backend ``chosen``.

    A plain ndarray ``out`` of a call without ``where=``, on a backend whose
    kernels are numpy ufuncs (``ufunc_out``: the ``cpu`` backend): numpy
    checks it (its type, a shape the operands broadcast to, a dtype the
    result casts to, writable) and gives its answer for any overlap with
    the inputs, so the api does neither; where numpy refuses it,
    ``check_out`` words the error as for every other backend.
    """
    return where is True and type(out) is np.ndarray and getattr(chosen, "ufunc_out", False)


def _half_target(out: Any, *args: Any) -> Any:
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


def _as_compute(value: Any, dtype: np.dtype) -> Any:
    # Host inputs as plain ndarrays in the compute dtype: numpy values cast
    # only when they differ (float16, integers, mixed precision); Python
    # scalars, lists and every other array_like numpy takes (range,
    # memoryview, array.array, objects with __array__) made arrays, so every
    # backend sees an ndarray. Left to their backend: dask arrays (cast inside
    # each chunk's task) and device arrays (numba device arrays have no
    # ``astype``, and a cast would leave the device; the cuda kernels cast
    # while they read).
    if type(value) is np.ndarray and value.dtype is dtype:
        return value  # NOTE: hot path: already in the compute dtype
    if isinstance(value, (np.ndarray, np.generic)):
        return value if value.dtype == dtype else np.asarray(value, dtype=dtype)
    if is_dask_array(value) or is_device_array(value):
        return value
    return np.asarray(value, dtype=dtype)


def _subclass_result(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``func(*args, **kwargs)`` when an argument or ``out`` is an ndarray subclass.

    See :func:`cbrtgrad._subclasses.through_subclass`; the result has the subclass numpy would give.
    """
    out = kwargs.get("out")
    outs = out if isinstance(out, tuple) else (out,)
    arrays = [v for v in (*args, *outs) if isinstance(v, np.ndarray)]
    if any(_subclasses.overrides_ufuncs(v) for v in arrays):
        backend = kwargs.get("backend")
        if func is cbrt_and_grad:
            y_out, dx_out = (None, None) if out is None else out
            y = cbrt(args[0], y_out, backend=backend)
            return y, cbrt_grad(args[1], y, dx_out, backend=backend)
        where = kwargs.get("where", True)
        if where is not True:
            where = check_where(where)
        if func is cbrt:
            dtype = _dtypes.compute_dtype_of(args[0], dtype=kwargs.get("dtype"))
            return _subclasses.through_subclass("cube_root", args, out, where, dtype)
        dtype = _dtypes.compute_dtype_of(*args, argument="g, y")
        return _subclasses.through_subclass("cube_root_grad", args, out, where, dtype)
    plain_out = (
        tuple(_subclasses.plain(o) for o in outs)
        if isinstance(out, tuple)
        else _subclasses.plain(out)
    )
    result = func(*(_subclasses.plain(a) for a in args), **{**kwargs, "out": plain_out})
    if out is not None:
        return out
    sub = _subclasses.subclass(*args)
    if isinstance(result, tuple):
        return tuple(_subclasses.wrap(sub, r, args, i) for i, r in enumerate(result))
    return _subclasses.wrap(sub, result, args, 0)


def cbrt(
    x: Any, /, out: Any = None, *, where: Any = True, dtype: Any = None, backend: Any = None
) -> Any:
    """Element-wise real cube root, ``y = sgn(x) |x|^(1/3)``.

    Correctly rounded for every float32 and float64 input. ±0 keeps its
    sign; ±inf and nan are returned unchanged (a signaling nan quieted).

    Parameters
    ----------
    x : array_like
        Input. float16 is computed in float32 and returned as float32 (the op's
        force-fp32 policy); bool and integers give float64.
    out : ndarray, optional
        Where to write the result (``out=x`` works), as for a numpy ufunc.
    where : array_like of bool, optional
        Where to compute; elsewhere ``out`` keeps its value.
    dtype : dtype, optional
        float32 or float64 to compute in (float16 means float32).
    backend : str, optional
        A name from :func:`cbrtgrad.backends.known`; default: the automatic
        choice (see :mod:`cbrtgrad.backends`).

    Returns
    -------
    ndarray or scalar
        As a numpy ufunc returns it.

    Raises
    ------
    TypeError
        For complex, object, string and other non-real dtypes (the message
        names the dtype), and for a non-float ``dtype=``.

    See Also
    --------
    numpy.cbrt, scipy.special.cbrt

    Examples
    --------
    >>> import numpy as np, cbrtgrad
    >>> cbrtgrad.cbrt(np.array([-27.0, -0.0, 8.0, np.inf]))
    array([-3., -0.,  2., inf])
    >>> cbrtgrad.cbrt(np.float16(8)).dtype
    dtype('float32')
    >>> cbrtgrad.cbrt(np.array([1, 8, 64]))
    array([1., 2., 4.])
    """
    # NOTE: hot path. A plain ndarray has no override hook (numpy's own type
    # cannot be given one), nor a subclass to wrap the result. Otherwise
    # _override is inlined for the one argument (a Tensor calls its hook here).
    plain = type(x) is np.ndarray
    if not plain:
        hook = getattr(type(x), "__cbrtgrad_function__", None)
        if hook is not None:
            if out is None and where is True and dtype is None and backend is None:
                overridden = hook(x, cbrt, (x,), {})
            else:
                kwargs = {"out": out, "where": where, "dtype": dtype, "backend": backend}
                overridden = hook(x, cbrt, (x,), kwargs)
            if overridden is not NotImplemented:
                return overridden
    if out is not None and (type(out) is not np.ndarray or out.dtype.itemsize == 2):
        half_out = _half_target(out, x)
        if half_out is not None:
            return _half_out(cbrt, (x,), half_out, check_where(where), backend, dtype)
    if (not plain or (out is not None and type(out) is not np.ndarray)) and has_subclass(x, out):
        kwargs = {"out": out, "where": where, "dtype": dtype, "backend": backend}
        return _subclass_result(cbrt, (x,), kwargs)
    # NOTE: hot path: a plain array of a compute dtype computes in it, as it is.
    compute = _NATIVE.get(x.dtype) if plain and dtype is None else None
    if compute is None:
        compute = _dtypes.compute_dtype_of(x, dtype=dtype)
        x = _as_compute(x, compute)
    if where is not True:
        where = check_where(where)
    chosen = _registry.resolve(backend, x)
    if out is None:
        return chosen.cube_root(x, where=where, dtype=compute)
    if _numpy_takes(chosen, out, where):
        try:
            return chosen.cube_root(x, out=out, dtype=compute)
        except (TypeError, ValueError):
            check_out(out, (x,), compute)  # cbrtgrad's words for what numpy refused
            raise
    out = check_out(out, (x,), compute, where)
    if not getattr(chosen, "ufunc_out", False):
        (x,) = unaliased((x,), out)
    return chosen.cube_root(x, out=out, where=where, dtype=compute)


def cbrt_grad(g: Any, y: Any, /, out: Any = None, *, where: Any = True, backend: Any = None) -> Any:
    """Gradient of the cube root from its saved output: ``dL/dx = g / (3 y^2)``.

    Correctly rounded for the ``y`` it is given: in float32 for normal
    results, in float64 where ``|g| >= 2^-968`` and the result lies in
    ``[2^-968, 2^1020)`` in magnitude (docs/mathematics.md). Against the exact
    derivative ``g / (3 x^(2/3))`` when ``y = cbrt(x)``, which also carries
    the rounding of ``y``: within 2.23 ulp (float32) and 3 ulp (float64).

    Parameters
    ----------
    g : array_like
        Upstream gradient ``dL/dy``.
    y : array_like
        The saved forward output ``cbrt(x)`` (not the input ``x``).
    out, where, backend
        As for :func:`cbrt`.

    Returns
    -------
    ndarray or scalar

    Notes
    -----
    At ``y = 0`` the derivative is singular and the result follows IEEE
    division: ``+inf`` or ``-inf`` with the sign of ``g`` and ``nan`` when
    ``g = 0``, with numpy's usual "divide by zero" / "invalid value"
    ``RuntimeWarning`` (or ``FloatingPointError`` under ``np.errstate``), as
    JAX's ``grad(jnp.cbrt)(0.0) = inf``.

    Examples
    --------
    >>> import numpy as np, cbrtgrad
    >>> cbrtgrad.cbrt_grad(np.array([1.0, 6.0]), np.array([1.0, -2.0]))
    array([0.33333333, 0.5       ])
    """
    # NOTE: hot path: plain ndarrays have no override hook (as in cbrt).
    plain = type(g) is np.ndarray and type(y) is np.ndarray
    if not plain:
        kwargs = {"out": out, "where": where, "backend": backend}
        overridden = _override(cbrt_grad, (g, y), kwargs)
        if overridden is not _NO_OVERRIDE:
            return overridden
    if out is not None and (type(out) is not np.ndarray or out.dtype.itemsize == 2):
        half_out = _half_target(out, g, y)
        if half_out is not None:
            return _half_out(cbrt_grad, (g, y), half_out, check_where(where), backend)
    if (not plain or (out is not None and type(out) is not np.ndarray)) and has_subclass(g, y, out):
        kwargs = {"out": out, "where": where, "backend": backend}
        return _subclass_result(cbrt_grad, (g, y), kwargs)
    # NOTE: hot path: plain arrays of one compute dtype compute in it, as they are.
    compute = _NATIVE.get(y.dtype) if plain and g.dtype is y.dtype else None
    if compute is None:
        compute = _dtypes.compute_dtype_of(g, y, argument="g, y")
        g, y = _as_compute(g, compute), _as_compute(y, compute)
    if where is not True:
        where = check_where(where)
    chosen = _registry.resolve(backend, y, g)
    if out is None:
        return chosen.cube_root_grad(g, y, where=where, dtype=compute)
    if _numpy_takes(chosen, out, where):
        try:
            return chosen.cube_root_grad(g, y, out=out, dtype=compute)
        except (TypeError, ValueError):
            check_out(out, (g, y), compute)  # cbrtgrad's words for what numpy refused
            raise
    out = check_out(out, (g, y), compute, where)
    if not getattr(chosen, "ufunc_out", False):
        g, y = unaliased((g, y), out)
    return chosen.cube_root_grad(g, y, out=out, where=where, dtype=compute)


def cbrt_and_grad(x: Any, g: Any, /, out: Any = None, *, backend: Any = None) -> tuple[Any, Any]:
    """Forward and backward in one pass over memory: ``(cbrt(x), g / (3 y^2))``.

    Gives the same bits as ``y = cbrt(x); cbrt_grad(g, y)``.

    Parameters
    ----------
    x : array_like
        Input of the cube root.
    g : array_like
        Upstream gradient, broadcast against ``x``.
    out : tuple of two ndarrays, optional
        ``(y, dx)`` to write into; they must have the broadcast shape and the
        compute dtype.
    backend : str, optional
        As for :func:`cbrt`.

    Returns
    -------
    (ndarray, ndarray)
        ``y`` and ``dL/dx``.

    Examples
    --------
    >>> import numpy as np, cbrtgrad
    >>> y, dx = cbrtgrad.cbrt_and_grad(np.array([8.0, -1.0]), np.array([12.0, 3.0]))
    >>> y, dx
    (array([ 2., -1.]), array([1., 1.]))
    """
    plain = type(x) is np.ndarray and type(g) is np.ndarray  # NOTE: hot path, as in cbrt_grad
    if not plain:
        overridden = _override(cbrt_and_grad, (x, g), {"out": out, "backend": backend})
        if overridden is not _NO_OVERRIDE:
            return overridden  # type: ignore[no-any-return]
    if (not plain or out is not None) and has_subclass(x, g, out):
        result = _subclass_result(cbrt_and_grad, (x, g), {"out": out, "backend": backend})
        return result  # type: ignore[no-any-return]
    # NOTE: hot path: plain arrays of one compute dtype compute in it, as they are.
    compute = _NATIVE.get(x.dtype) if plain and x.dtype is g.dtype else None
    if compute is None:
        compute = _dtypes.compute_dtype_of(x, g, argument="x, g")
        x, g = _as_compute(x, compute), _as_compute(g, compute)
    chosen = _registry.resolve(backend, x, g)
    if out is not None and _fused_aliasing(x, g, out):
        # As numpy's ufuncs: every input read before any output is written,
        # y written before dx (so out=(a, a) holds dx).
        y_out, dx_out = check_fused_out(out, fused_shape(np.shape(x), np.shape(g)), compute)
        y, dx = chosen.cube_root_and_grad(x, g, dtype=compute)
        np.copyto(y_out, y)
        np.copyto(dx_out, dx)
        return y_out, dx_out
    # Any other out=(y, dx) is checked where every fused kernel takes it
    # (cbrtgrad._ufunc_args.check_fused_out, from the backend's entry).
    return chosen.cube_root_and_grad(x, g, out=out, dtype=compute)
