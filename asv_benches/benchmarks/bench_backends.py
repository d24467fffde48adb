"""Time each backend's forward, backward and fused kernels (asv 0.6).

A backend that cannot run here is skipped: ``setup`` raises NotImplementedError.
The cuda backend is timed only on a real GPU (the simulator is not a speed).
"""

import numpy as np

from cbrtgrad.backends import availability, get_backend, known


class TimeBackends:
    params = (list(known()), ["float32", "float64"], [10**5, 10**6, 10**7])
    param_names = ["backend", "dtype", "n"]
    timeout = 120

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

    def time_forward(self, backend, dtype, n):
        self.backend.cube_root(self.x, out=self.y)
        self.sync()

    def time_backward(self, backend, dtype, n):
        self.backend.cube_root_grad(self.g, self.y, out=self.dx)
        self.sync()

    def time_fused(self, backend, dtype, n):
        self.backend.cube_root_and_grad(self.x, self.g, out=(self.y, self.dx))
        self.sync()
