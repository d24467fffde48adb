"""The fuzz target runs for a bounded time in CI; inputs it (or we) found replay as tests."""

from __future__ import annotations

import base64
import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SECONDS = 15


def _target():
    spec = importlib.util.spec_from_file_location("fuzz_api", HERE / "fuzz_api.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: Inputs worth keeping: each decodes to a call that once crashed or hung,
#: or that reaches a rarely hit branch. Base64 of the raw bytes.
REGRESSIONS = {
    # Found by atheris before fused_outputs used np.broadcast_to: cbrt_and_grad
    # on the parallel backend leaked numpy's broadcast_arrays FutureWarning.
    "broadcast-future-warning": "Cl8qX11dCl8qPV1dXTBpXWldaV0waT1dXV0waV0waT0=",
    # compiles the parallel loops (the slowest input libFuzzer reported).
    "slow-unit": "//8AAAAAAGQAZFJtWw==",
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_regression_inputs(name):
    _target().one_input(base64.b64decode(REGRESSIONS[name]))


@pytest.mark.parametrize("backend", ["cpu", "parallel", "numpy"])
def test_fused_broadcast_gives_no_future_warning(backend):
    import warnings

    import numpy as np

    import cbrtgrad as cg

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y, dx = cg.cbrt_and_grad(np.array([8.0, 27.0]), 3.0, backend=backend)
    assert y.shape == dx.shape == (2,)


def test_target_rejects_an_undocumented_outcome(monkeypatch):
    fuzz = _target()

    def broken(src):
        raise NotImplementedError("not a documented outcome")

    monkeypatch.setattr(fuzz, "call", broken)
    with pytest.raises(NotImplementedError):
        fuzz.one_input(b"\x00")


@pytest.mark.slow
def test_fuzz_for_a_bounded_time(tmp_path):
    """atheris where it installs (coverage-guided), else hypothesis' random bytes."""
    if importlib.util.find_spec("atheris") is not None:
        argv = [f"-max_total_time={SECONDS}", f"-artifact_prefix={tmp_path}/", "-rss_limit_mb=4096"]
    else:
        argv = ["--hypothesis", str(SECONDS)]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(
        [sys.executable, str(HERE / "fuzz_api.py"), *argv],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=SECONDS * 6,
    )
    crashes = [p.name for p in tmp_path.iterdir() if p.name.startswith(("crash-", "oom-"))]
    assert done.returncode == 0 and not crashes, (crashes, done.stdout[-3000:], done.stderr[-3000:])
