"""The on-disk kernel cache of a test run (tests and the doctests in ``cbrtgrad/``).

A temporary folder shared by the run's processes (subprocesses inherit the
variable) and removed at the end, so a test run never writes the user's cache
(docs/cache.md). Set ``CBRTGRAD_CACHE_DIR`` to keep one between runs: the
kernels then load in well under a second instead of compiling.

Without jax installed, ``cbrtgrad/jax`` (the JAX bridge, an extra) is left out
of the doctest collection.
"""

import importlib.util
import os
import shutil
import tempfile

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
