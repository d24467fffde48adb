"""Compile policy and environment flags: vectorised loops, fast-math warning."""

import os
import re
import subprocess
import sys

import pytest

from cbrtgrad import _compile, _config


def test_ufunc_loops_are_vectorised():
    # The loop numba wraps around the scalar formula must use SIMD registers
    # (ymm or zmm); a scalar libm-style loop would be 5x slower.
    code = "import numpy as np\nfrom cbrtgrad.kernels.cpu import ufuncs\nu = ufuncs()\n"
    env = dict(os.environ, NUMBA_DUMP_ASSEMBLY="1")
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    sections = re.split(r"-{5,}ASSEMBLY ", done.stdout)
    wrappers = [s for s in sections if s.startswith("ufunc_wrapper")]
    # Two loops (float32, float64) for the forward, then two for the gradient.
    assert len(wrappers) == 4
    for text in wrappers:
        assert re.search(r"%[yz]mm\d+", text), "ufunc loop is not vectorised"
    for text in wrappers[:2]:
        # The exact fma of the error-free transformations, as vector instructions.
        assert re.search(r"vf(n)?m(add|sub)\d+[ps]d\s+%[yz]mm", text)


def test_fastmath_flag_warns(monkeypatch):
    monkeypatch.setenv("CBRTGRAD_FASTMATH", "1")
    _config.settings.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="fast-math"):
            options = _compile.cpu_options()
        assert options["fastmath"] is True
    finally:
        monkeypatch.delenv("CBRTGRAD_FASTMATH")
        _config.settings.cache_clear()
    assert _compile.cpu_options()["fastmath"] is False


@pytest.mark.parametrize("raw", ["many", "-5", "1.5"])
def test_bad_parallel_min_is_a_value_error(monkeypatch, raw):
    monkeypatch.setenv("CBRTGRAD_PARALLEL_MIN", raw)
    _config.settings.cache_clear()
    try:
        with pytest.raises(ValueError, match="CBRTGRAD_PARALLEL_MIN"):
            _config.settings()
    finally:
        monkeypatch.delenv("CBRTGRAD_PARALLEL_MIN")
        _config.settings.cache_clear()
