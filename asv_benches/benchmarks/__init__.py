"""cbrtgrad's asv suite (asv 0.6): ``cd asv_benches && asv run --python=same --quick``.

NOTE: asv runs every benchmark, once per parameter combination, in a process
of its own. Each loads the kernels it uses from cbrtgrad's on-disk cache
(``docs/cache.md``; in a fraction of a second once warm) or, cold or with
``CBRTGRAD_CACHE=0``, compiles them (about 4 to 7 s per cpu kernel on a busy
2-core machine, more for the parallel loops). ``asv.conf.json`` also asks
for asv's ``forkserver`` launch method: one server process imports this
package and loads or compiles the cpu kernels here, once, and each benchmark
runs in a fork of it. The parallel loops must not be started here: numba's
GNU OpenMP threading layer terminates a process that forks after using it
("fork() called from a process already using GNU OpenMP"), so each parallel
benchmark loads or compiles its own (see ``bench_backends.TimeParallel``).
Where fork is missing (Windows), run ``asv run --python=same --quick
--launch-method=spawn``. The start-up benchmarks (``bench_startup.py``)
start fresh interpreters of their own, with temporary cache folders.
"""

import importlib
import importlib.util
import os
import sys

import numpy as np

import cbrtgrad as cg

# Some benchmarks share their cases with the measuring code of the docs
# (tools/measuring: the numba loops, the start-up scripts), which is not in
# the wheel asv installs. The checkout's root goes at the END of sys.path: only
# ``tools`` is found there, and cbrtgrad still comes from the environment asv
# built for the commit it measures.
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _ROOT not in sys.path:
    sys.path.append(_ROOT)


def _prepare_fork_server() -> None:
    # Small arrays and the cpu backend named: from 10^6 elements the automatic
    # choice is the parallel backend, which must not start here (see above).
    x = np.array([8.0, -27.0])
    for dtype in (np.float32, np.float64):
        cg.cbrt(x.astype(dtype), backend="cpu")
        cg.cbrt_grad(np.ones(2, dtype), x.astype(dtype), backend="cpu")
        cg.cbrt_and_grad(x.astype(dtype), np.ones(2, dtype), backend="cpu")
    # The modules the backends' availability probes import (numba.cuda takes
    # 1 to 2 s), imported but not probed: a CUDA driver initialised here
    # would be unusable in the forks.
    modules = ["cbrtgrad.backends.accelerate", "cbrtgrad.backends.cuda"]
    if importlib.util.find_spec("numba_cuda") is not None:
        modules += ["numba.cuda", "cbrtgrad.kernels.cuda.primitives"]
    for name in modules:
        importlib.import_module(name)


# Only in the fork server (asv's benchmark.py runs it as ``run_server``): the
# discovery process and spawned benchmarks compile what they use themselves.
if sys.argv[1:2] == ["run_server"]:
    _prepare_fork_server()
