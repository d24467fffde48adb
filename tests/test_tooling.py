"""The asv suite runs in this environment, and the package is ruff and mypy clean."""

import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _run(*argv, cwd=ROOT, timeout=900):
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.mark.skipif(shutil.which("asv") is None, reason="asv is not installed")
def test_asv_suite_runs_once():
    bench_dir = ROOT / "asv_benches"
    _run("asv", "machine", "--yes", cwd=bench_dir)
    check = _run("asv", "check", "--python=same", cwd=bench_dir)
    assert check.returncode == 0, check.stdout + check.stderr
    run = _run(
        "asv",
        "run",
        "--python=same",
        "--quick",
        "--show-stderr",
        "--dry-run",
        # The kernel suite runs; every suite is imported and checked above.
        "--bench",
        "bench_kernels",
        cwd=bench_dir,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "failed" not in run.stdout.lower(), run.stdout


def test_ruff_clean():
    done = _run(sys.executable, "-m", "ruff", "check", "cbrtgrad", "tests", "asv_benches", "tools")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_clean():
    done = _run(sys.executable, "-m", "mypy", "cbrtgrad")
    assert done.returncode == 0, done.stdout + done.stderr
