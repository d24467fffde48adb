"""The asv suite runs in this environment, and the package is ruff and mypy clean."""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _run(*argv, cwd=ROOT, timeout=900, env=None):
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def _asv(*argv, timeout=900):
    # NOTE: asv drops PYTHONPATH from the benchmark processes' environment and
    # takes ASV_PYTHONPATH instead: this tree's cbrtgrad, not whichever copy
    # is installed (an editable install of another checkout, say).
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, ASV_PYTHONPATH=pythonpath)
    return _run("asv", *argv, cwd=ROOT / "asv_benches", timeout=timeout, env=env)


def _asv_quick_run(*select):
    _asv("machine", "--yes")
    run = _asv("run", "--python=same", "--quick", "--show-stderr", "--dry-run", *select)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "failed" not in run.stdout.lower(), run.stdout
    return run.stdout


@pytest.mark.skipif(shutil.which("asv") is None, reason="asv is not installed")
def test_asv_suite_imports_and_a_benchmark_runs():
    # Every suite is imported and checked; one benchmark runs through asv's
    # fork server (asv.conf.json), the whole suite under the slow marker.
    check = _asv("check", "--python=same")
    assert check.returncode == 0, check.stdout + check.stderr
    out = _asv_quick_run("--bench", r"^bench_kernels\.Kernels\.time_forward\(")
    assert "bench_kernels.Kernels.time_forward" in out


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("asv") is None, reason="asv is not installed")
def test_asv_whole_suite_quick_run():
    # What the README gives: `cd asv_benches && asv run --python=same --quick`
    # (2 minutes on a 2-core machine).
    out = _asv_quick_run()
    # One result line per benchmark: every one that was discovered ran.
    total = int(re.search(r"Running (\d+) total benchmarks", out).group(1))
    names = re.findall(r"^\[ *[\d.]+%\] ··· (?:bench_|\.\.\.)", out, re.M)
    assert len(names) == total > 20, out


def test_ruff_clean():
    done = _run(sys.executable, "-m", "ruff", "check", "cbrtgrad", "tests", "asv_benches", "tools")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_clean():
    done = _run(sys.executable, "-m", "mypy", "cbrtgrad")
    assert done.returncode == 0, done.stdout + done.stderr
