"""The ``cuda`` backend: cbrtgrad's formulas as CUDA kernels (numba-cuda).

Inputs are numba device arrays or anything with ``__cuda_array_interface__``
(CuPy, PyTorch), used in place; results are numba device arrays left on the
device. Host arrays are an error unless the caller asks for the copies with
``copy_host=True``. Kernels run on the given ``stream`` (default: the default
stream) and, on a GPU, asynchronously.

Device arrays must be C-contiguous and, for the gradient and the fused
kernel, of equal shapes (no broadcasting on the device); ``where=`` must be
``True``. Under ``NUMBA_ENABLE_CUDASIM=1`` the same kernels run in numba's
simulator, which is how CI tests them.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np

from .. import _dtypes
from .._array_kinds import is_device_array
from ._protocol import Availability

_HOST_HINT = (
    "the cuda backend takes device arrays (numba device arrays or objects with "
    "__cuda_array_interface__); copy host arrays explicitly with numba.cuda.to_device(x), "
    "or pass copy_host=True to the backend's methods"
)


class CudaBackend:
    """Grid-stride CUDA kernels calling the shared scalar formula.

    Examples
    --------
    >>> CudaBackend().name
    'cuda'
    """

    name = "cuda"
    accepts_hint = _HOST_HINT

    def __init__(self) -> None:
        # Launch limits per device id, read once per device (not module state).
        self._limits: dict[int, Any] = {}

    def availability(self) -> Availability:
        if importlib.util.find_spec("numba_cuda") is None:
            return Availability(
                False, "the numba-cuda package is not installed (pip install 'cbrtgrad[cuda]')"
            )
        try:
            from numba import cuda

            from ..kernels.cuda_primitives import simulating

            if simulating():
                return Availability(
                    True, "numba CUDA simulator (NUMBA_ENABLE_CUDASIM=1): Python speed, for tests"
                )
            if not cuda.is_available():
                return Availability(False, "no CUDA GPU or driver found by numba-cuda")
            device = cuda.get_current_device()
            name = device.name.decode() if isinstance(device.name, bytes) else device.name
            major, minor = device.compute_capability
            return Availability(True, f"{name} (compute capability {major}.{minor})")
        except Exception as exc:  # the probe never raises: it reports
            return Availability(False, f"numba.cuda failed: {type(exc).__name__}: {exc}")

    def accepts(self, x: Any) -> bool:
        return is_device_array(x)

    # -- plumbing -------------------------------------------------------------

    def _device_input(self, value: Any, name: str, copy_host: bool, stream: Any) -> Any:
        from numba import cuda

        if not is_device_array(value):
            if not copy_host:
                raise TypeError(f"cbrtgrad: {name} is a host {type(value).__name__}; {_HOST_HINT}")
            host = np.array(value, order="C", copy=None)  # keeps 0-d as 0-d
            _dtypes.compute_dtype(host.dtype, name)
            return cuda.to_device(host, stream=stream)
        if not hasattr(value, "copy_to_host"):
            # CuPy, PyTorch, ...: a zero-copy numba view of the same memory.
            value = cuda.as_cuda_array(value)
        _dtypes.compute_dtype(value.dtype, name)
        if not value.is_c_contiguous():
            raise ValueError(
                f"cbrtgrad: {name} must be a C-contiguous device array (got strides "
                f"{value.strides} for shape {value.shape}); copy it to a contiguous one first"
            )
        return value

    def _output(
        self, out: Any, name: str, shape: tuple[int, ...], dtype: np.dtype, stream: Any
    ) -> tuple[Any, Any]:
        """``(device array to compute into, host array to copy into or None)``."""
        from numba import cuda

        if out is None:
            return cuda.device_array(shape, dtype, stream=stream), None
        if isinstance(out, np.ndarray):
            # A host out= is only reachable with copy_host=True (checked by caller).
            if out.shape != shape or out.dtype != dtype:
                raise ValueError(
                    f"cbrtgrad: {name} has shape {out.shape} and dtype {out.dtype}; "
                    f"expected {shape} and {dtype}"
                )
            return cuda.device_array(shape, dtype, stream=stream), out
        if not is_device_array(out):
            raise TypeError(f"cbrtgrad: {name} must be a device array, got {type(out).__name__}")
        if not hasattr(out, "copy_to_host"):
            out = cuda.as_cuda_array(out)
        if tuple(out.shape) != shape:
            raise ValueError(f"cbrtgrad: {name} has shape {tuple(out.shape)}; expected {shape}")
        if np.dtype(out.dtype) != dtype:
            raise TypeError(f"cbrtgrad: {name} has dtype {out.dtype}; expected {dtype}")
        if not out.is_c_contiguous():
            raise ValueError(f"cbrtgrad: {name} must be a C-contiguous device array")
        return out, None

    def _launch(self, kernel: Any, n: int, stream: Any, *arrays: Any) -> None:
        from numba import cuda

        from ..kernels import cuda as cuda_kernels

        if n == 0:
            return
        device = getattr(cuda.get_current_device(), "id", 0)
        limits = self._limits.get(device)
        if limits is None:
            limits = self._limits[device] = cuda_kernels.device_limits()
        blocks, threads = cuda_kernels.launch_config(n, limits)
        flat = [a.reshape(n) for a in arrays]
        kernel[blocks, threads, 0 if stream is None else stream](*flat)

    @staticmethod
    def _finish(result: Any, host: Any, copy_host: bool, stream: Any) -> Any:
        if not copy_host:
            return result
        if host is None:
            host = result.copy_to_host(stream=stream)
        else:
            result.copy_to_host(host, stream=stream)
        if stream is not None:
            stream.synchronize()
        return host[()] if host.ndim == 0 else host

    @staticmethod
    def _check_where(where: Any) -> None:
        if where is not True:
            raise ValueError("cbrtgrad: the cuda backend supports only where=True")

    @staticmethod
    def _check_out_kind(out: Any, copy_host: bool) -> None:
        if isinstance(out, np.ndarray) and not copy_host:
            raise TypeError(f"cbrtgrad: out is a host ndarray; {_HOST_HINT}")

    # -- the protocol ---------------------------------------------------------

    def cube_root(
        self,
        x: Any,
        out: Any = None,
        *,
        where: Any = True,
        dtype: Any = None,
        stream: Any = None,
        copy_host: bool = False,
    ) -> Any:
        """``cbrt(x)`` on the device; ``stream`` and ``copy_host`` are cuda-only."""
        from ..kernels import cuda as cuda_kernels

        self._check_where(where)
        self._check_out_kind(out, copy_host)
        xd = self._device_input(x, "x", copy_host, stream)
        compute = np.dtype(dtype or xd.dtype)
        shape = tuple(xd.shape)
        result, host = self._output(out, "out", shape, compute, stream)
        self._launch(cuda_kernels.kernels()[compute].forward, xd.size, stream, xd, result)
        return self._finish(result, host, copy_host, stream)

    def cube_root_grad(
        self,
        g: Any,
        y: Any,
        out: Any = None,
        *,
        where: Any = True,
        dtype: Any = None,
        stream: Any = None,
        copy_host: bool = False,
    ) -> Any:
        """``g / (3 y^2)`` on the device; ``g`` and ``y`` of one shape."""
        from ..kernels import cuda as cuda_kernels

        self._check_where(where)
        self._check_out_kind(out, copy_host)
        gd = self._device_input(g, "g", copy_host, stream)
        yd = self._device_input(y, "y", copy_host, stream)
        if tuple(gd.shape) != tuple(yd.shape):
            raise ValueError(
                f"cbrtgrad: g has shape {tuple(gd.shape)} and y {tuple(yd.shape)}; the cuda "
                "backend does not broadcast"
            )
        compute = np.dtype(dtype or np.result_type(gd.dtype, yd.dtype))
        result, host = self._output(out, "out", tuple(gd.shape), compute, stream)
        self._launch(cuda_kernels.kernels()[compute].backward, gd.size, stream, gd, yd, result)
        return self._finish(result, host, copy_host, stream)

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
        from ..kernels import cuda as cuda_kernels

        if out is not None and (not isinstance(out, tuple) or len(out) != 2):
            raise TypeError("cbrtgrad: out must be a tuple (y, dx) of two device arrays")
        y_out, dx_out = (None, None) if out is None else out
        self._check_out_kind(y_out, copy_host)
        self._check_out_kind(dx_out, copy_host)
        xd = self._device_input(x, "x", copy_host, stream)
        gd = self._device_input(g, "g", copy_host, stream)
        shape = tuple(xd.shape)
        if tuple(gd.shape) != shape:
            raise ValueError(
                f"cbrtgrad: x has shape {shape} and g {tuple(gd.shape)}; the cuda backend "
                "does not broadcast"
            )
        compute = np.dtype(dtype or np.result_type(xd.dtype, gd.dtype))
        y, y_host = self._output(y_out, "out[y]", shape, compute, stream)
        dx, dx_host = self._output(dx_out, "out[dx]", shape, compute, stream)
        self._launch(cuda_kernels.kernels()[compute].fused, xd.size, stream, xd, gd, y, dx)
        return (
            self._finish(y, y_host, copy_host, stream),
            self._finish(dx, dx_host, copy_host, stream),
        )
