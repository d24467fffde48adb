"""asv memory benchmarks: peak memory and growth of the loops tests/test_memory.py bounds.

``peakmem_`` records the process's peak RSS over a loop; ``track_`` records
how much resident memory (``/proc/self/statm``) and ``tracemalloc``'s live
Python allocations grew over it. A leak shows as growth proportional to the
loop length; flat code stays near 0. (The engine's ``peakmem_cycles`` is in
bench_engine.py; tests/test_memory.py runs the 10^5-cycle loops with bars.)
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


#: Rounds of three large-array calls, and build-and-backward cycles: one lost
#: 400 kB array per call would add 240 MB, 100 bytes a cycle 2 MB.
ROUNDS = 200
CYCLES = 20_000


class LargeArrayCalls:
    """``3 * ROUNDS`` calls on 10^5-element float32 arrays, per backend.

    NOTE: not the parallel backend, whose loops each benchmark process would
    compile again (20 to 30 s, see ``benchmarks/__init__.py``); its memory is
    exercised by tests/test_concurrency.py.
    """

    params = (["cpu", "numpy"],)
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
        self._loop(backend, ROUNDS)

    def track_rss_growth_large_calls(self, backend):
        gc.collect()
        before = _rss()
        self._loop(backend, ROUNDS)
        gc.collect()
        return _rss() - before

    track_rss_growth_large_calls.unit = "bytes"


class BuildBackwardCycles:
    """Growth over ``CYCLES`` build-and-backward cycles (RSS) and a tenth of them (tracemalloc)."""

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
        self._loop(CYCLES)
        gc.collect()
        return _rss() - before

    track_rss_growth_cycles.unit = "bytes"

    def track_tracemalloc_growth_cycles(self):
        gc.collect()
        tracemalloc.start()
        self._loop(CYCLES // 10)
        gc.collect()
        live = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        return live

    track_tracemalloc_growth_cycles.unit = "bytes"
