"""``out=`` and ``where=`` as numpy's ufuncs take them: checked here, once, for every caller.

The api checks a call's ``out`` and ``where`` with these functions before it
picks a backend, and the backends trust what they get. A backend's own
public entries that users may call directly (``get_backend("cuda")``'s
methods, :class:`~cbrtgrad.backends.dask_blocks.DaskBlocks`, every fused
kernel's ``out=(y, dx)``) check through the same functions, so each rule and
its message is written once.

Every overlap of an output with an input is numpy's too: :func:`unaliased`
copies the inputs an ``out`` overlaps, :func:`fused_overlap` says when the
fused kernel's pair needs temporaries.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import dtypes as _dtypes
from .kinds import is_dask_array, is_device_array


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """``np.broadcast_shapes`` with cbrtgrad's message.

    Examples
    --------
    >>> broadcast_shape((3, 1), (4,))
    (3, 4)
    """
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        raise ValueError(
            "cbrtgrad: operands could not be broadcast together with shapes "
            + ", ".join(str(s) for s in shapes)
        ) from None


def fused_shape(x_shape: tuple[int, ...], g_shape: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of both results of ``cbrt_and_grad``: ``x`` and ``g`` broadcast together.

    Examples
    --------
    >>> fused_shape((3, 1), (2,))
    (3, 2)
    """
    try:
        return np.broadcast_shapes(x_shape, g_shape)
    except ValueError:
        raise ValueError(
            f"cbrtgrad: x and g could not be broadcast together with shapes {x_shape}, {g_shape}"
        ) from None


def same_view(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays are the same view of the same memory (in place is fine)."""
    return (
        a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
        and a.strides == b.strides
        and a.dtype == b.dtype
    )


def check_where(where: Any) -> Any:
    """``where=`` as the backends take it: ``True``, or a bool array (a list becomes one).

    Examples
    --------
    >>> check_where([True, False])
    array([ True, False])
    """
    if where is True:
        return True
    if isinstance(where, (list, tuple)):
        where = np.asarray(where)
    dt = _dtypes.dtype_of(where)
    if dt.kind != "b":
        raise TypeError(f"cbrtgrad: where must be a bool array or True, got dtype {dt}")
    return where


def check_out(
    out: Any, operands: tuple[Any, ...], dtype: np.dtype, where: Any = True, writes: bool = True
) -> Any:
    """Check ``out=`` as a ufunc would, with cbrtgrad's messages; return it.

    An ndarray for host operands; a dask array for dask operands (dask
    writes nothing until computed: ``out`` is rebound to the result's graph);
    a device array only with device operands (the cuda backend's own rules,
    exactly the result's shape and dtype, are :func:`exact_out`'s). A dask
    ``out`` or operand of unknown chunk sizes (``nan`` in its shape) is a
    ``ValueError``: its shape cannot be checked, as in dask. Of a
    shape the operands broadcast to, a dtype the result casts to
    (``same_kind``), writable (unless ``writes`` is False: the caller writes
    through the array's own ``__array_ufunc__``, which decides, as a tensor's
    read-only ``.data`` view does). A tuple of one array is that array.

    Examples
    --------
    >>> check_out(np.empty(3), (np.ones(3),), np.dtype(np.float64)).shape
    (3,)
    """
    if out is None:
        return None
    # NOTE: hot path: an ndarray of the result's dtype (numpy's native dtypes
    # are singletons, so identity is the cheap test) and of every operand's
    # shape (an out= in a loop) needs none of the checks below but writability.
    if type(out) is np.ndarray and out.dtype is dtype and where is True:
        shape = out.shape
        for a in operands:
            if type(a) is not np.ndarray or a.shape != shape:
                break
        else:
            if out.flags.writeable:
                return out
    if isinstance(out, tuple):
        if len(out) != 1:
            raise ValueError(f"cbrtgrad: out must be one array, got a tuple of {len(out)}")
        out = out[0]
    host = isinstance(out, np.ndarray)
    if host and any(is_dask_array(a) for a in operands):
        raise TypeError(
            "cbrtgrad: out must be a dask array when the input is a dask array "
            f"(dask writes nothing until computed), got {type(out).__name__}"
        )
    # A dask or device out= only goes with inputs of that kind (their backend
    # writes it); for host inputs it must be an ndarray.
    if not host and not any(
        (is_dask_array(out) and is_dask_array(a)) or (is_device_array(out) and is_device_array(a))
        for a in operands
    ):
        raise TypeError(f"cbrtgrad: out must be a numpy.ndarray, got {type(out).__name__}")
    shapes = [np.shape(a) for a in operands]
    if where is not True:
        shapes.append(np.shape(where))
    if not host and any(n != n for shape in (out.shape, *shapes) for n in shape):
        # A dask shape holds nan where dask does not know the chunk sizes
        # (after x[x > 0]): out's shape cannot be checked against the
        # result's, and dask's own ufuncs refuse such an out= too.
        raise ValueError(
            f"cbrtgrad: out= cannot be checked when a shape has unknown sizes (out {out.shape}, "
            f"operands {', '.join(str(s) for s in shapes)}); call compute_chunk_sizes() on "
            "the dask arrays first, or use the returned array"
        )
    if any(s != out.shape for s in shapes):  # NOTE: the common case skips broadcasting
        shape = broadcast_shape(*shapes)
        try:
            grown = np.broadcast_shapes(shape, out.shape)
        except ValueError:
            grown = None
        if grown != out.shape:  # as in a ufunc: the operands may broadcast up to out's shape
            raise ValueError(
                f"cbrtgrad: out has shape {out.shape}; the operands broadcast to {shape}"
            )
    if out.dtype != dtype and not np.can_cast(dtype, out.dtype, "same_kind"):
        raise TypeError(
            f"cbrtgrad: cannot write a {dtype} result into out of dtype {out.dtype} "
            "(casting rule 'same_kind')"
        )
    if host and writes and not out.flags.writeable:
        raise ValueError("cbrtgrad: out is read-only")
    return out


def exact_out(name: str, found: Any, shape: tuple[int, ...], dtype: np.dtype) -> None:
    """Check that an output ``found`` (with ``shape`` and ``dtype``) is exactly the result's.

    The rule of outputs a kernel writes as they are, with no broadcasting or
    cast on the way: ``cbrt_and_grad``'s pair and the cuda backend's outputs.

    Examples
    --------
    >>> exact_out("out", np.empty(2), (2,), np.dtype(np.float64))
    """
    if found.shape != shape:
        raise ValueError(f"cbrtgrad: {name} has shape {found.shape}; expected {shape}")
    if found.dtype != dtype:
        raise TypeError(f"cbrtgrad: {name} has dtype {found.dtype}; expected {dtype}")


def fused_pair(out: Any, kind: str = "arrays") -> tuple[Any, Any]:
    """``cbrt_and_grad``'s ``out``: ``(None, None)`` or the pair ``(y, dx)``.

    Examples
    --------
    >>> fused_pair(None)
    (None, None)
    """
    if out is None:
        return None, None
    if not isinstance(out, tuple) or len(out) != 2:
        raise TypeError(f"cbrtgrad: out must be a tuple (y, dx) of two {kind}")
    return out


def check_fused_out(out: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    """Check a host ``cbrt_and_grad``'s ``out=(y, dx)``: ndarrays of ``shape`` and ``dtype``.

    Returns ``out`` (``None`` when absent).

    Examples
    --------
    >>> y, dx = check_fused_out((np.empty(2), np.empty(2)), (2,), np.dtype(np.float64))
    """
    if out is None:
        return None
    for name, arr in zip(("y", "dx"), fused_pair(out), strict=True):
        if not isinstance(arr, np.ndarray):
            raise TypeError(
                f"cbrtgrad: out[{name}] must be a numpy.ndarray, got {type(arr).__name__}"
            )
        exact_out(f"out[{name}]", arr, shape, dtype)
        if not arr.flags.writeable:
            raise ValueError(f"cbrtgrad: out[{name}] is read-only")
    return out


def _identical(a: np.ndarray, b: np.ndarray) -> bool:
    # The same elements in the same order: a kernel may write b[i] after reading a[i].
    return a.shape == b.shape and same_view(a, b)


def unaliased(inputs: tuple[Any, ...], out: Any) -> tuple[Any, ...]:
    """``inputs`` that ``out`` does not overlap: copies of those it does (numpy's semantics).

    A numpy ufunc gives the same answer for any overlap of its output with
    its inputs, as if every input had been read before anything was written.
    The one exception the kernels handle themselves is ``out`` being the very
    same view as an input (``out=x``), which is left alone; any other overlap
    (a shifted or reversed view, a broadcast input, a view of another dtype)
    gets a copy of the input first. Only host ndarrays are looked at (dask
    never writes into its ``out=``; device arrays have their own backend).

    NOTE: numpy's own overlap copies are not enough for a loop that reads
    its inputs again after writing (the block loops' exact and nan passes):
    numpy copies nothing where ``out`` starts before an input (``out=a[:-1]``
    for ``a[1:]``), as it assumes each element is read before it is written,
    in order. The ``cpu`` backend's inner loops take that case themselves
    (kernels/cpu/ufunc_loops.py) and the api hands them to numpy
    (:mod:`cbrtgrad.backends.host`) without this function; the other backends need it.
    """
    if type(out) is not np.ndarray:
        return inputs
    kept = []
    for a in inputs:
        if isinstance(a, np.ndarray) and np.may_share_memory(a, out) and not _identical(a, out):
            a = a.copy()
        kept.append(a)
    return tuple(kept)


def fused_overlap(x: np.ndarray, g: np.ndarray, y: np.ndarray, dx: np.ndarray) -> bool:
    """Whether ``cbrt_and_grad``'s outputs ``y, dx`` overlap its inputs or each other.

    The kernels read ``x[i]`` and ``g[i]`` before writing ``y[i]`` and
    ``dx[i]``, and compute ``dx`` from ``y``: ``y`` may be ``x`` itself and
    ``dx`` may be ``x`` or ``g`` itself. Any other overlap needs temporaries.

    Examples
    --------
    >>> a, b = np.ones(3), np.ones(3)
    >>> fused_overlap(a, b, a, b), fused_overlap(a, b, b, a)
    (False, True)
    """
    allowed = {(0, 2), (0, 3), (1, 3)}
    arrays = (x, g, y, dx)
    for i, j in ((0, 2), (0, 3), (1, 2), (1, 3), (2, 3)):
        a, b = arrays[i], arrays[j]
        if np.may_share_memory(a, b) and not ((i, j) in allowed and _identical(a, b)):
            return True
    return False


def ready_pair(out: Any, g: np.ndarray, dtype: np.dtype, shape: tuple[int, ...]) -> bool:
    """Whether ``out=(y, dx)`` can go to the two ufuncs as it is: no check, no temporary.

    Two writeable ndarrays of exactly ``dtype`` and ``shape``, with ``y`` not
    over ``g``: numpy takes each as the ufunc's ``out`` with nothing to check
    (so neither call can fail once the first has written ``y``), and
    numpy's overlap rules for ``cube_root(x, out=y)`` then
    ``cube_root_grad(g, y, out=dx)`` give the fused rule (every input read
    before an output is written, ``y`` before ``dx``, so ``out=(a, a)``
    holds ``dx``). Only ``y`` over ``g`` would let the first call clobber
    what the second reads. NOTE: the small fused calls' route (the api's
    and the ``cpu`` backend's): the general route's checks would cost several
    times the two ufunc calls (docs/performance.md).

    Examples
    --------
    >>> a, b = np.ones(3), np.ones(3)
    >>> f64 = np.dtype(np.float64)
    >>> ready_pair((a, b), b, f64, (3,)), ready_pair((a, b), a, f64, (3,))
    (True, False)
    """
    if type(out) is not tuple or len(out) != 2:
        return False
    y, dx = out
    return (
        type(y) is np.ndarray
        and type(dx) is np.ndarray
        and y.dtype is dtype
        and dx.dtype is dtype
        and y.shape == shape
        and dx.shape == shape
        and y.flags.writeable
        and dx.flags.writeable
        and not np.may_share_memory(y, g)
    )


def fused_aliasing(x: Any, g: Any, out: Any) -> bool:
    """Whether ``cbrt_and_grad``'s host ``out=(y, dx)`` needs temporaries (:func:`fused_overlap`).

    Examples
    --------
    >>> a, b = np.ones(3), np.ones(3)
    >>> fused_aliasing(a, b, (b, a)), fused_aliasing(a, b, (a, b)), fused_aliasing(a, a, None)
    (True, False, False)
    """
    if not (isinstance(out, tuple) and len(out) == 2):
        return False
    arrays = (x, g, *out)
    return all(type(a) is np.ndarray for a in arrays) and fused_overlap(*arrays)
