"""Time each backend's forward, backward and fused kernels (asv 0.6).

A backend that cannot run here is skipped: ``setup`` raises NotImplementedError.
The cuda backend is timed only on a real GPU (the simulator is not a speed).

NOTE: the parallel backend has a class of its own, with one dtype, one size
and one benchmark: each of its benchmark processes compiles all of its loops,
20 to 60 s on a busy 2-core machine (see ``benchmarks/__init__.py``), so the
other backends' table would cost many minutes of compiling under ``--quick``.
"""

import numpy as np

from cbrtgrad.backends import availability, get_backend, known
from cbrtgrad.cli.bench.inputs import BENCH_SIZES

DTYPES = ["float32", "float64"]


class _Setup:
    def setup(self, backend, dtype, n):
        status = availability(backend)
        if not status.available or "simulator" in status.reason:
            raise NotImplementedError(status.reason)
        self.backend = get_backend(backend)
        rng = np.random.default_rng(0)
        x = (rng.standard_normal(n) * 100).astype(dtype)
        g = np.ones(n, dtype)
        self.sync = lambda: None
        if backend == "cuda":
            from numba import cuda

            x, g = cuda.to_device(x), cuda.to_device(g)
            self.sync = cuda.synchronize
        self.x, self.g = x, g
        self.y = self.backend.cube_root(x)
        self.dx = self.backend.cube_root_grad(g, self.y)


class TimeBackends(_Setup):
    """The other backends at the sizes of the speed table.

    The cpu backend's kernels at these sizes and dtypes are ``bench_kernels.Kernels``.
    """

    params = ([b for b in known() if b not in ("cpu", "parallel")], DTYPES, list(BENCH_SIZES))
    param_names = ["backend", "dtype", "n"]
    timeout = 120

    def time_forward(self, backend, dtype, n):
        self.backend.cube_root(self.x, out=self.y)
        self.sync()

    def time_backward(self, backend, dtype, n):
        self.backend.cube_root_grad(self.g, self.y, out=self.dx)
        self.sync()

    def time_fused(self, backend, dtype, n):
        self.backend.cube_root_and_grad(self.x, self.g, out=(self.y, self.dx))
        self.sync()


class TimeParallel(_Setup):
    """The parallel backend on 10^7 float32 elements, where the automatic choice uses it.

    One benchmark, the forward then the gradient from its output (one process
    compiling the parallel loops; see the NOTE above). Each kernel alone, and
    the fused one, is timed by ``cbrtgrad bench --backends parallel``.
    """

    params = (["parallel"], ["float32"], [10**7])
    param_names = ["backend", "dtype", "n"]
    timeout = 180

    def time_forward_and_backward(self, backend, dtype, n):
        self.backend.cube_root(self.x, out=self.y)
        self.backend.cube_root_grad(self.g, self.y, out=self.dx)
