"""The on-disk kernel cache of a test run (tests and the doctests in ``cbrtgrad/``).

A temporary folder shared by the run's processes (subprocesses inherit the
variable) and removed at the end, so a test run never writes the user's cache
(docs/cache.md). Set ``CBRTGRAD_CACHE_DIR`` to keep one between runs: the
kernels then load in well under a second instead of compiling.

The bench code the suite runs measures for 1 ms, not the 10 ms of a figure:
the suite checks what it prints, never its speed.

Without jax installed, ``cbrtgrad/jax`` (the JAX bridge, an extra) is left out
of the doctest collection.
"""

import importlib.util
import os
import shutil
import tempfile
from typing import Any

import pytest

# The bridges import their framework, an extra (pip install 'cbrtgrad[jax]',
# 'cbrtgrad[torch]'): without it their doctests are not collected (their test
# files skip themselves).
collect_ignore = [] if importlib.util.find_spec("jax") else ["cbrtgrad/jax"]
if importlib.util.find_spec("torch") is None:
    collect_ignore += ["cbrtgrad/torch", "cbrtgrad/bench/pytorch.py"]

_RUN_CACHE = None
if not os.environ.get("CBRTGRAD_CACHE_DIR"):
    _RUN_CACHE = tempfile.mkdtemp(prefix="cbrtgrad-test-cache-")
    os.environ["CBRTGRAD_CACHE_DIR"] = _RUN_CACHE


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _RUN_CACHE is not None:
        shutil.rmtree(_RUN_CACHE, ignore_errors=True)


@pytest.fixture(autouse=True, scope="session")
def _short_bench_measurements() -> Any:
    # The suite runs the bench code for what it prints and returns, never for
    # its figures (speed is asv's and ``cbrtgrad bench``'s): its measurements
    # last 1 ms here, not the 10 ms a figure needs (cbrtgrad/cli/bench/timing.py).
    # tests/test_measuring.py checks the timer against whatever length is set.
    from cbrtgrad.cli.bench import timing

    kept = timing.MEASUREMENT_SECONDS
    timing.MEASUREMENT_SECONDS = 1e-3
    yield
    timing.MEASUREMENT_SECONDS = kept
