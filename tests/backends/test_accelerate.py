"""The vForce binding, exercised for real against a compiled stand-in library."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special

import cbrtgrad
from cbrtgrad import _config
from cbrtgrad.backends import get_backend
from cbrtgrad.backends.accelerate import MAX_CHUNK, AccelerateBackend

from ._cases import DTYPES, cases, same_bits

# The stand-in computes with libm: glibc's cbrtf is within 1 ulp and cbrt within
# 4 ulp (3.04 measured); real vForce publishes no bound (cbrtgrad verify measures it).
ULP_BOUND = {np.dtype(np.float32): 1.0, np.dtype(np.float64): 4.0}


def ulp_error(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    finite = np.isfinite(exact) & (exact != 0)
    spacing = np.spacing(np.abs(exact[finite]).astype(exact.dtype))
    return np.abs(got[finite].astype(np.float64) - exact[finite].astype(np.float64)) / spacing


@pytest.fixture
def accel(vforce_library):
    vforce_library.reset()
    return AccelerateBackend(path=str(vforce_library.path))


@pytest.mark.parametrize("dtype", DTYPES)
def test_case_table_within_ulp_of_scipy(accel, dtype):
    x = cases(dtype, 5000)
    y = accel.cube_root(x)
    assert y.dtype == dtype
    exact = scipy.special.cbrt(x.astype(np.float64)).astype(dtype)
    assert ulp_error(y, exact).max() <= ULP_BOUND[np.dtype(dtype)]
    special = ~np.isfinite(x) | (x == 0)
    # ±0 and ±inf kept with their sign; nan stays nan (libm may change its payload).
    assert np.array_equal(y[special], x[special], equal_nan=True)
    assert (np.signbit(y[special]) == np.signbit(x[special]))[~np.isnan(x[special])].all()
    with np.errstate(all="ignore"):
        g = np.ones_like(x)
        assert same_bits(accel.cube_root_grad(g, y), cpu_grad(g, y))
        yf, dxf = accel.cube_root_and_grad(x, g)
        assert same_bits(yf, y) and same_bits(dxf, cpu_grad(g, y))


def cpu_grad(g, y):
    return get_backend("cpu").cube_root_grad(g, y)


def test_chunking_passes_every_element_once(accel, vforce_library):
    accel.chunk_size = 7
    x = np.linspace(-100.0, 100.0, 50).astype(np.float32)
    y = accel.cube_root(x)
    assert vforce_library.calls() == 8  # ceil(50 / 7)
    assert vforce_library.largest() == 7
    assert same_bits(y, AccelerateBackend(path=str(vforce_library.path)).cube_root(x))
    assert np.allclose(y, np.cbrt(x), rtol=2e-7)


def test_dtype_dispatch_out_and_layouts(monkeypatch, vforce_library):
    # Through the public function, which decides the dtype, the casts and
    # out= for every backend (the backend trusts it).
    monkeypatch.setenv("CBRTGRAD_ACCELERATE", str(vforce_library.path))
    _config.settings.cache_clear()
    try:

        def accel(x, **kwargs):
            return cbrtgrad.cbrt(x, backend="accelerate", **kwargs)

        assert accel(np.float16(8)).dtype == np.float32
        ints = accel(np.array([1, 8, 27]))
        assert ints.dtype == np.float64 and np.allclose(ints, [1.0, 2.0, 3.0], rtol=1e-15)
        x = np.linspace(-9.0, 9.0, 40).reshape(5, 8)
        out = np.zeros((5, 8))
        assert accel(x[:, ::2].T.copy(), out=out[:, ::2].T) is not None
        assert np.allclose(out[:, ::2], np.cbrt(x[:, ::2]))
        assert (out[:, 1::2] == 0).all()
        assert np.isclose(accel(np.float64(-27.0)), -3.0, rtol=1e-15)
        assert accel(x, dtype=np.float32).dtype == np.float32
        mask = x > 0
        masked = accel(x, out=np.full_like(x, 7.0), where=mask)
        assert np.allclose(masked[mask], np.cbrt(x[mask])) and (masked[~mask] == 7.0).all()
        with pytest.raises(TypeError, match="complex128"):
            accel(np.ones(2, complex))
        with pytest.raises(TypeError, match="dtype must be float16, float32 or float64"):
            accel(np.ones(2), dtype=np.int32)
    finally:
        monkeypatch.undo()
        _config.settings.cache_clear()


def test_through_the_registry_and_env(monkeypatch, vforce_library):
    monkeypatch.setenv("CBRTGRAD_ACCELERATE", str(vforce_library.path))
    _config.settings.cache_clear()
    try:
        assert get_backend("accelerate").availability().available
        y = cbrtgrad.cbrt(np.array([8.0, -64.0], np.float32), backend="accelerate")
        assert y.tolist() == [2.0, -4.0] and y.dtype == np.float32
    finally:
        monkeypatch.undo()
        _config.settings.cache_clear()


def test_missing_library_and_bad_chunk_size(tmp_path):
    missing = AccelerateBackend(path=str(tmp_path / "nope.dylib"))
    status = missing.availability()
    assert not status.available and "cannot load vvcbrtf/vvcbrt" in status.reason
    with pytest.raises(RuntimeError, match="unavailable: cannot load"):
        missing.cube_root(np.ones(2))
    with pytest.raises(ValueError, match="chunk_size"):
        AccelerateBackend(chunk_size=0)
    with pytest.raises(ValueError, match="chunk_size"):
        AccelerateBackend(chunk_size=MAX_CHUNK + 1)
