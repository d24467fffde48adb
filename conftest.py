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

# cbrtgrad.jax imports jax, an extra (pip install 'cbrtgrad[jax]'): without jax its
# doctests are not collected (tests/test_jax_bridge.py skips itself).
collect_ignore = [] if importlib.util.find_spec("jax") else ["cbrtgrad/jax"]

_RUN_CACHE = None
if not os.environ.get("CBRTGRAD_CACHE_DIR"):
    _RUN_CACHE = tempfile.mkdtemp(prefix="cbrtgrad-test-cache-")
    os.environ["CBRTGRAD_CACHE_DIR"] = _RUN_CACHE


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _RUN_CACHE is not None:
        shutil.rmtree(_RUN_CACHE, ignore_errors=True)
