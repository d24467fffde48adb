"""asv benchmarks of ``cbrtgrad.numba`` in a user's own ``@njit`` loops.

The loops are those of ``python tools/measure.py numba`` (``tools/measuring/numba_loops.py``,
compiled with numba's defaults, as a user's would be): ``cbrt_into`` (the
ufunc's block function), the scalar ``cbrt(x[i])`` and ``cbrt_grad(g[i], y[i])``,
numba's own ``np.cbrt(x[i])`` and the power expression
``np.sign(v) * np.abs(v) ** (1/3)``; the ratios are against the cbrtgrad ufunc
on one thread (the ``cpu`` backend), timed in turns (``best_times``).
"""

import numpy as np

import cbrtgrad as cg
from cbrtgrad.cli.bench.inputs import bench_inputs
from cbrtgrad.cli.bench.timing import best_times
from tools.measuring import numba_loops

DTYPES = ["float32", "float64"]
N = numba_loops.LARGE
FORWARD = {
    "cbrt_into": numba_loops.block_call,
    "scalar": numba_loops.scalar_loop,
    "np_cbrt": numba_loops.np_cbrt_loop,
    "power": numba_loops.power_loop,
}
GRAD = {
    "cbrt_grad_into": numba_loops.grad_block_call,
    "scalar": numba_loops.grad_scalar_loop,
    "expression": numba_loops.grad_expression_loop,
}


class NumbaForward:
    """``y = cbrt(x)`` in a user's loop, 10^6 elements."""

    params = (DTYPES, list(FORWARD))
    param_names = ["dtype", "loop"]

    def setup(self, dtype, loop):
        self.x = bench_inputs(np.dtype(dtype), N, seed=1)
        self.out = np.empty_like(self.x)
        self.loop = FORWARD[loop]
        self.loop(self.x, self.out)  # compile before timing
        cg.cbrt(self.x, out=self.out, backend="cpu")

    def time_loop(self, dtype, loop):
        self.loop(self.x, self.out)

    def track_ratio_to_ufunc(self, dtype, loop):
        ours, ufunc = best_times(
            [
                lambda: self.loop(self.x, self.out),
                lambda: cg.cbrt(self.x, out=self.out, backend="cpu"),
            ],
            5,
        )
        return ours / ufunc

    track_ratio_to_ufunc.unit = "x"


class NumbaGrad:
    """``dx = g / (3 y^2)`` in a user's loop, 10^6 elements."""

    params = (DTYPES, list(GRAD))
    param_names = ["dtype", "loop"]

    def setup(self, dtype, loop):
        self.y = cg.cbrt(bench_inputs(np.dtype(dtype), N, seed=1), backend="cpu")
        self.g = bench_inputs(np.dtype(dtype), N, seed=2)
        self.out = np.empty_like(self.y)
        self.loop = GRAD[loop]
        self.loop(self.g, self.y, self.out)
        cg.cbrt_grad(self.g, self.y, out=self.out, backend="cpu")

    def time_loop(self, dtype, loop):
        self.loop(self.g, self.y, self.out)

    def track_ratio_to_ufunc(self, dtype, loop):
        ours, ufunc = best_times(
            [
                lambda: self.loop(self.g, self.y, self.out),
                lambda: cg.cbrt_grad(self.g, self.y, out=self.out, backend="cpu"),
            ],
            5,
        )
        return ours / ufunc

    track_ratio_to_ufunc.unit = "x"
