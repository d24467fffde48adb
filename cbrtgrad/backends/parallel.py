"""The ``parallel`` backend: the cpu formulas in multi-threaded ``prange`` loops.

Same scalar formula as the ``cpu`` backend, so the same bits; the work is split
over numba's threads (``NUMBA_NUM_THREADS``, ``numba.set_num_threads``).
Worth it from about 10^6 elements, where the automatic choice starts using it
(``CBRTGRAD_PARALLEL_MIN``); below that, thread start-up costs more than it
saves.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ..arrays import dtypes as _dtypes
from ..arrays.kinds import is_device_array
from ..arrays.ufunc_args import check_out, fused_overlap
from ..kernels.cpu import catalog as cpu_kernels
from ..kernels.cpu import fpstatus
from ..kernels.cpu import reduce as reduce_kernels
from ..kernels.kernel_ops import CUBE_ROOT_GRAD, KernelOp
from ._layout import apply_elementwise, constant_operand, fused_outputs
from ._protocol import SUM_MIN_SIZE, Availability, ElementwiseOps


class _Run:
    """A parallel loop run under the backend's lock, keeping the IEEE flags it returns."""

    __slots__ = ("lock", "kernel", "status")

    def __init__(self, lock: Any, kernel: Any) -> None:
        self.lock = lock
        self.kernel = kernel
        self.status = 0

    def __call__(self, *arrays: Any) -> None:
        with self.lock:
            self.status |= int(self.kernel(*arrays))


class ParallelBackend(ElementwiseOps):
    """numba ``parallel=True`` loops over blocks of the vectorised cpu loops.

    The loops run on numba's threads, whose IEEE flags numpy never sees:
    they return them, and the backend signals them as numpy would
    (:mod:`cbrtgrad.kernels.cpu.fpstatus`), so ``np.errstate`` applies as on the
    ``cpu`` backend.

    NOTE: numba's ``workqueue`` threading layer is not thread-safe, and two
    parallel kernels running at once (e.g. from dask's worker threads)
    oversubscribe the cores anyway, so calls into the parallel kernels are
    serialised by a lock held by this backend instance.

    Examples
    --------
    >>> import numpy as np
    >>> ParallelBackend().cube_root(np.array([[-8.0, 27.0]]))
    array([[-2.,  3.]])
    """

    name = "parallel"

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def availability(self) -> Availability:
        import numba

        return Availability(True, f"numba prange loops on {numba.get_num_threads()} threads")

    def accepts(self, x: Any) -> bool:
        return not is_device_array(x)

    def _locked(self, kernel: Any) -> _Run:
        return _Run(self._lock, kernel)

    def run(self, op: KernelOp, inputs: tuple[Any, ...], out: Any, where: Any, dtype: Any) -> Any:
        """An elementary op by its entry's first ``prange`` loop; its IEEE flags signalled."""
        compute = _dtypes.compute_dtype_of(*inputs, argument=op.argument, dtype=dtype)
        out = check_out(out, inputs, compute, where)  # a direct call's, with cbrtgrad's words
        kernel = self._locked(cpu_kernels.parallel_loops().loop(op.parallel_loops[0]))
        result = apply_elementwise(kernel, inputs, compute, out, where)
        fpstatus.signal(kernel.status, op.name)  # after out= is written, as numpy
        return result

    def cube_root_grad(
        self, g: Any, y: Any, out: Any = None, *, where: Any = True, dtype: Any = None
    ) -> Any:
        constant = constant_operand(g, y, out, where, dtype)
        if constant is not None:
            # One g for every y (the gradient of a sum): its own loop, which
            # never makes g an array.
            dx = np.empty_like(y) if out is None else out
            kernel = self._locked(cpu_kernels.parallel_loops().grad_constant)
            kernel(constant, y.reshape(-1), dx.reshape(-1))
            fpstatus.signal(kernel.status, CUBE_ROOT_GRAD.name)
            return dx
        return self.run(CUBE_ROOT_GRAD, (g, y), out, where, dtype)

    def cube_root_and_grad(
        self, x: Any, g: Any, out: Any = None, *, dtype: Any = None
    ) -> tuple[Any, Any]:
        x, g, y, dx, flat = fused_outputs(x, g, out, dtype)
        # NOTE: read-only inputs do not match the kernels' writable signatures,
        # unaligned arrays (inputs or out=) must never reach a numba loop
        # (prange_loops.check_behaved), and overlaps beyond the in-place ones
        # need the copies below.
        if flat is not None and not (
            all(a.flags.behaved for a in flat) and not fused_overlap(*flat)
        ):
            flat = None
        kernel = self._locked(cpu_kernels.parallel_loops().fused)
        if flat is None:
            xc = np.array(x, order="C")
            gc = np.array(g, order="C")
            yc = np.empty(x.shape, x.dtype)
            dxc = np.empty(x.shape, x.dtype)
            if xc.size:
                kernel(xc.reshape(-1), gc.reshape(-1), yc.reshape(-1), dxc.reshape(-1))
            np.copyto(y, yc)
            np.copyto(dx, dxc)
        elif flat[0].size:
            kernel(*flat)
        # The forward raises no flag on its own (but for a signaling nan), so
        # the pair's flags are the gradient's, as the cpu backend names them.
        fpstatus.signal(kernel.status, CUBE_ROOT_GRAD.name)
        return y, dx

    def sum(self, a: Any, axis: Any = None, keepdims: Any = False) -> Any:
        """Sum over ``axis``, as ``np.add.reduce``; large float32 sums on all threads.

        The graph engine's ``sum`` op calls this when the backend has it. A
        full sum of a C-contiguous, aligned, writable float32 array of at least
        ``SUM_MIN_SIZE`` elements is accumulated in float64 over numba's
        threads (:func:`cbrtgrad.kernels.cpu.reduce.sum_float32`), which is more
        accurate than numpy's float32 pairwise sum and rounds once; every
        other case is ``np.add.reduce`` itself.

        Parameters
        ----------
        a : numpy.ndarray
            The array to sum.
        axis : None or tuple of int
            Axes to sum over (all by default).
        keepdims : bool
            Keep the summed axes with length one.

        Returns
        -------
        numpy scalar or numpy.ndarray

        Examples
        --------
        >>> import numpy as np
        >>> ParallelBackend().sum(np.full((1000, 100), 0.1, np.float32))
        np.float32(10000.0)
        """
        if (
            type(a) is np.ndarray
            and a.dtype == np.float32
            and a.size >= SUM_MIN_SIZE
            and a.flags.c_contiguous
            # Aligned and writable, as every array a numba loop takes
            # (prange_loops.check_behaved); float32 above is native byte order.
            and a.flags.behaved
            and (axis is None or len(axis) == a.ndim)  # normalised: no repeats
        ):
            with self._lock:
                total = reduce_kernels.sum_float32(a.reshape(-1))
            return np.full((1,) * a.ndim, total) if keepdims else total
        return np.add.reduce(a, axis=axis, keepdims=keepdims)
