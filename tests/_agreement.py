"""What "the same result" means for each host backend.

cbrtgrad's own backends promise the same bits for every layout and every
CPU, so their results are compared bit for bit. The ``numpy`` backend *is*
``np.cbrt``, whose bits depend on both: on AVX-512 CPUs numpy runs Intel's
SVML for unit-stride loops and libm otherwise, so float32 ``cbrt(27)`` is
2.9999998 in a contiguous array and 3.0 in a reversed view (docs/accuracy.md,
"np.cbrt's answer depends on layout and CPU"). Its results are held to what
numpy promises instead: the same nans, zeros and infinities, and finite
values within :data:`NP_CBRT_STEPS` representable steps of each other.
"""

from __future__ import annotations

import numpy as np

from .backends._cases import same_bits

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)

#: How far two ``np.cbrt`` results for one input may lie apart, in
#: representable steps: SVML float32 is within 1.93 ulp and glibc's within
#: 0.89, SVML float64 within 0.55 and glibc's within 3.04 (REFERENCE.md), so
#: two of them differ by at most 3 (float32) and 4 (float64) steps.
NP_CBRT_STEPS = {F32: 3, F64: 4}


def _ordered(a: np.ndarray) -> np.ndarray:
    """Float bits as integers that count representable steps (across zero too)."""
    a = np.ascontiguousarray(a)
    bits = a.view(np.int32 if a.dtype == F32 else np.int64).astype(np.int64)
    magnitude = bits & np.int64(0x7FFFFFFF if a.dtype == F32 else 0x7FFFFFFFFFFFFFFF)
    return np.where(bits < 0, -magnitude, magnitude)


def steps_apart(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How many representable values lie between ``a`` and ``b`` (finite, same dtype)."""
    return np.abs(_ordered(a) - _ordered(b))


def agree(got: np.ndarray, expected: np.ndarray, backend: str | None) -> bool:
    """Whether ``got`` is ``expected`` as ``backend`` promises it (see the module's docstring)."""
    if backend != "numpy":
        return same_bits(got, expected)
    got, expected = np.asarray(got), np.asarray(expected)
    if got.dtype != expected.dtype or got.shape != expected.shape:
        return False
    nan = np.isnan(expected)
    if not np.array_equal(np.isnan(got), nan):
        return False
    finite = np.isfinite(expected) & (expected != 0)
    if not same_bits(got[~nan & ~finite], expected[~nan & ~finite]):
        return False
    return bool((steps_apart(got[finite], expected[finite]) <= NP_CBRT_STEPS[got.dtype]).all())
