"""The registry's core behaviour with the always-available backends."""

import numpy as np
import pytest

import cbrtgrad as cg
from cbrtgrad import _config, backends


def test_unknown_backend_lists_known_ones():
    with pytest.raises(ValueError, match="known backends: .*cpu"):
        cg.cbrt(np.ones(2), backend="fortran")
    with pytest.raises(TypeError, match="backend must be a str"):
        cg.cbrt(np.ones(2), backend=3)


def test_explicit_and_context_backends_agree_on_exact_values():
    x = np.array([8.0, -27.0])
    np.testing.assert_array_equal(cg.cbrt(x, backend="numpy"), [2.0, -3.0])
    with backends.use_backend("numpy") as chosen:
        assert chosen is not None and chosen.name == "numpy"
        np.testing.assert_array_equal(cg.cbrt(x), [2.0, -3.0])


def test_environment_variable(monkeypatch):
    monkeypatch.setenv("CBRTGRAD_BACKEND", "nonsense")
    _config.settings.cache_clear()
    try:
        with pytest.raises(ValueError, match="unknown backend 'nonsense'"):
            cg.cbrt(np.ones(1))
    finally:
        monkeypatch.delenv("CBRTGRAD_BACKEND")
        _config.settings.cache_clear()


def test_numpy_backend_matches_np_cbrt():
    x = np.linspace(-5, 5, 11)
    np.testing.assert_array_equal(cg.cbrt(x, backend="numpy"), np.cbrt(x))
