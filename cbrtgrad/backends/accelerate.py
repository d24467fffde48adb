"""The ``accelerate`` backend: Apple's vForce ``vvcbrtf`` / ``vvcbrt`` through ctypes.

vForce (``Accelerate.framework``, vForce.h) declares::

    void vvcbrtf(float *y, const float *x, const int *n);
    void vvcbrt(double *y, const double *x, const int *n);

output first and the length through a pointer to a 32-bit ``int``, so arrays
longer than 2^31 - 1 elements are passed in chunks. float16 is computed in
float32; integers and bool in float64 (the dtype rules of
:mod:`cbrtgrad.arrays.dtypes`); other dtypes are a ``TypeError``.

Accuracy: Apple publishes no ulp bound, and vForce "may treat some or all
denormal numbers as zero", so subnormal inputs may give ±0. ``cbrtgrad
verify --backend accelerate`` measures it where it runs. The gradient has no
vForce routine; it is cbrtgrad's own ``g / (3 y^2)`` cpu kernel.

The library path is ``CBRTGRAD_ACCELERATE`` (default: the framework). Any
library exporting the two functions with that ABI works, which is how the
tests exercise this binding on Linux.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any, NamedTuple

import numpy as np

from .. import _config
from ..arrays import dtypes as _dtypes
from ..arrays.kinds import is_device_array
from ..arrays.ufunc_args import check_out
from ..kernels.cpu import catalog as cpu_kernels
from ..kernels.kernel_ops import CUBE_ROOT, KernelOp
from ._layout import apply_elementwise, call_ufunc, fused_by_parts
from ._protocol import Availability, ElementwiseOps

#: The most elements one vForce call can take (its length is a C ``int``).
MAX_CHUNK = 2**31 - 1

_CTYPES: dict[np.dtype, Any] = {
    np.dtype(np.float32): ctypes.c_float,
    np.dtype(np.float64): ctypes.c_double,
}
_SYMBOLS: dict[np.dtype, str] = {np.dtype(np.float32): "vvcbrtf", np.dtype(np.float64): "vvcbrt"}


class _Library(NamedTuple):
    functions: dict[np.dtype, Any]
    error: str


def _load(path: str) -> _Library:
    # NOTE: since macOS 11 the framework binary exists only in the dyld shared
    # cache: os.path.isfile is False although dlopen succeeds. Only dlopen
    # decides.
    try:
        library = ctypes.CDLL(path)
        functions: dict[np.dtype, Any] = {}
        for dtype, symbol in _SYMBOLS.items():
            function = getattr(library, symbol)
            pointer = ctypes.POINTER(_CTYPES[dtype])
            # argtypes set once, here: every call is then type-checked by ctypes.
            function.argtypes = [pointer, pointer, ctypes.POINTER(ctypes.c_int)]
            function.restype = None
            functions[dtype] = function
    except (OSError, AttributeError) as exc:
        return _Library({}, f"cannot load vvcbrtf/vvcbrt from {path}: {exc}")
    return _Library(functions, "")  # type: ignore[arg-type]


class AccelerateBackend(ElementwiseOps):
    """ctypes binding to vForce; the library is loaded on first use.

    Parameters
    ----------
    path : str, optional
        Library to load instead of ``CBRTGRAD_ACCELERATE``.
    chunk_size : int, optional
        Elements per vForce call (at most, and by default, ``2**31 - 1``);
        tests force a small one to exercise the chunking.

    Examples
    --------
    >>> AccelerateBackend().name
    'accelerate'
    """

    name = "accelerate"

    def __init__(self, path: str | None = None, chunk_size: int = MAX_CHUNK) -> None:
        if not isinstance(chunk_size, int) or not 1 <= chunk_size <= MAX_CHUNK:
            raise ValueError(f"cbrtgrad: chunk_size must be an int in [1, {MAX_CHUNK}]")
        self._path = path
        self.chunk_size = chunk_size
        # Loaded libraries by path (the setting may change between calls in tests).
        self._libraries: dict[str, _Library] = {}

    @property
    def path(self) -> str:
        """The library this backend loads."""
        return self._path or _config.settings().accelerate_path

    def _library(self) -> _Library:
        path = self.path
        found = self._libraries.get(path)
        if found is None:
            found = self._libraries[path] = _load(path)
        return found

    def availability(self) -> Availability:
        path = self.path
        if sys.platform != "darwin" and path == _config.ACCELERATE_DEFAULT:
            return Availability(
                False,
                "not macOS: Apple's Accelerate framework exists only there "
                "(CBRTGRAD_ACCELERATE may name another library exporting vvcbrtf/vvcbrt)",
            )
        library = self._library()
        if library.error:
            return Availability(False, library.error)
        return Availability(True, f"vForce vvcbrtf/vvcbrt from {path}")

    def accepts(self, x: Any) -> bool:
        return not is_device_array(x)

    def _functions(self) -> dict[np.dtype, Any]:
        library = self._library()
        if library.error:
            raise RuntimeError(f"cbrtgrad: backend 'accelerate' is unavailable: {library.error}")
        return library.functions

    def _vforce(self, dtype: np.dtype) -> Any:
        function = self._functions()[dtype]
        pointer = ctypes.POINTER(_CTYPES[dtype])
        chunk = self.chunk_size

        def run(x: np.ndarray, y: np.ndarray) -> None:
            for start in range(0, x.shape[0], chunk):
                xs = x[start : start + chunk]
                count = ctypes.c_int(xs.shape[0])
                function(
                    y[start : start + chunk].ctypes.data_as(pointer),
                    xs.ctypes.data_as(pointer),
                    ctypes.byref(count),
                )

        return run

    def run(self, op: KernelOp, inputs: tuple[Any, ...], out: Any, where: Any, dtype: Any) -> Any:
        """The cube root by vForce; any other elementary op is the ``cpu`` backend's ufunc."""
        compute = _dtypes.compute_dtype_of(*inputs, argument=op.argument, dtype=dtype)
        out = check_out(out, inputs, compute, where)  # a direct call's, with cbrtgrad's words
        if op is CUBE_ROOT:
            return apply_elementwise(self._vforce(compute), inputs, compute, out, where)
        ufunc = cpu_kernels.ufunc(op.name, compute)
        return call_ufunc(ufunc, *inputs, out=out, where=where, dtype=compute)

    def cube_root_and_grad(
        self, x: Any, g: Any, out: Any = None, *, dtype: Any = None
    ) -> tuple[Any, Any]:
        return fused_by_parts(self, x, g, out, dtype)
