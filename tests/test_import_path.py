"""``import cbrtgrad`` loads the core only: no scipy, tqdm or matplotlib, no measuring module."""

import json
import subprocess
import sys

import pytest

MEASURING = [
    "cbrtgrad.benchmarking",
    "cbrtgrad.engine.bench",
    "cbrtgrad.plotting",
    "cbrtgrad.peers",
    "cbrtgrad._progress",
    "cbrtgrad._text",
    "cbrtgrad.verification.report",
    "cbrtgrad.verification.exhaustive",
]
HEAVY = ["scipy", "tqdm", "matplotlib", "mpmath", "jax", "dask"]


def _loaded_after(statement):
    # A fresh interpreter: this test session has imported everything already.
    code = f"import json, sys; {statement}; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(done.stdout))


@pytest.mark.parametrize("statement", ["import cbrtgrad", "import cbrtgrad.cli"])
def test_import_leaves_the_measuring_tools_out(statement):
    loaded = _loaded_after(statement)
    assert "cbrtgrad" in loaded
    assert not [m for m in MEASURING if m in loaded]
    assert not [m for m in HEAVY if m in loaded]


def test_the_subcommand_that_measures_imports_them():
    loaded = _loaded_after("from cbrtgrad import benchmarking")
    assert {"cbrtgrad.benchmarking", "cbrtgrad._text", "scipy"} <= loaded
