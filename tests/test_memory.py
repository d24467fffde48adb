"""Resident memory stays flat over many build-and-backward cycles and large-array calls.

Each loop runs in a fresh subprocess (so the test's own allocations do not
blur the figures); RSS is read from ``/proc/self/statm`` after a warm-up and
at the end, and ``tracemalloc`` counts Python allocations over a part of it.
A leak of even 100 bytes per cycle would add 10 MB over 10^5 cycles; one
lost array per large call would add 400 kB per call. The bar is 8 MB.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
LIMIT = 8 * 2**20

_PRELUDE = textwrap.dedent(
    """
    import gc, json, os, resource, tracemalloc
    import numpy as np
    import cbrtgrad as cg

    def rss():
        try:
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:  # not Linux: the peak, which a leak also raises
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    def measure(step, n, warm):
        for _ in range(warm):
            step()
        gc.collect()
        before = rss()
        tracemalloc.start()
        for _ in range(min(n // 10, 2000)):
            step()
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        for _ in range(n):
            step()
        gc.collect()
        return {"rss_growth": rss() - before, "traced": traced}
    """
)

_CYCLES = _PRELUDE + textwrap.dedent(
    """
    x = cg.Tensor(np.linspace(1.0, 2.0, 16), requires_grad=True)
    def step():
        x.grad = None
        (cg.cbrt(x) * 2.0 + x).sum().backward()
    print(json.dumps(measure(step, 100_000, 2_000)))
    """
)

_LARGE = _PRELUDE + textwrap.dedent(
    """
    x = np.random.default_rng(0).standard_normal(100_000).astype(np.float32)
    g = np.ones_like(x)
    out = np.empty_like(x)
    calls = [
        lambda b: cg.cbrt(x, backend=b),
        lambda b: cg.cbrt_grad(g, x, out=out, backend=b),
        lambda b: cg.cbrt_and_grad(x, g, backend=b),
    ]
    # (the parallel backend's memory is exercised by tests/test_concurrency.py)
    backends = ["cpu", "numpy"]
    k = [0]
    def step():  # one large-array call, rotating over functions and backends
        i = k[0]
        k[0] += 1
        calls[i % 3](backends[(i // 3) % 2])
    print(json.dumps(measure(step, 10_000, 90)))
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("script", [_CYCLES, _LARGE], ids=["1e5-cycles", "1e4-large-calls"])
def test_resident_memory_does_not_grow(script):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["rss_growth"] < LIMIT, figures
    # Python-level allocations still alive after the traced loops: a few kB.
    assert figures["traced"] < 256 * 1024, figures
