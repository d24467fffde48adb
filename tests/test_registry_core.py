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
    # NOTE: the numpy backend's bits are np.cbrt's, the platform libm's without
    # SVML (glibc: cbrt(27) = 3.0000000000000004): it is held to its own
    # explicit result; exact values are asked of cbrtgrad's backend only.
    x = np.array([8.0, -27.0, 2.0])
    explicit = cg.cbrt(x, backend="numpy")
    with backends.use_backend("numpy") as chosen:
        assert chosen is not None and chosen.name == "numpy"
        assert cg.cbrt(x).tobytes() == explicit.tobytes()
    np.testing.assert_array_equal(cg.cbrt(x[:2], backend="cpu"), [2.0, -3.0])
    with backends.use_backend("cpu") as chosen:
        assert chosen is not None and chosen.name == "cpu"
        np.testing.assert_array_equal(cg.cbrt(x[:2]), [2.0, -3.0])


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
