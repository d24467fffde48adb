"""Device arrays of CuPy, PyTorch and numba, as the ``cuda`` backend reads and makes them.

An input is read once into an :class:`Operand` (its library, pointer, shape,
dtype and device), with no copy. Results are allocated by the input's own
library, so they come back as the kind of array the caller passed and from
that library's allocator: CuPy's memory pool, PyTorch's caching allocator, or
numba's memory manager for numba device arrays and for any other object with
``__cuda_array_interface__``. The kernels run on the input library's current
stream unless a ``stream=`` is given.

NOTE: nothing here imports CuPy or PyTorch: an array of theirs can only exist
once its library is imported, so it is taken from ``sys.modules``.
"""

from __future__ import annotations

import sys
from typing import Any, NamedTuple

import numpy as np

from ..arrays import dtypes as _dtypes
from ..arrays.kinds import (
    CUPY,
    NUMPY_TO_TORCH,
    TORCH,
    device_dtype,
    library_of,
    torch_dtypes,
)


class Operand(NamedTuple):
    """One device input, as the kernels take it.

    ``array`` is what a simulator kernel indexes (a flat numba device array);
    on a GPU the kernels take ``pointer``.
    """

    library: str
    pointer: int
    shape: tuple[int, ...]
    size: int
    dtype: np.dtype
    device: int
    array: Any


def read(value: Any, name: str, simulating: bool) -> Operand:
    """``value`` as an :class:`Operand`: no copy, checked for layout and dtype.

    Raises
    ------
    TypeError
        For a dtype no kernel computes in (complex, ...), naming ``name``.
    ValueError
        For a non-contiguous array, or a PyTorch tensor on the CPU.
    """
    library = library_of(value)
    if library == CUPY:
        dtype = value.dtype
        contiguous = value.flags.c_contiguous
        pointer, device = value.data.ptr, value.device.id
        shape, size, array = value.shape, value.size, None
    elif library == TORCH:
        if not value.is_cuda:
            raise ValueError(f"cbrtgrad: {name} is a PyTorch tensor on {value.device}, not CUDA")
        dtype = device_dtype(value)
        contiguous = value.is_contiguous()
        pointer, device = value.data_ptr(), value.device.index
        shape, size, array = tuple(value.shape), value.numel(), None
    else:
        from numba import cuda

        if not hasattr(value, "copy_to_host"):
            value = cuda.as_cuda_array(value)  # any __cuda_array_interface__, zero-copy
        dtype = value.dtype
        contiguous = value.is_c_contiguous()
        shape, size = value.shape, value.size
        if simulating:  # the simulator's kernels index a flat array
            array = value.reshape(size) if contiguous else None
            pointer, device = 0, 0
        else:
            array = None
            pointer = value.device_ctypes_pointer.value or 0
            device = cuda.get_current_device().id
    _dtypes.compute_dtype(dtype, name)
    if not contiguous:
        raise ValueError(
            f"cbrtgrad: {name} must be a C-contiguous device array (got shape {shape}); "
            "copy it to a contiguous one first"
        )
    return Operand(library, pointer, tuple(shape), size, np.dtype(dtype), device, array)


def current_stream(library: str, device: int) -> int:
    """The handle of the stream ``library`` would run its own kernels on now."""
    if library == CUPY:
        return int(sys.modules["cupy"].cuda.get_current_stream().ptr)
    if library == TORCH:
        return int(sys.modules["torch"].cuda.current_stream(device).cuda_stream)
    return 0  # numba's default stream (numba takes streams only explicitly)


def stream_handle(stream: Any) -> int:
    """The handle of a ``stream=`` argument: a numba, CuPy or PyTorch stream, or an int.

    Raises
    ------
    TypeError
        For anything else, naming the argument.
    """
    if stream is None:
        return 0
    if isinstance(stream, int) and not isinstance(stream, bool):
        return stream
    if hasattr(stream, "__cuda_stream__"):
        return int(stream.__cuda_stream__()[1])
    if hasattr(stream, "cuda_stream"):  # PyTorch before the stream protocol
        return int(stream.cuda_stream)
    if hasattr(stream, "ptr"):  # CuPy before the stream protocol
        return int(stream.ptr)
    raise TypeError(
        "cbrtgrad: stream must be a numba, CuPy or PyTorch CUDA stream or an int handle, "
        f"got {type(stream).__name__}"
    )


def empty(like: Operand, shape: tuple[int, ...], dtype: np.dtype, stream: Any) -> Any:
    """A new C-contiguous array of ``like``'s library, on its device and stream.

    ``stream`` is a numba stream (or 0), used for numba's allocations.
    """
    if like.library == CUPY:
        return sys.modules["cupy"].empty(shape, dtype)  # the kernels' device (checked)
    if like.library == TORCH:
        torch = sys.modules["torch"]
        torch_dtypes()
        return torch.empty(shape, dtype=NUMPY_TO_TORCH[dtype], device=f"cuda:{like.device}")
    from numba import cuda

    return cuda.device_array(shape, dtype, stream=stream)


def empty_operand(
    like: Operand, dtype: np.dtype, stream: Any, simulating: bool
) -> tuple[Any, Operand]:
    """``empty(like, like.shape, dtype, stream)`` and its :class:`Operand`.

    NOTE: hot path (every call without ``out=``): the new array is known to be
    C-contiguous, of ``dtype`` and on ``like``'s device, so only its pointer
    is read, not the whole of :func:`read` with its checks.
    """
    result = empty(like, like.shape, dtype, stream)
    device = like.device
    if like.library == CUPY:
        # CuPy allocates on its current device, which need not be the input's:
        # the launch refuses arrays of two devices, so read it.
        pointer, array, device = result.data.ptr, None, result.device.id
    elif like.library == TORCH:
        pointer, array = result.data_ptr(), None  # made on like's device
    elif simulating:
        pointer, array = 0, result.reshape(like.size)
    else:  # numba's current device, which the launch checks is the input's
        pointer, array = result.device_ctypes_pointer.value or 0, None
    return result, like._replace(pointer=pointer, dtype=dtype, array=array, device=device)


def scalar_like(like: Operand, value: Any, dtype: np.dtype, stream: Any) -> Any:
    """A one-element (0-d) array of ``like``'s library holding ``value`` cast to ``dtype``.

    For a host scalar given beside device arrays (a gradient of ``1.0``), as
    CuPy takes Python and numpy scalars beside its arrays. ``stream`` is a
    numba stream (or 0), for numba's copy.
    """
    host = np.asarray(value, dtype=dtype)  # the cast every backend makes
    if like.library == CUPY:
        return sys.modules["cupy"].full((), host[()], dtype)  # a fill kernel, no copy
    if like.library == TORCH:
        torch = sys.modules["torch"]
        torch_dtypes()
        torch_dtype = NUMPY_TO_TORCH[dtype]
        return torch.full((), float(host), dtype=torch_dtype, device=f"cuda:{like.device}")
    from numba import cuda

    return cuda.to_device(host, stream=stream)
