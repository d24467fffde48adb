"""cbrtgrad's asv suite (asv 0.6): ``cd asv_benches && asv run --python=same --quick``.

NOTE: asv runs every benchmark, once per parameter combination, in a process
of its own, and numba compiles cbrtgrad's kernels again in each one (they are
built with ``cache=False``, see ``cbrtgrad/_compile.py``): 3 to 5 s for the
cpu kernels on a busy 2-core machine, 20 to 30 s for the parallel loops.
``asv.conf.json`` therefore asks for asv's ``forkserver`` launch method: one
server process imports this package, which compiles the cpu kernels here,
once, and each benchmark runs in a fork of it. The parallel loops must not be
compiled here: numba's GNU OpenMP threading layer terminates a process that
forks after using it ("fork() called from a process already using GNU
OpenMP"), so each parallel benchmark compiles its own (see
``bench_backends.TimeParallel``). Where fork is missing (Windows), run
``asv run --python=same --quick --launch-method=spawn``.
"""

import importlib
import importlib.util
import sys

import numpy as np

import cbrtgrad as cg


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
        modules += ["numba.cuda", "cbrtgrad.kernels.cuda_primitives"]
    for name in modules:
        importlib.import_module(name)


# Only in the fork server (asv's benchmark.py runs it as ``run_server``): the
# discovery process and spawned benchmarks compile what they use themselves.
if sys.argv[1:2] == ["run_server"]:
    _prepare_fork_server()
