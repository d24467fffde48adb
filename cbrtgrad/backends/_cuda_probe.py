"""Whether the ``cuda`` backend can run here: numba-cuda, its toolchain, a GPU (or the simulator).

The probe reports and never raises (:func:`probe`); the backend keeps a
positive answer for the process (cbrtgrad/backends/cuda.py).
"""

from __future__ import annotations

import importlib
import importlib.util
from functools import lru_cache

import numpy as np

from ..kernels.cuda.primitives import simulating  # no numba.cuda: numpy and the stdlib
from ._protocol import Availability


@lru_cache(maxsize=1)
def toolchain_problem() -> str | None:
    """Why numba-cuda cannot compile kernels with this numpy, or ``None``.

    NOTE: numba-cuda 0.30.4 registers ``overload(np.row_stack)`` when its
    array functions are first imported, at the first kernel compile; numpy
    2.5 removed ``np.row_stack``, so every compile fails there (numba-cuda
    issue 907). Importing that module is the probe: it fails exactly when a
    compile would, and it passes with a numba-cuda that drops the overload.
    """
    try:
        importlib.import_module("numba.cuda.np.arrayobj")
    except Exception as exc:  # the probe reports, never raises
        from importlib.metadata import version

        fix = (
            "numpy 2.5 removed np.row_stack, numba-cuda issue 907; "
            if "row_stack" in str(exc)
            else ""
        )
        return (
            f"numba-cuda {version('numba-cuda')} cannot compile kernels with numpy "
            f"{np.__version__} ({type(exc).__name__}: {exc}; {fix}install numpy<2.5, as "
            "pip install 'cbrtgrad[cuda]' does)"
        )
    return None


def probe() -> Availability:
    """Whether the cuda backend can run here, and what it runs on or why not; never raises.

    Examples
    --------
    >>> probe().reason != ""
    True
    """
    if importlib.util.find_spec("numba_cuda") is None:
        return Availability(
            False, "the numba-cuda package is not installed (pip install 'cbrtgrad[cuda]')"
        )
    try:
        from numba import cuda

        if simulating():
            return Availability(
                True, "numba CUDA simulator (NUMBA_ENABLE_CUDASIM=1): Python speed, for tests"
            )
        problem = toolchain_problem()
        if problem is not None:
            return Availability(False, problem)
        if not cuda.is_available():
            return Availability(False, "no CUDA GPU or driver found by numba-cuda")
        device = cuda.get_current_device()
        name = device.name.decode() if isinstance(device.name, bytes) else device.name
        major, minor = device.compute_capability
        return Availability(True, f"{name} (compute capability {major}.{minor})")
    except Exception as exc:  # the probe never raises: it reports
        return Availability(False, f"numba.cuda failed: {type(exc).__name__}: {exc}")
