"""asv memory benchmarks: peak memory and growth of the loops tests/test_memory.py bounds.

``peakmem_`` records the process's peak RSS over a loop; ``track_`` records
how much resident memory (``/proc/self/statm``) and ``tracemalloc``'s live
Python allocations grew over it. A leak shows as growth proportional to the
loop length; flat code stays near 0. (The 10^5-cycle ``peakmem_cycles`` of
the engine is in bench_engine.py.)
"""

import gc
import os
import tracemalloc

import numpy as np

import cbrtgrad as cg


def _rss():
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        raise NotImplementedError("no /proc/self/statm on this platform") from None


class LargeArrayCalls:
    """10^4 calls on 10^5-element float32 arrays, per backend."""

    params = (["cpu", "numpy", "parallel"],)
    param_names = ["backend"]
    timeout = 300

    def setup(self, backend):
        self.x = np.random.default_rng(0).standard_normal(100_000).astype(np.float32)
        self.g = np.ones_like(self.x)
        self.out = np.empty_like(self.x)
        self._loop(backend, 3)  # compile first

    def _loop(self, backend, n):
        for _ in range(n):
            y = cg.cbrt(self.x, backend=backend)
            cg.cbrt_grad(self.g, y, out=self.out, backend=backend)
            cg.cbrt_and_grad(self.x, self.g, backend=backend)

    def peakmem_large_calls(self, backend):
        self._loop(backend, 3_333)

    def track_rss_growth_large_calls(self, backend):
        gc.collect()
        before = _rss()
        self._loop(backend, 3_333)
        gc.collect()
        return _rss() - before

    track_rss_growth_large_calls.unit = "bytes"


class BuildBackwardCycles:
    """Growth over 10^5 build-and-backward cycles (RSS) and 10^4 (tracemalloc)."""

    timeout = 300

    def setup(self):
        self.x = cg.Tensor(np.linspace(1.0, 2.0, 16), requires_grad=True)
        self._loop(1_000)

    def _loop(self, n):
        for _ in range(n):
            self.x.grad = None
            (cg.cbrt(self.x) * 2.0 + self.x).sum().backward()

    def track_rss_growth_cycles(self):
        gc.collect()
        before = _rss()
        self._loop(100_000)
        gc.collect()
        return _rss() - before

    track_rss_growth_cycles.unit = "bytes"

    def track_tracemalloc_growth_cycles(self):
        gc.collect()
        tracemalloc.start()
        self._loop(10_000)
        gc.collect()
        live = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        return live

    track_tracemalloc_growth_cycles.unit = "bytes"
