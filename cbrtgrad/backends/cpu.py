"""The ``cpu`` backend: cbrtgrad's own single-thread numba ufuncs."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _dtypes
from .._array_kinds import is_device_array
from .._ufunc_args import fused_overlap
from ..kernels import SERIAL_BLOCK
from ._layout import call_ufunc, fused_outputs, into_other_dtype, written_back
from ._protocol import Availability


def _kernels() -> Any:
    # The kernel module on first use: it imports numba, which ``import
    # cbrtgrad`` never does (the api holds this backend from its import).
    from ..kernels import cpu

    return cpu


class CpuBackend:
    """Single-thread numpy ufuncs around cbrtgrad's numba block loops (correctly rounded)."""

    name = "cpu"

    def __init__(self) -> None:
        #: ``{dtype: ufunc}`` once a call has compiled or loaded them.
        #: NOTE: hot path: the api's and the engine's small calls look the
        #: dtype up here instead of calling into the kernel module each time.
        self.forward: dict[Any, np.ufunc] = {}
        self.gradient: dict[Any, np.ufunc] = {}

    def ufunc(self, kernel: str, dtype: np.dtype) -> np.ufunc:
        """The numpy ufunc of ``kernel`` (``cube_root``, ``cube_root_grad``) for ``dtype``.

        The api hands its host calls on this backend to it: numpy's ufunc
        machinery does ``out=``, broadcasting, casting, overlap and
        ``__array_ufunc__`` overrides (the inner loops take the overlaps numpy
        leaves them, kernels/ufunc_loops.py).

        Examples
        --------
        >>> CpuBackend().ufunc("cube_root", np.dtype(np.float64))(np.array([-8.0]))
        array([-2.])
        """
        kept = self.forward if kernel == "cube_root" else self.gradient
        found = kept.get(dtype)
        if found is None:
            found = kept[dtype] = _kernels().ufunc(kernel, dtype)
        return found

    def availability(self) -> Availability:
        return Availability(True, "numba CPU target")

    def accepts(self, x: Any) -> bool:
        return not is_device_array(x)

    def cube_root(self, x: Any, out: Any = None, *, where: Any = True, dtype: Any = None) -> Any:
        # NOTE: x is in the compute dtype (the api cast it) unless dtype= says
        # otherwise; only that dtype's loop is compiled or loaded.
        if where is True and (dtype is None or dtype is x.dtype or dtype == x.dtype):
            # NOTE: hot path (every engine forward and api call): the ufunc
            # writes any out= itself.
            forward = self.forward.get(x.dtype)
            if forward is None:
                forward = self.ufunc("cube_root", x.dtype)
            if out is None:
                return forward(x)
            if out.dtype != x.dtype:  # NOTE: never a cast of out's old content (_layout)
                return into_other_dtype(forward, (x,), out, x.dtype)
            return forward(x, out)
        compute = _dtypes.compute_dtype_of(x, dtype=dtype)
        return call_ufunc(self.ufunc("cube_root", compute), x, out=out, where=where, dtype=compute)

    def cube_root_grad(
        self, g: Any, y: Any, out: Any = None, *, where: Any = True, dtype: Any = None
    ) -> Any:
        if where is True and (dtype is None or dtype == y.dtype == g.dtype):
            # NOTE: hot path (every engine backward and api call). A broadcast g (the
            # gradient of a sum) reaches the loop with stride 0 and is read
            # from a buffer of its value there.
            gradient = self.gradient.get(y.dtype)
            if gradient is None:
                gradient = self.ufunc("cube_root_grad", y.dtype)
            if out is None:
                return gradient(g, y)
            if out.dtype != y.dtype:
                return into_other_dtype(gradient, (g, y), out, y.dtype)
            return gradient(g, y, out)
        compute = _dtypes.compute_dtype_of(g, y, argument="g, y", dtype=dtype)
        gradient = self.ufunc("cube_root_grad", compute)
        return call_ufunc(gradient, g, y, out=out, where=where, dtype=compute)

    def cube_root_and_grad(
        self, x: Any, g: Any, out: Any = None, *, dtype: Any = None
    ) -> tuple[Any, Any]:
        if (
            out is None
            and type(x) is np.ndarray
            and type(g) is np.ndarray
            and x.dtype is g.dtype
            and _dtypes.native(x.dtype) is not None
            and (dtype is None or dtype is x.dtype)
            and x.shape == g.shape
            and 0 < x.ndim
            and x.size <= SERIAL_BLOCK
        ):
            # NOTE: hot path (small calls): one block of the fused kernel is
            # its two ufuncs (fused_blocks), and numpy's machinery takes the
            # arrays as they are, any strides: the same bits without the
            # layout work below. (A 0-d pair stays arrays, as below: a ufunc
            # would return scalars.)
            y = self.ufunc("cube_root", x.dtype)(x)
            return y, self.ufunc("cube_root_grad", x.dtype)(g, y)
        x, g, y, dx, flat = fused_outputs(x, g, out, dtype)
        if out is not None and fused_overlap(x, g, y, dx):
            return written_back(self.cube_root_and_grad(x, g, dtype=y.dtype), y, dx)
        ufuncs = _kernels().CpuUfuncs(
            self.ufunc("cube_root", y.dtype), self.ufunc("cube_root_grad", y.dtype)
        )
        if flat is None:
            # Layouts that cannot be flattened without a copy: two ufunc passes.
            ufuncs.cube_root(x, out=y)
            ufuncs.cube_root_grad(g, y, out=dx)
        else:
            _kernels().fused_blocks(ufuncs, *flat)
        return y, dx
