"""The ``cuda`` backend: cbrtgrad's formulas as CUDA kernels (numba-cuda).

Inputs are CuPy arrays, PyTorch CUDA tensors, numba device arrays or anything
with ``__cuda_array_interface__``, read in place. Results are arrays of the
input's own library (CuPy in, CuPy out; PyTorch in, PyTorch out; numba, or
any other interface, in, numba out), allocated by that library and computed
on its current stream, or on ``stream=``; on a GPU asynchronously, as the
library's own kernels are. Every result can be passed back in. Host arrays
are an error unless the caller asks for the copies with ``copy_host=True``.

Device arrays must be C-contiguous and, for the gradient and the fused
kernel, of equal shapes, but for a ``g`` of one element (a device array of
size 1, or a host scalar such as ``1.0``, as CuPy takes one beside its
arrays), which is broadcast; ``where=`` must be ``True``. Under
``NUMBA_ENABLE_CUDASIM=1`` the same kernels run in numba's simulator, which
is how CI runs them; CI also compiles them to PTX and SASS for sm_90
(tests/backends/test_cuda_ptx.py), and tools/gpu_check.py runs them on a
real GPU.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

from ..arrays import dtypes as _dtypes
from ..arrays.kinds import is_device_array
from ..arrays.ufunc_args import exact_out, fused_pair
from ..kernels.cuda.primitives import simulating  # no numba.cuda: numpy and the stdlib
from ..kernels.kernel_ops import KernelOp
from . import _device_arrays as arrays
from ._cuda_probe import probe
from ._protocol import Availability, ElementwiseOps

_HOST_HINT = (
    "the cuda backend takes device arrays (CuPy, PyTorch CUDA tensors, numba device arrays "
    "or objects with __cuda_array_interface__); copy host arrays explicitly, e.g. "
    "cupy.asarray(x), or pass copy_host=True to the backend's methods"
)


class CudaBackend(ElementwiseOps):
    """Tiled CUDA kernels calling the shared scalar formula.

    Examples
    --------
    >>> CudaBackend().name
    'cuda'
    """

    name = "cuda"
    accepts_hint = _HOST_HINT

    def __init__(self) -> None:
        # Per device id: the grid limit (read once per device, not module state).
        self._grid_limits: dict[int, int] = {}
        # Per stream handle: (cuda.core stream for launches, numba stream for
        # numba's allocations and copies), made once per stream.
        self._streams: dict[int, tuple[Any, Any]] = {}
        # Per (kernel name, compute dtype, input dtypes, device, one g): its plan (see
        # _plan); per grid size: its launch configuration (NOTE: hot path, see
        # _launch).
        self._plans: dict[tuple[Any, ...], Any] = {}
        self._configs: dict[tuple[int, int], Any] = {}
        # Once available, always: a process cannot lose its driver or its GPU,
        # and the probe costs tens of microseconds on every call otherwise.
        self._available: Availability | None = None
        self._thread = threading.local()

    def availability(self) -> Availability:
        if self._available is not None:
            return self._available
        status = self._probe()
        if status.available:
            self._available = status
        return status

    def _probe(self) -> Availability:
        return probe()

    def accepts(self, x: Any) -> bool:
        return is_device_array(x)

    # -- plumbing -------------------------------------------------------------

    def _streams_for(self, handle: int) -> tuple[Any, Any]:
        found = self._streams.get(handle)
        if found is None:
            from cuda.core import Stream
            from numba import cuda

            numba_stream = cuda.external_stream(handle) if handle else 0
            found = (Stream.from_handle(handle), numba_stream)
            if len(self._streams) > 64:  # streams come and go: keep a few
                self._streams.clear()
            self._streams[handle] = found
        return found

    def _operand(self, value: Any, name: str, copy_host: bool, numba_stream: Any) -> Any:
        if not is_device_array(value):
            if not copy_host:
                raise TypeError(f"cbrtgrad: {name} is a host {type(value).__name__}; {_HOST_HINT}")
            from numba import cuda

            host = np.array(value, order="C", copy=None)  # keeps 0-d as 0-d
            _dtypes.compute_dtype(host.dtype, name)
            value = cuda.to_device(host, stream=numba_stream)
        return arrays.read(value, name, simulating())

    def _stream(self, stream: Any, first: Any) -> tuple[int, Any, Any]:
        """``(handle, cuda.core stream, numba stream)`` to run on."""
        if simulating():  # the simulator's streams are synchronous stand-ins
            return 0, None, 0 if stream is None else stream
        if stream is None:
            handle = 0 if first is None else arrays.current_stream(first.library, first.device)
        else:
            handle = arrays.stream_handle(stream)
        core, numba_stream = self._streams_for(handle)
        if type(stream).__module__.startswith("numba"):
            numba_stream = stream  # the caller's own numba stream object
        return handle, core, numba_stream

    def _output(
        self, out: Any, name: str, like: Any, dtype: np.dtype, numba_stream: Any
    ) -> tuple[Any, Any, Any]:
        """``(result to return, its operand, host array to copy into or None)``."""
        if out is None:
            result, operand = arrays.empty_operand(like, dtype, numba_stream, simulating())
            return result, operand, None
        if isinstance(out, np.ndarray):
            # A host out= is only reachable with copy_host=True (checked by caller).
            exact_out(name, out, like.shape, dtype)
            from numba import cuda

            result = cuda.device_array(like.shape, dtype, stream=numba_stream)
            return result, arrays.read(result, name, simulating()), out
        if not is_device_array(out):
            raise TypeError(f"cbrtgrad: {name} must be a device array, got {type(out).__name__}")
        operand = arrays.read(out, name, simulating())
        exact_out(name, operand, like.shape, dtype)
        return out, operand, None

    def _launch(
        self,
        name: str,
        dtype: np.dtype,
        operands: list[Any],
        n_inputs: int,
        streams: Any,
        scalar_g: bool = False,
    ) -> None:
        n = operands[-1].size  # an output's: every element computed (g may be one)
        if n == 0:
            return
        first = operands[0]
        inputs = (first.dtype,) if n_inputs == 1 else (first.dtype, operands[1].dtype)
        _, core_stream, numba_stream = streams
        if core_stream is None:  # the simulator (see _stream)
            self._simulate(name, dtype, inputs, operands, n, numba_stream, scalar_g)
            return
        # NOTE: hot path (every GPU call): one dict lookup for what the
        # arguments' kinds decide (kernel, shape, grid limit), made once by
        # _plan; no import, device query or dtype.name here (the H200 profile
        # of one call in docs/generated/gpu_check_h200.txt).
        device = first.device
        for operand in operands:
            if operand.device != device:
                where = ", ".join(f"GPU {o.device}" for o in operands)
                raise ValueError(
                    f"cbrtgrad: the arrays of one call must be on one GPU, got {where}"
                )
        plan = self._plans.get((name, dtype, inputs, device, scalar_g))
        if plan is None:
            plan = self._plan(name, dtype, inputs, device, scalar_g)
        tile, threads, kernel, limit, launch = plan
        blocks = max(1, min(-(-n // tile), limit))  # kernels.launch_config, inlined
        config = self._configs.get((blocks, threads))
        if config is None:
            config = self._config(blocks, threads)
        if not getattr(self._thread, "has_context", False):
            # A thread's first launch: numba-cuda's context made current on it
            # (on the default stream a launch runs in the current context).
            from numba import cuda

            cuda.current_context()
            self._thread.has_context = True
        launch(core_stream, config, kernel, *[o.pointer for o in operands], ctypes.c_int64(n))

    def _plan(
        self, name: str, dtype: np.dtype, inputs: tuple[Any, ...], device: int, scalar_g: bool
    ) -> Any:
        """``(tile, threads, cuda.core kernel, grid limit, launch)`` for these kinds, made once.

        A tile is the elements one block takes (threads times elements per
        thread); the grid limit is the device's (``MAX_GRID_DIM_X``).
        """
        from cuda.core import launch
        from numba import cuda

        from ..kernels.cuda import elementwise as kernels

        current = cuda.get_current_device()
        if current.id != device:
            raise ValueError(
                f"cbrtgrad: the arrays are on GPU {device}, but numba-cuda's current "
                f"device is GPU {current.id}; select it with numba.cuda.select_device"
            )
        limit = self._grid_limits.get(device)
        if limit is None:
            limit = self._grid_limits[device] = kernels.max_grid(current)
        dispatcher = kernels.kernel(name, dtype, inputs, scalar_g=scalar_g)
        # The one compiled signature's cuda.core kernel on this device (numba-
        # cuda's own launch would look it up, type each argument and build a
        # launch configuration on every call).
        (compiled,) = dispatcher.overloads.values()
        kernel = compiled.library.get_cufunc().kernel
        threads = kernels.threads_per_block()  # what the kernel is compiled for
        plan = (threads * kernels.shape_of(name, dtype)[0], threads, kernel, limit, launch)
        self._plans[(name, dtype, inputs, device, scalar_g)] = plan
        return plan

    def _config(self, blocks: int, threads: int) -> Any:
        from cuda.core import LaunchConfig

        if len(self._configs) > 256:  # one per array size in use: keep a few
            self._configs.clear()
        config = LaunchConfig(grid=(blocks, 1, 1), block=(threads, 1, 1))
        self._configs[(blocks, threads)] = config
        return config

    @staticmethod
    def _simulate(
        name: str,
        dtype: np.dtype,
        inputs: tuple[Any, ...],
        operands: list[Any],
        n: int,
        numba_stream: Any,
        scalar_g: bool,
    ) -> None:
        """The kernel in numba's simulator, on its flat arrays."""
        from ..kernels.cuda import elementwise as kernels

        dispatcher = kernels.kernel(name, dtype, inputs, scalar_g=scalar_g)
        blocks, threads = kernels.launch_config(
            n,
            kernels.threads_per_block(),
            kernels.SIMULATOR_MAX_GRID,
            kernels.shape_of(name, dtype)[0],
        )
        # float16 is read as its bits, as on a GPU (kernels.load_dtype).
        flat = [o.array.view(kernels.load_dtype(o.dtype)) for o in operands]
        dispatcher[blocks, threads, numba_stream](*flat, n)

    @staticmethod
    def _finish(result: Any, host: Any, copy_host: bool, numba_stream: Any) -> Any:
        if not copy_host:
            return result
        if host is None:
            host = result.copy_to_host(stream=numba_stream)
        else:
            result.copy_to_host(host, stream=numba_stream)
        if numba_stream:
            numba_stream.synchronize()
        return host[()] if host.ndim == 0 else host

    @staticmethod
    def _check_where(where: Any) -> None:
        if where is not True:
            raise ValueError("cbrtgrad: the cuda backend supports only where=True")

    @staticmethod
    def _check_out_kind(out: Any, copy_host: bool) -> None:
        if isinstance(out, np.ndarray) and not copy_host:
            raise TypeError(f"cbrtgrad: out is a host ndarray; {_HOST_HINT}")

    def _prepare(
        self,
        values: tuple[Any, ...],
        names: tuple[str, ...],
        copy_host: bool,
        stream: Any,
        scalar_dtype: np.dtype | None = None,
    ) -> tuple[list[Any], Any, bool]:
        """The inputs as operands, the streams to run on, and whether ``g`` is one element.

        Every input has one shape, but ``g`` where ``scalar_dtype`` is given
        (the gradient and fused kernels): it may be one element, broadcast as
        numpy broadcasts it: a device array of size 1 and no more dimensions
        than the other input, or a host scalar (Python or numpy, or a 0-d
        array), made a one-element array of the other input's library in
        ``scalar_dtype``.
        """
        # Where g is (the gradient's inputs: -1 for the forward), and the
        # input whose shape is the call's.
        g_at = names.index("g") if scalar_dtype is not None else -1
        full = 1 - g_at if g_at >= 0 else 0
        host_g = (
            g_at >= 0
            and not copy_host
            and np.ndim(values[g_at]) == 0
            and not is_device_array(values[g_at])
        )
        # With copy_host the copies go on the given stream (the default one
        # without): there is no input library to ask.
        streams = self._stream(stream, None) if copy_host else None
        numba_stream = streams[2] if streams is not None else 0
        operands: list[Any] = [
            None if host_g and i == g_at else self._operand(value, name, copy_host, numba_stream)
            for i, (value, name) in enumerate(zip(values, names, strict=True))
        ]
        if streams is None:
            streams = self._stream(stream, operands[full])
        if host_g and scalar_dtype is not None:  # made on the other input's library
            made = arrays.scalar_like(operands[full], values[g_at], scalar_dtype, streams[2])
            operands[g_at] = arrays.read(made, "g", simulating())
        shape = operands[full].shape
        scalar_g = False
        for i, (operand, name) in enumerate(zip(operands, names, strict=True)):
            if operand.shape == shape:
                continue
            if i == g_at and operand.size == 1 and len(operand.shape) <= len(shape):
                scalar_g = True
                continue
            raise ValueError(
                f"cbrtgrad: {names[full]} has shape {shape} and {name} {operand.shape}; "
                "the cuda backend broadcasts only a g of one element"
            )
        return operands, streams, scalar_g

    # -- the protocol ---------------------------------------------------------

    def run(
        self,
        op: KernelOp,
        inputs: tuple[Any, ...],
        out: Any = None,
        where: Any = True,
        dtype: Any = None,
        *,
        stream: Any = None,
        copy_host: bool = False,
    ) -> Any:
        """An elementary op by its kernel on the device; ``stream`` and ``copy_host`` are cuda-only.

        The inputs have one shape, but a ``g`` (an upstream gradient) of one
        element, broadcast (:meth:`_prepare`).
        """
        self._check_where(where)
        self._check_out_kind(out, copy_host)
        # The compute dtype from the values themselves: a Python scalar g is
        # weak (NEP 50), as in the api.
        compute = _dtypes.compute_dtype_of(*inputs, argument=op.argument, dtype=dtype)
        scalar_dtype = compute if "g" in op.inputs else None
        operands, streams, scalar_g = self._prepare(
            inputs, op.inputs, copy_host, stream, scalar_dtype
        )
        result, written, host = self._output(out, "out", operands[-1], compute, streams[2])
        self._launch(op.kernel, compute, [*operands, written], op.arity, streams, scalar_g)
        return self._finish(result, host, copy_host, streams[2])

    def cube_root_and_grad(
        self,
        x: Any,
        g: Any,
        out: Any = None,
        *,
        dtype: Any = None,
        stream: Any = None,
        copy_host: bool = False,
    ) -> tuple[Any, Any]:
        """``(cbrt(x), g / (3 y^2))`` in one kernel; ``out`` a pair or ``None``."""
        y_out, dx_out = fused_pair(out, "device arrays")
        self._check_out_kind(y_out, copy_host)
        self._check_out_kind(dx_out, copy_host)
        compute = _dtypes.compute_dtype_of(x, g, argument="x, g", dtype=dtype)
        (xo, go), streams, scalar_g = self._prepare((x, g), ("x", "g"), copy_host, stream, compute)
        y, yo, y_host = self._output(y_out, "out[y]", xo, compute, streams[2])
        dx, dxo, dx_host = self._output(dx_out, "out[dx]", xo, compute, streams[2])
        self._launch("fused", compute, [xo, go, yo, dxo], 2, streams, scalar_g)
        return (
            self._finish(y, y_host, copy_host, streams[2]),
            self._finish(dx, dx_host, copy_host, streams[2]),
        )
