"""The ``cpu`` backend: cbrtgrad's own single-thread numba ufuncs."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..arrays import dtypes as _dtypes
from ..arrays.dtypes import _NATIVE
from ..arrays.kinds import is_device_array
from ..arrays.ufunc_args import check_out, fused_overlap, ready_pair
from ..kernels import SERIAL_BLOCK
from ..kernels.kernel_ops import (
    CUBE_ROOT,
    CUBE_ROOT_GRAD,
    DTYPES,
    ELEMENTARY,
    KernelOp,
    elementary_op,
)
from ._layout import call_ufunc, fused_outputs, into_other_dtype, written_back
from ._protocol import Availability, ElementwiseOps


def _kernels() -> Any:
    # The kernel module on first use: it imports numba, which ``import
    # cbrtgrad`` never does (the api holds this backend from its import).
    from ..kernels.cpu import catalog as cpu

    return cpu


def _build_public_ufunc(op: KernelOp) -> np.ufunc:
    # Made here from the kernel module's inner loops (compiled or loaded once
    # per process, shared with the one-dtype ufuncs), so that the kernel
    # modules, which are the kernel cache's key, stay as they are.
    from ..kernels.cpu import lazy, ufunc_loops, ufuncs

    def build() -> np.ufunc:
        loops = {np.dtype(dt): ufuncs._inner_loop(op.name, dt) for dt in DTYPES}
        doc = f"{op.summary} Correctly rounded; see cbrtgrad.ufunc."
        return ufunc_loops.ufunc_from_loops(op.function, doc, op.arity, loops)

    return lazy.once(f"public.{op.name}", build)  # type: ignore[no-any-return]


class CpuBackend(ElementwiseOps):
    """Single-thread numpy ufuncs around cbrtgrad's numba block loops (correctly rounded)."""

    name = "cpu"

    def __init__(self) -> None:
        #: ``{op name: {dtype: ufunc}}`` once a call has compiled or loaded them,
        #: one dict per elementary op (kernels/kernel_ops.py).
        self.kept: dict[str, dict[Any, np.ufunc]] = {op.name: {} for op in ELEMENTARY}
        #: NOTE: hot path: the api's and the engine's small calls look the
        #: dtype up here instead of calling into the kernel module each time.
        self.forward = self.kept[CUBE_ROOT.name]
        self.gradient = self.kept[CUBE_ROOT_GRAD.name]
        #: ``{op name: ufunc}``: :meth:`public_ufunc`'s, built on first use.
        self.public: dict[str, np.ufunc] = {}

    def ufunc(self, kernel: str, dtype: np.dtype) -> np.ufunc:
        """The numpy ufunc of ``kernel`` (``cube_root``, ``cube_root_grad``) for ``dtype``.

        The api hands its host calls on this backend to it: numpy's ufunc
        machinery does ``out=``, broadcasting, casting, overlap and
        ``__array_ufunc__`` overrides (the inner loops take the overlaps numpy
        leaves them, kernels/cpu/ufunc_loops.py).

        Examples
        --------
        >>> CpuBackend().ufunc("cube_root", np.dtype(np.float64))(np.array([-8.0]))
        array([-2.])
        """
        kept = self.kept.get(kernel)
        if kept is None:
            kept = self.kept[elementary_op(kernel).name]  # raises for any other name
        found = kept.get(dtype)
        if found is None:
            found = kept[dtype] = _kernels().ufunc(kernel, dtype)
        return found

    def public_ufunc(self, kernel: str) -> np.ufunc:
        """The public ufunc of ``kernel``: named after its function, with a loop per dtype.

        ``cbrtgrad.ufunc.cbrt`` and ``cbrtgrad.ufunc.cbrt_grad``, and what the
        api hands a container that takes numpy ufuncs (``__array_ufunc__``).
        One ufunc with the float32 and the float64 loops (``f->f``, ``d->d``;
        ``ff->f``, ``dd->d``), the same inner loops as :meth:`ufunc`'s, so that
        numpy's own loop selection and casts take any dtype a container holds;
        named ``cbrt`` and ``cbrt_grad`` because libraries that take ufuncs by
        name (pint) know ``np.cbrt``'s name and not the kernel's.

        Examples
        --------
        >>> f = CpuBackend().public_ufunc("cube_root")
        >>> f.__name__, f.types, f(np.array([-8.0], np.float32))
        ('cbrt', ['f->f', 'd->d'], array([-2.], dtype=float32))
        """
        op = elementary_op(kernel)
        found = self.public.get(op.name)
        if found is None:
            found = self.public.setdefault(op.name, _build_public_ufunc(op))
        return found

    def availability(self) -> Availability:
        return Availability(True, "numba CPU target")

    def accepts(self, x: Any) -> bool:
        return not is_device_array(x)

    def run(self, op: KernelOp, inputs: tuple[Any, ...], out: Any, where: Any, dtype: Any) -> Any:
        """An elementary op by its ufunc, on numpy's ufunc machinery.

        NOTE: the api and the engine give inputs in the compute dtype; only
        that dtype's loop is compiled or loaded. Any other inputs (a direct
        call with a list, integers, half precision or mixed precision) take
        the general route and the one dtype rule (``compute_dtype_of``), as on
        every backend, never a ufunc loop's own casts.
        """
        dt = getattr(inputs[-1], "dtype", None)
        if (
            where is True
            and dt in _NATIVE
            and (out is None or type(out) is np.ndarray)
            and (dtype is None or dtype == dt)
            and all(getattr(a, "dtype", None) == dt for a in inputs[:-1])
        ):
            # The plain call (the engine's, the api's on this backend): the
            # ufunc writes any out= itself. A broadcast g (the gradient of a
            # sum) reaches the loop with stride 0 and is read from a buffer
            # of its value there.
            ufunc = self.kept[op.name].get(dt) or self.ufunc(op.name, dt)
            if out is None:
                return ufunc(*inputs)
            if out.dtype != dt:  # NOTE: never a cast of out's old content (_layout)
                return into_other_dtype(ufunc, inputs, out, dt)
            return ufunc(*inputs, out)
        compute = _dtypes.compute_dtype_of(*inputs, argument=op.argument, dtype=dtype)
        out = check_out(out, inputs, compute, where)  # a direct call's, with cbrtgrad's words
        ufunc = self.ufunc(op.name, compute)
        return call_ufunc(ufunc, *inputs, out=out, where=where, dtype=compute)

    def cube_root_and_grad(
        self, x: Any, g: Any, out: Any = None, *, dtype: Any = None
    ) -> tuple[Any, Any]:
        if (
            type(x) is np.ndarray
            and type(g) is np.ndarray
            and x.dtype is g.dtype
            and _dtypes.native(x.dtype) is not None
            and (dtype is None or dtype is x.dtype)
            and x.shape == g.shape
            and 0 < x.ndim
            and x.size <= SERIAL_BLOCK
            and (out is None or ready_pair(out, g, x.dtype, x.shape))
        ):
            # NOTE: hot path (small calls): one block of the fused kernel is
            # its two ufuncs (fused_blocks), and numpy's machinery takes the
            # arrays as they are, any strides: the same bits without the
            # layout work below, which costs several times the two calls
            # (docs/performance.md). (A 0-d pair stays arrays, as below: a ufunc would
            # return scalars.)
            y_out, dx_out = (None, None) if out is None else out
            y = self.ufunc("cube_root", x.dtype)(x, y_out)
            return y, self.ufunc("cube_root_grad", x.dtype)(g, y, dx_out)
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
