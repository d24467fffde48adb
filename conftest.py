"""The on-disk kernel cache of a test run (tests and the doctests in ``cbrtgrad/``).

A temporary folder shared by the run's processes (subprocesses inherit the
variable) and removed at the end, so a test run never writes the user's cache
(docs/cache.md). Set ``CBRTGRAD_CACHE_DIR`` to keep one between runs: the
kernels then load in well under a second instead of compiling.
"""

import os
import shutil
import tempfile

import pytest

_RUN_CACHE = None
if not os.environ.get("CBRTGRAD_CACHE_DIR"):
    _RUN_CACHE = tempfile.mkdtemp(prefix="cbrtgrad-test-cache-")
    os.environ["CBRTGRAD_CACHE_DIR"] = _RUN_CACHE


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _RUN_CACHE is not None:
        shutil.rmtree(_RUN_CACHE, ignore_errors=True)
