"""Dask arrays: any host backend, mapped chunk by chunk with ``dask.array.map_blocks``.

Dask is a container, not a kernel: :func:`cbrtgrad.backends.resolve` wraps the
backend it would pick for one chunk (by default the automatic choice for the
array's ``_meta``: ``cpu`` for numpy chunks, ``cuda`` for CuPy chunks) in a
:class:`DaskBlocks`, which builds a lazy graph whose tasks call that backend on
each chunk. The results are lazy dask arrays with the dtype numpy input would
give, and the same bits.

NOTE: the graph's tasks name the backend, not its kernels. numba's ufuncs do
not pickle (pickle looks them up by name in a module that does not define
them), so a graph holding them could not go to ``dask.distributed`` workers;
the module-level block functions here pickle by reference and look the
backend up in the worker's own registry (compiling its kernels there once).
"""

from __future__ import annotations

import functools
import math
import operator
from typing import Any

import numpy as np

from ..arrays import dtypes as _dtypes
from ..arrays.kinds import NUMBA, is_dask_array, is_device_array, library_of
from ..arrays.namespaces import device, library_dtype, namespace
from ..arrays.ufunc_args import broadcast_shape, check_out
from ..kernels.kernel_ops import KERNEL_OPS, KernelOp
from ._catalog import get_backend as _backend
from ._protocol import Availability, ElementwiseOps


def _host(block: Any, dtype: np.dtype) -> Any:
    # Inside a task: numpy chunks are cast here (so the cast is part of the
    # kernel's task, not a graph layer of its own); device chunks (CuPy) are
    # left to the cuda backend, which casts while it reads.
    if isinstance(block, (np.ndarray, np.generic, int, float, bool)):
        return np.asarray(block, dtype=dtype)
    return block


def _op_block(*blocks: Any, op: str, backend: str, dtype: np.dtype, where: bool, out: bool) -> Any:
    # One task: the op's inputs, then the where= and out= blocks when given.
    arity = KERNEL_OPS[op].arity
    mask = blocks[arity] if where else True
    old = np.array(blocks[-1], dtype=dtype) if out else None  # a chunk is never written to
    inputs = [_host(block, dtype) for block in blocks[:arity]]
    return getattr(_backend(backend), op)(*inputs, out=old, where=mask, dtype=dtype)


def _fused_block(x: Any, g: Any, *, backend: str, dtype: np.dtype) -> tuple[Any, Any]:
    # One task computes both results of its chunk in one pass; the two
    # output arrays take them out of the pair (``operator.getitem``, no copy).
    result: tuple[Any, Any] = _backend(backend).cube_root_and_grad(_host(x, dtype), _host(g, dtype))
    return result


def _unknown_shape(value: Any) -> bool:
    """Whether ``value`` is a dask array whose chunk sizes dask does not know (``nan``).

    Boolean indexing (``x[x > 0]``) and some dataframe conversions give such arrays.
    """
    return is_dask_array(value) and any(math.isnan(n) for n in value.shape)


def _length_one_axes(value: Any) -> tuple[int, ...] | None:
    # The axes, counted from the last, along which ``value`` has length 1 in
    # the whole array (dask then gives every block that one element); None
    # for a scalar.
    if np.ndim(value) == 0:
        return None
    return tuple(k for k, n in enumerate(reversed(np.shape(value))) if n == 1)


def _same_lengths(function: Any, broadcast: tuple[Any, ...], *blocks: Any, **kwargs: Any) -> Any:
    """``function(*blocks, **kwargs)`` once the blocks' lengths are seen to match.

    Used where dask did not know the chunk sizes when the graph was built: two
    operands with unknown lengths (``nan``) along an axis are only known to
    agree there when their blocks arrive. numpy would broadcast a block of
    length 1 against a longer one without a word, so every block must have
    the result's length along every axis where its whole array is not of
    length 1 (``broadcast``: :func:`_length_one_axes` of each operand).
    """
    shapes = [np.shape(b) for b, axes in zip(blocks, broadcast, strict=True) if axes is not None]
    try:
        shape = np.broadcast_shapes(*shapes)
    except ValueError:
        shape = None
    for block, axes in zip(blocks, broadcast, strict=True):
        if axes is None:
            continue
        own = np.shape(block)
        if shape is None or any(
            k not in axes and n != shape[len(shape) - 1 - k] for k, n in enumerate(reversed(own))
        ):
            raise ValueError(
                "cbrtgrad: operands with unknown chunk sizes (nan in chunks) do not line up: "
                f"blocks of shapes {', '.join(str(s) for s in shapes)} met in one task; "
                "call compute_chunk_sizes() on them to have it checked when the graph is built"
            )
    return function(*blocks, **kwargs)


class DaskBlocks(ElementwiseOps):
    """The three kernels of backend ``inner`` applied to each chunk of dask arrays.

    Parameters
    ----------
    inner : str
        The registry name of the backend that computes each chunk.

    Notes
    -----
    ``out=`` must be a dask array of the result's shape: as in dask, it is
    rebound to the result's graph (nothing is written until computed).
    ``where=`` may be a bool numpy or dask array; elements where it is false
    keep ``out``'s values (or are uninitialised without ``out``), as in numpy.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> blocks = DaskBlocks("cpu")
    >>> y = blocks.cube_root(da.from_array(np.array([-8.0, 27.0, 64.0]), chunks=2))
    >>> y.compute()
    array([-2.,  3.,  4.])
    """

    def __init__(self, inner: str) -> None:
        self.inner = inner
        self.name = f"dask[{inner}]"

    def __repr__(self) -> str:
        return f"DaskBlocks({self.inner!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DaskBlocks) and other.inner == self.inner

    def __hash__(self) -> int:
        return hash(("DaskBlocks", self.inner))

    def availability(self) -> Availability:
        import importlib.util

        if importlib.util.find_spec("dask") is None:
            return Availability(False, "dask is not installed (pip install 'cbrtgrad[dask]')")
        return Availability(True, f"dask.array chunks computed by the {self.inner!r} backend")

    def accepts(self, x: Any) -> bool:
        return is_dask_array(x)

    # -- plumbing -------------------------------------------------------------

    @staticmethod
    def _lazy(value: Any, name: str) -> Any:
        """Dask arrays as they are, scalars as scalars, other array_likes as numpy arrays.

        Python scalars stay Python scalars (weak in numpy's promotion); 0-d
        arrays become numpy scalars, passed whole to every task.
        """
        if is_dask_array(value) or isinstance(value, (int, float, bool)):
            return value
        if is_device_array(value) or not isinstance(value, (np.ndarray, np.generic, list, tuple)):
            raise TypeError(
                f"cbrtgrad: {name} must be a dask array, a numpy array or a scalar to combine "
                f"with a dask array, got {type(value).__name__}"
            )
        array = np.asarray(value)
        return array[()] if array.ndim == 0 else array

    @staticmethod
    def _broadcast(*values: Any, lead: int = 0) -> list[Any]:
        """Give the array operands one shape and one chunking; scalars stay scalars.

        The chunks are those of ``values[lead]`` (the array the kernel is
        called on) when it is a dask array of the full shape, else of the
        first dask array that is. Numpy operands become dask arrays in those
        chunks.

        NOTE: blockwise operations broadcast an operand that has one block
        along an axis to every block, whatever its length, so every operand
        is given the chunks explicitly. A broadcast numpy view (stride 0, as
        the engine's gradients of sums are) is first cut down to its real
        data: a graph holding the view would pickle it at full size.
        """
        import dask.array as da

        if any(_unknown_shape(v) for v in values):
            return DaskBlocks._dask_aligned(values)
        shape = broadcast_shape(*(np.shape(v) for v in values if np.ndim(v) > 0))
        candidates = [values[lead], *values]
        full = [v for v in candidates if is_dask_array(v) and v.shape == shape]
        if full:
            chunks = full[0].chunks
        else:
            first = next(v for v in values if is_dask_array(v))
            chunks = da.broadcast_to(first, shape).chunks

        def fit(v: Any) -> Any:
            if np.ndim(v) == 0:
                return v
            if not is_dask_array(v):
                v = np.ascontiguousarray(
                    v[tuple(slice(0, 1) if st == 0 else slice(None) for st in v.strides)]
                )
            offset = len(shape) - v.ndim
            own = tuple(
                (1,) if n == 1 and shape[offset + i] != 1 else chunks[offset + i]
                for i, n in enumerate(v.shape)
            )
            if is_dask_array(v):
                v = v if v.chunks == own else v.rechunk(own)
            else:
                v = da.from_array(v, chunks=own)
            return v if v.shape == shape else da.broadcast_to(v, shape, chunks=chunks)

        return [fit(v) for v in values]

    @staticmethod
    def _dask_aligned(values: tuple[Any, ...]) -> list[Any]:
        """The operands as dask aligns them itself, for chunk sizes it does not know.

        No chunks can be given explicitly along an axis of unknown length, so
        the operands are lined up by dask's ``unify_chunks``, as
        ``np.cbrt(x)`` through ``__array_ufunc__`` lines them up (``map_blocks``
        itself does not): operands with the same unknown chunks, scalars,
        arrays of length 1 along the unknown axes, and known axes rechunked
        to a common chunking. Their shapes are checked first with dask's
        ``broadcast_shapes``, which knows ``nan``; the blocks' lengths when
        they arrive (:func:`_same_lengths`).
        """
        import dask.array as da
        from dask.array.core import broadcast_shapes

        shapes = [np.shape(v) for v in values if np.ndim(v) > 0]
        try:
            broadcast_shapes(*shapes)
        except ValueError:
            raise ValueError(
                "cbrtgrad: operands could not be broadcast together with shapes "
                + ", ".join(str(s) for s in shapes)
                + " (nan: a chunk size dask does not know; compute_chunk_sizes() finds them)"
            ) from None

        def fit(v: Any) -> Any:
            if np.ndim(v) == 0 or is_dask_array(v):
                return v
            # A broadcast numpy view cut down to its data, as in _broadcast:
            # its length-1 axes are broadcast by dask.
            cut = v[tuple(slice(0, 1) if st == 0 else slice(None) for st in v.strides)]
            return da.from_array(np.ascontiguousarray(cut), chunks=-1)

        fitted = [fit(v) for v in values]
        # Indices from the last axis, as numpy broadcasts (and map_blocks names them).
        pairs = [(v, tuple(range(v.ndim))[::-1]) if is_dask_array(v) else (v, None) for v in fitted]
        _, aligned = da.unify_chunks(*(item for pair in pairs for item in pair))
        return list(aligned)

    def _extras(
        self, where: Any, out: Any, operands: tuple[Any, ...], compute: np.dtype
    ) -> tuple[list[Any], Any]:
        """The arrays ``where``/``out`` add to a task, and the dask ``out`` (or None).

        ``out`` is checked as the api checks it (:func:`cbrtgrad.arrays.ufunc_args.check_out`),
        for callers of this class's methods themselves.
        """
        extra: list[Any] = []
        if where is not True:
            extra.append(self._lazy(where, "where"))
        if out is not None:
            out = check_out(out, operands, compute, where)
            extra.append(out)
        return extra, out

    def _map(
        self,
        func: Any,
        values: list[Any],
        compute: np.dtype,
        out: Any,
        masked: bool,
        token: str,
        lead: int = 0,
    ) -> Any:
        import dask.array as da

        unknown = any(_unknown_shape(v) for v in values)
        values = self._broadcast(*values, lead=lead)
        ndim = max(np.ndim(v) for v in values)
        # ``dtype`` is also map_blocks' own keyword: the compute dtype reaches
        # the block function bound in a partial (which pickles by reference).
        block = functools.partial(func, dtype=compute, where=masked, out=out is not None)
        if unknown:
            block = functools.partial(
                _same_lengths, block, tuple(_length_one_axes(v) for v in values)
            )
        result = da.map_blocks(
            block,
            *values,
            dtype=compute,
            meta=_meta(values, ndim, compute),
            token=token,
            backend=self.inner,
        )
        if out is None:
            return result
        from dask.array.core import handle_out

        return handle_out(out, result)

    # -- the protocol ---------------------------------------------------------

    def run(self, op: KernelOp, inputs: tuple[Any, ...], out: Any, where: Any, dtype: Any) -> Any:
        """An elementary op as one task per chunk, each the inner backend's method of the op.

        Parameters
        ----------
        op : KernelOp
            The op (an entry of ``cbrtgrad/kernels/kernel_ops.py``).
        inputs : tuple
            Dask arrays, numpy arrays or scalars; the chunks follow the last.
        out, where, dtype
            As for :meth:`cube_root`.

        Returns
        -------
        dask.array.Array
        """
        compute = _dtypes.compute_dtype_of(*inputs, argument=op.argument, dtype=dtype)
        extra, out = self._extras(where, out, inputs, compute)
        values = [self._lazy(v, name) for v, name in zip(inputs, op.inputs, strict=True)]
        block = functools.partial(_op_block, op=op.name)
        masked = where is not True
        return self._map(block, [*values, *extra], compute, out, masked, op.function, op.arity - 1)

    def cube_root_and_grad(
        self, x: Any, g: Any, out: Any = None, *, dtype: Any = None
    ) -> tuple[Any, Any]:
        import dask.array as da

        if out is not None:
            raise TypeError(
                "cbrtgrad: cbrt_and_grad on dask arrays does not take out= (dask writes "
                "nothing until computed)"
            )
        compute = _dtypes.compute_dtype_of(x, g, argument="x, g", dtype=dtype)
        values = (self._lazy(x, "x"), self._lazy(g, "g"))
        unknown = any(_unknown_shape(v) for v in values)
        xs, gs = self._broadcast(*values)
        block: Any = functools.partial(_fused_block, dtype=compute)
        if unknown:
            # A scalar x is passed to every task as it is (no full_like of
            # an unknown shape); the blocks' lengths are checked there.
            block = functools.partial(
                _same_lengths, block, (_length_one_axes(xs), _length_one_axes(gs))
            )
        elif not is_dask_array(xs):
            # A scalar x against a dask g: the chunks come from g.
            xs = da.full_like(gs, xs, dtype=compute)
        meta = _meta((xs, gs), max(np.ndim(xs), np.ndim(gs)), compute)
        # NOTE: the blocks of ``pair`` are (y, dx) tuples, not arrays: it is
        # never returned, only taken apart. Slicing a stacked (2, ...) block
        # instead would copy each half (dask copies a slice of at most half
        # its chunk), two more passes over memory.
        pair = da.map_blocks(
            block,
            xs,
            gs,
            dtype=compute,
            meta=meta,
            token="cbrt_and_grad",
            backend=self.inner,
        )
        y = pair.map_blocks(operator.getitem, 0, dtype=compute, meta=meta, token="cbrt_and_grad_y")
        dx = pair.map_blocks(
            operator.getitem, 1, dtype=compute, meta=meta, token="cbrt_and_grad_dx"
        )
        # Two lazy arrays over the one task per chunk that computes both.
        return y, dx


def _meta(values: Any, ndim: int, compute: np.dtype) -> Any:
    """An empty array of the results' kind: the chunks' library (CuPy chunks give CuPy
    results, which dask must concatenate with CuPy, not numpy), else numpy."""
    for value in values:
        meta = getattr(value, "_meta", None) if is_dask_array(value) else None
        if meta is not None and is_device_array(meta):
            shape = (0,) * ndim
            if library_of(meta) == NUMBA:  # numba has no array API namespace
                from numba import cuda

                return cuda.device_array(shape, compute)
            xp = namespace(meta)
            return xp.zeros(shape, dtype=library_dtype(xp, compute), device=device(meta))
    return np.empty((0,) * ndim, compute)
