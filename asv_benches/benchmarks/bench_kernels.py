"""asv benchmarks of the core kernels: time, ratio against np.cbrt, accuracy, JIT cost.

The sizes and inputs are those of ``cbrtgrad bench`` (cbrtgrad.cli.bench.inputs);
the accuracy cases come from cbrtgrad.verification.cases, the table the tests
and ``cbrtgrad verify`` use. The kernels are the cpu
backend's, named explicitly as ``cbrtgrad bench`` does: at 10^7 elements the
automatic choice is the parallel backend (timed in
``bench_backends.TimeParallel``), whose compilation every benchmark process
here would otherwise pay (see ``benchmarks/__init__.py``).
"""

import numpy as np

import cbrtgrad as cg
from cbrtgrad.cli.bench.inputs import BENCH_SIZES, bench_inputs
from cbrtgrad.cli.bench.timing import best_times
from cbrtgrad.verification import cases, ulp

DTYPES = ["float32", "float64"]
SIZES = list(BENCH_SIZES)
BACKEND = "cpu"


def _inputs(dtype, n):
    return bench_inputs(np.dtype(dtype), n, seed=1)


class Kernels:
    params = (DTYPES, SIZES)
    param_names = ["dtype", "n"]

    def setup(self, dtype, n):
        self.x = _inputs(dtype, n)
        self.y = cg.cbrt(self.x, backend=BACKEND)
        self.g = np.ones_like(self.x)
        self.out = np.empty_like(self.x)
        self.out2 = np.empty_like(self.x)

    def time_forward(self, dtype, n):
        cg.cbrt(self.x, out=self.out, backend=BACKEND)

    def time_backward(self, dtype, n):
        cg.cbrt_grad(self.g, self.y, out=self.out, backend=BACKEND)

    def time_fused(self, dtype, n):
        cg.cbrt_and_grad(self.x, self.g, out=(self.out, self.out2), backend=BACKEND)

    def time_np_cbrt(self, dtype, n):
        np.cbrt(self.x, out=self.out)

    def track_speedup_vs_np_cbrt(self, dtype, n):
        ours, theirs = best_times(
            [
                lambda: cg.cbrt(self.x, out=self.out, backend=BACKEND),
                lambda: np.cbrt(self.x, out=self.out),
            ],
            5,
        )
        return theirs / ours

    track_speedup_vs_np_cbrt.unit = "x"

    def track_grad_share_of_copy_bandwidth(self, dtype, n):
        src = np.empty(n + n // 2, dtype)
        dst = np.empty_like(src)
        ours, copy = best_times(
            [
                lambda: cg.cbrt_grad(self.g, self.y, out=self.out, backend=BACKEND),
                lambda: np.copyto(dst, src),
            ],
            5,
        )
        return copy / ours

    track_grad_share_of_copy_bandwidth.unit = "x"

    def track_grad_with_nans_share_of_clean(self, dtype, n):
        # The gradient's nan pass (docs/accuracy.md, "nan results"): with one
        # g in 100 a nan, every block of 1024 has its nans replaced; without,
        # only the compare runs. 1.0 would be no cost.
        g_nans = self.g.copy()
        g_nans[::100] = np.nan
        clean, with_nans = best_times(
            [
                lambda: cg.cbrt_grad(self.g, self.y, out=self.out, backend=BACKEND),
                lambda: cg.cbrt_grad(g_nans, self.y, out=self.out, backend=BACKEND),
            ],
            5,
        )
        return clean / with_nans

    track_grad_with_nans_share_of_clean.unit = "x"


class Accuracy:
    params = DTYPES
    param_names = ["dtype"]

    def setup(self, dtype):
        self.x = cases.random_inputs(np.dtype(dtype), 20_000, seed=4)

    def track_forward_max_ulp(self, dtype):
        y = cg.cbrt(self.x, backend=BACKEND)
        return float(ulp.mpmath_ulp_errors(self.x, y, ulp.cbrt_exact).max())

    track_forward_max_ulp.unit = "ulp"

    def track_np_cbrt_max_ulp(self, dtype):
        return float(ulp.mpmath_ulp_errors(self.x, np.cbrt(self.x), ulp.cbrt_exact).max())

    track_np_cbrt_max_ulp.unit = "ulp"


def timeraw_first_call_compile():
    # A fresh interpreter: import, then the first call compiles the ufuncs.
    return """
import numpy as np
import cbrtgrad
cbrtgrad.cbrt(np.ones(4))
cbrtgrad.cbrt_grad(np.ones(4), np.ones(4))
"""
