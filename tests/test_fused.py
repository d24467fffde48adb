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


@pytest.mark.parametrize("backend", ["cpu", "parallel", "numpy"])
@pytest.mark.parametrize("dtype", cases.DTYPES)
def test_fortran_ordered_inputs_give_fortran_ordered_outputs(backend, dtype):
    # As numpy's ufuncs (order="K") and the two calls apart: a transposed
    # pair gives transposed results, which the kernels run over in one flat
    # pass in memory order, with the same bits. NOTE: C-ordered outputs made
    # strided passes, 2 to 5 times the two calls' time.
    bits = cases.random_inputs(np.dtype(dtype), 300 * 70, seed=11)
    x = bits.reshape(300, 70).T
    g = np.linspace(-3, 3, x.size).astype(dtype).reshape(300, 70).T
    with np.errstate(all="ignore"):
        y, dx = cg.cbrt_and_grad(x, g, backend=backend)
        want_y = cg.cbrt(x, backend=backend)
        want_dx = cg.cbrt_grad(g, want_y, backend=backend)
    assert want_y.flags.f_contiguous and not want_y.flags.c_contiguous
    for got, want in ((y, want_y), (dx, want_dx)):
        assert got.flags.f_contiguous and not got.flags.c_contiguous
        assert np.array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))
    # A C-ordered out= pair is written as given.
    y_c, dx_c = np.empty(x.shape, dtype), np.empty(x.shape, dtype)
    with np.errstate(all="ignore"):
        cg.cbrt_and_grad(x, g, out=(y_c, dx_c), backend=backend)
    assert np.array_equal(y_c.view(f"u{y.itemsize}"), y.view(f"u{y.itemsize}"))
    assert np.array_equal(dx_c.view(f"u{y.itemsize}"), dx.view(f"u{y.itemsize}"))


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


@pytest.mark.parametrize("bad", ["shape", "dtype", "read-only"])
def test_a_bad_dx_leaves_y_unwritten(bad):
    # The small calls write y, then dx, by two ufunc calls: an out pair they
    # cannot take whole goes the checked way, which refuses it before writing.
    y = np.full(2, 7.0)
    dx = {"shape": np.empty(3), "dtype": np.empty(2, np.float32), "read-only": np.empty(2)}[bad]
    dx.flags.writeable = bad != "read-only"
    with pytest.raises((TypeError, ValueError)):
        cg.cbrt_and_grad(np.array([8.0, 27.0]), np.ones(2), out=(y, dx))
    np.testing.assert_array_equal(y, [7.0, 7.0])


def test_shape_mismatch():
    with pytest.raises(ValueError):
        cg.cbrt_and_grad(np.ones(3), np.ones(4))
