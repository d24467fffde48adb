"""The whole asv suite, quick, in this environment (the nightly run: marked slow).

``.ci/run`` runs the smoke version on every submission (``.ci/asv_smoke``:
every benchmark imports, one runs).
"""

import os
import pathlib
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _asv(*argv, timeout=900):
    # NOTE: asv drops PYTHONPATH from the benchmark processes' environment and
    # takes ASV_PYTHONPATH instead: this tree's cbrtgrad, not whichever copy
    # is installed (an editable install of another checkout, say).
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, ASV_PYTHONPATH=pythonpath)
    return subprocess.run(
        ["asv", *argv], cwd=ROOT / "asv_benches", capture_output=True, text=True,
        timeout=timeout, env=env,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("asv") is None, reason="asv is not installed")
def test_asv_whole_suite_quick_run():
    # What the README gives: `cd asv_benches && asv run --python=same --quick`
    # (2 minutes on a 2-core machine).
    _asv("machine", "--yes")
    run = _asv("run", "--python=same", "--quick", "--show-stderr", "--dry-run")
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    assert "failed" not in out.lower(), out
    # One result line per benchmark: every one that was discovered ran.
    total = int(re.search(r"Running (\d+) total benchmarks", out).group(1))
    names = re.findall(r"^\[ *[\d.]+%\] ··· (?:bench_|\.\.\.)", out, re.M)
    assert len(names) == total > 20, out
