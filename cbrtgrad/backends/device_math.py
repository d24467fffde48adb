"""The graph engine's array math on device arrays, without copies to the host.

:func:`namespace` gives, for a CuPy array, a PyTorch CUDA tensor or a numba
device array (a GPU's, or numba's CUDA simulator's), an object whose methods
compute what the engine's ops need on arrays of that library: ``add``,
``subtract``, ``multiply``, ``divide``, ``negative``, ``power``,
``astype``, ``sum``, ``mean``, ``reshape``, ``broadcast_to``, ``sum_to``,
``zeros``, ``full``, ``all_finite``, ``to_host`` and ``from_host``. Results
are arrays of the input's library (numba device arrays for numba's, or for
any other object with ``__cuda_array_interface__``), allocated by that
library on the input's device and computed on its current stream (numba's
default stream for numba arrays), as the ``cuda`` backend does
(:mod:`cbrtgrad.backends._device_arrays`). Only ``all_finite`` (one flag)
and ``to_host`` copy to the host.

Semantics are numpy's: broadcasting, and result dtypes as
``np.result_type`` gives them for the same host operands, a Python scalar
not promoting an array (NEP 50: ``float32 + 0.1`` is float32, ``0.1``
rounded to float32 first). Data are float16, float32 or float64; float16 is
computed in float32 and rounded once, as numpy's half loops do.

Exactness, against numpy on the same inputs:

* ``add``, ``subtract``, ``multiply``, ``divide``, ``negative``, ``astype``
  and ``broadcast_to`` give numpy's bits (IEEE operations, each rounded
  once, subnormals kept; no multiply is fused with an add), except the
  payload and sign of a nan result, which are the device's.
* ``power`` gives numpy's bits for the exponents numpy's float32 and
  float64 loops compute without ``pow`` (2, 0.5, -1 and 1: a square, a
  square root, a reciprocal, the value); for others it is the device's
  ``pow`` (CUDA's ``powf``/``pow``, within 2 ulp of the exact power), which
  may differ from numpy's in the last bit.
* ``sum`` and ``mean`` accumulate float32 and float64 data in float64 and
  float16 data in float32, rounded once to the data's dtype (``mean`` then
  divides by the count in that dtype, or in float32 for float16, as
  numpy's ``mean`` and the engine's host code do). The order of the
  additions is not numpy's pairwise order, so the last bits may differ; for
  float32 the float64 total is the more accurate one. ``sum_to`` is
  ``sum`` (for float16 the engine's host ``reduce_to`` adds in half
  precision along outer axes; this rounds once).

The CuPy and PyTorch paths (:mod:`cbrtgrad.backends._device_math_libraries`)
call those libraries' own functions, with numpy's promotion enforced
explicitly; the numba path runs the kernels of
:mod:`cbrtgrad.kernels.cuda_elementwise`.

Examples
--------
The namespace of a numba device array (CI's doctests run under numba's
CUDA simulator):

>>> import numpy as np
>>> from numba import cuda
>>> x = cuda.to_device(np.array([[1.0, 2.0, 3.0]], np.float32))
>>> xp = namespace(x)
>>> y = xp.multiply(xp.add(x, 0.5), x)  # (x + 0.5) * x, float32
>>> xp.to_host(y), xp.to_host(xp.sum(y, axis=(1,), keepdims=False))
(array([[ 1.5,  5. , 10.5]], dtype=float32), array([17.], dtype=float32))
"""

from __future__ import annotations

from functools import cache
from typing import Any

from .._array_kinds import is_device_array
from ._device_arrays import CUPY, NUMBA, library_of
from ._device_math_args import describe
from ._device_math_base import DeviceMath

__all__ = ["DeviceMath", "namespace"]


def namespace(array: Any) -> DeviceMath:
    """The array math for ``array``'s library: one object per library, cached.

    Parameters
    ----------
    array : device array
        A CuPy array, a PyTorch CUDA tensor, a numba device array or any
        object with ``__cuda_array_interface__``.

    Returns
    -------
    DeviceMath
        The methods listed in the module's docstring.

    Raises
    ------
    TypeError
        If ``array`` is not a device array (a host array, a scalar, ...).

    Examples
    --------
    >>> import numpy as np
    >>> namespace(np.ones(2))
    Traceback (most recent call last):
    ...
    TypeError: cbrtgrad: array must be a device array (...), got a host numpy.ndarray ...
    """
    if not is_device_array(array):
        raise TypeError(
            "cbrtgrad: array must be a device array (CuPy, PyTorch CUDA or numba), "
            f"got {describe(array)}"
        )
    return _namespace(library_of(array))


@cache
def _namespace(library: str) -> DeviceMath:
    if library == NUMBA:
        from ._device_math_numba import NumbaMath

        return NumbaMath()
    from ._device_math_libraries import CupyMath, TorchMath

    return CupyMath() if library == CUPY else TorchMath()
