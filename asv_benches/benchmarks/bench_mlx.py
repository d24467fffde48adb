"""asv benchmarks of the MLX bridge (cbrtgrad.mlx) against MLX's own ops, on MLX's CPU.

Skipped where MLX is not installed (``setup`` raises NotImplementedError):
MLX is an extra, ``pip install 'cbrtgrad[mlx]'``. The cases are issue 39's
(tools/measuring/mlx_rows.py, ``python tools/measure.py mlx`` prints them
as a table); the ``track_`` ratios are each taken in one run, in turns:

* forward plus backward of ``cbrt(x).sum()`` on 10^6 float32, through the
  bridge and through ``mx.sign(x) * mx.power(mx.abs(x), 1/3)`` (the goal: at
  least 4x faster) and ``mx.power(x, 1/3)`` (the seed's route, nan for x < 0);
* the forward, against the same and against ``cbrtgrad.cbrt`` on the numpy
  view of the same memory (the goal: within 1.5x; at 10^6 both run on numba's
  threads by default, ``CBRTGRAD_PARALLEL_MIN``).

NOTE: the first setup in a fresh cache builds the MLX primitive (CMake, a
C++ compiler; seconds) and compiles the loops: hence the timeouts.
"""

import importlib.util

import numpy as np

from cbrtgrad.cli.bench.timing import best_times

N = 1_000_000


def _mlx():
    if importlib.util.find_spec("mlx") is None:
        raise NotImplementedError("MLX is not installed (the mlx extra)")
    import mlx.core as mx

    import cbrtgrad.mlx as cm

    return mx, cm


class MlxForwardBackward:
    """``mx.value_and_grad(lambda v: cbrt(v).sum())`` on 10^6 float32, three ways."""

    timeout = 300

    def setup(self):
        mx, cm = _mlx()
        self.x = mx.array(np.random.default_rng(0).standard_normal(N).astype(np.float32))
        mx.eval(self.x)

        def step(f):
            value_and_grad = mx.value_and_grad(lambda v: f(v).sum())
            return lambda: mx.eval(value_and_grad(self.x))

        self.bridge = step(cm.cbrt)
        self.expression = step(lambda v: mx.sign(v) * mx.power(mx.abs(v), 1 / 3))
        self.power = step(lambda v: mx.power(v, 1 / 3))
        self.bridge()  # build and load before timing

    def time_bridge(self):
        self.bridge()

    def time_mlx_expression(self):
        self.expression()

    def time_mlx_power(self):
        self.power()

    def track_speedup_vs_mlx_expression(self):
        ours, theirs = best_times([self.bridge, self.expression], 5)
        return theirs / ours

    track_speedup_vs_mlx_expression.unit = "x"

    def track_speedup_vs_mlx_power(self):
        ours, theirs = best_times([self.bridge, self.power], 5)
        return theirs / ours

    track_speedup_vs_mlx_power.unit = "x"


class MlxForward:
    """``mx.eval(cbrt(x))`` on 10^6 float32, against MLX's expression and the api on the view."""

    timeout = 300

    def setup(self):
        import cbrtgrad

        mx, cm = _mlx()
        x = mx.array(np.random.default_rng(0).standard_normal(N).astype(np.float32))
        mx.eval(x)
        view = np.asarray(x)  # the same memory
        self.bridge = lambda: mx.eval(cm.cbrt(x))
        self.expression = lambda: mx.eval(mx.sign(x) * mx.power(mx.abs(x), 1 / 3))
        self.api = lambda: cbrtgrad.cbrt(view)
        self.bridge()
        self.api()

    def time_bridge(self):
        self.bridge()

    def time_mlx_expression(self):
        self.expression()

    def time_api_on_numpy_view(self):
        self.api()

    def track_speedup_vs_mlx_expression(self):
        ours, theirs = best_times([self.bridge, self.expression], 5)
        return theirs / ours

    track_speedup_vs_mlx_expression.unit = "x"

    def track_ratio_to_api_on_numpy_view(self):
        ours, api = best_times([self.bridge, self.api], 5)
        return ours / api

    track_ratio_to_api_on_numpy_view.unit = "x"
