"""The fused forward-and-backward kernel."""

import numpy as np
import pytest

import cbrtgrad as cg
from cbrtgrad.verification import cases


@pytest.mark.parametrize("dtype", cases.DTYPES)
@pytest.mark.parametrize("n", [0, 1, 7, 70_001])
def test_same_bits_as_separate_calls(dtype, n):
    x = cases.random_inputs(np.dtype(dtype), n, seed=3)
    x = x[np.abs(x) > 1e-20]
    g = np.linspace(-2, 2, x.size).astype(dtype)
    with np.errstate(all="ignore"):
        y, dx = cg.cbrt_and_grad(x, g)
        want_dx = cg.cbrt_grad(g, cg.cbrt(x))
    assert np.array_equal(y, cg.cbrt(x), equal_nan=True)
    assert np.array_equal(dx, want_dx, equal_nan=True)


def test_broadcast_and_views():
    x = np.arange(1.0, 13.0).reshape(3, 4)[:, ::-1]
    y, dx = cg.cbrt_and_grad(x, 2.0)
    np.testing.assert_array_equal(y, cg.cbrt(x))
    np.testing.assert_array_equal(dx, cg.cbrt_grad(2.0, cg.cbrt(x)))


def test_out_pair():
    x = np.array([8.0, 27.0])
    y, dx = np.empty(2), np.empty(2)
    got = cg.cbrt_and_grad(x, np.ones(2), out=(y, dx))
    assert got[0] is y and got[1] is dx
    np.testing.assert_array_equal(y, [2.0, 3.0])


@pytest.mark.parametrize(
    ("out", "error", "match"),
    [
        (np.empty(2), TypeError, "tuple"),
        ((np.empty(2),), TypeError, "tuple"),
        ((np.empty(3), np.empty(2)), ValueError, "shape"),
        ((np.empty(2, np.float32), np.empty(2)), TypeError, "dtype"),
        (([0.0, 0.0], np.empty(2)), TypeError, "ndarray"),
    ],
)
def test_bad_out(out, error, match):
    with pytest.raises(error, match=match):
        cg.cbrt_and_grad(np.array([8.0, 27.0]), np.ones(2), out=out)


def test_shape_mismatch():
    with pytest.raises(ValueError):
        cg.cbrt_and_grad(np.ones(3), np.ones(4))
