"""The case table every backend runs, from the shared table in ``cbrtgrad.verification.cases``."""

from __future__ import annotations

import numpy as np

from cbrtgrad.cli.bench.inputs import bench_inputs
from cbrtgrad.verification import cases as shared

DTYPES = (np.float32, np.float64)

#: A ``pytest.mark.filterwarnings`` argument for tests that run the cuda kernels
#: at y = 0 under numba's CUDA simulator. NOTE: the simulator computes device
#: arithmetic as numpy scalars in threads of its own, where the test's
#: ``np.errstate`` does not reach, so the quotient warns ("tid=[...]: divide
#: by zero encountered in scalar divide"); a GPU raises no flag.
SIMULATED_DIVISION = "ignore:.*encountered in scalar divide:RuntimeWarning"


def cases(dtype: type, n: int = 400) -> np.ndarray:
    """The shared special values, then ``n`` inputs: half over all binades, half typical."""
    dt = np.dtype(dtype)
    return np.concatenate(
        [
            shared.special_values(dt),
            shared.random_inputs(dt, n // 2),
            bench_inputs(dt, n - n // 2),
        ]
    )


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Same dtype, shape and bytes (nan payloads and signed zeros included)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return bool(
        np.array_equal(
            np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8)
        )
    )
