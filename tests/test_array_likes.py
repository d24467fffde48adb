"""Array-likes and ndarray subclasses are taken as numpy takes them, on every backend (issue 24)."""

from __future__ import annotations

import array

import numpy as np
import pytest

import cbrtgrad as cg

HOST = ("cpu", "numpy", "parallel")


class HasArray:
    """An object that is not an array but converts to one (``__array__``)."""

    def __init__(self, values):
        self.values = values

    def __array__(self, dtype=None, copy=None):
        return np.array(self.values, dtype=dtype)


class Sub(np.ndarray):
    """A subclass with no ufunc override: numpy wraps results back into it."""


ARRAY_LIKES = {
    "range": lambda: range(0, 28, 9),
    "memoryview": lambda: memoryview(np.array([0.0, 9.0, 18.0, 27.0])),
    "array.array": lambda: array.array("d", [0.0, 9.0, 18.0, 27.0]),
    "array.array int": lambda: array.array("i", [0, 9, 18, 27]),
    "__array__": lambda: HasArray([0.0, 9.0, 18.0, 27.0]),
    "tuple": lambda: (0.0, 9.0, 18.0, 27.0),
    "bytes buffer": lambda: memoryview(np.array([0, 9, 18, 27], np.int16).tobytes()).cast("h"),
}


@pytest.mark.parametrize("backend", HOST)
@pytest.mark.parametrize("kind", ARRAY_LIKES)
@pytest.mark.filterwarnings(
    "ignore:divide by zero:RuntimeWarning", "ignore:invalid value:RuntimeWarning"
)
def test_array_likes_as_numpy_takes_them(backend, kind):
    value = ARRAY_LIKES[kind]()
    expected_x = np.asarray(ARRAY_LIKES[kind]())
    expected = cg.cbrt(expected_x, backend=backend)
    np.testing.assert_array_equal(cg.cbrt(value, backend=backend), expected)
    g = ARRAY_LIKES[kind]()
    np.testing.assert_array_equal(
        cg.cbrt_grad(g, expected, backend=backend),
        cg.cbrt_grad(np.asarray(ARRAY_LIKES[kind]()), expected, backend=backend),
    )
    y, dx = cg.cbrt_and_grad(ARRAY_LIKES[kind](), ARRAY_LIKES[kind](), backend=backend)
    np.testing.assert_array_equal(y, expected)
    assert type(y) is np.ndarray and type(dx) is np.ndarray


def _subclasses():
    return {
        "matrix": np.array([[8.0, 27.0], [64.0, 125.0]]).view(np.matrix),
        "user subclass": np.array([8.0, 27.0, 64.0]).view(Sub),
        "memmap-like subclass 0-d": np.array(8.0).view(Sub),
    }


@pytest.mark.parametrize("backend", HOST)
@pytest.mark.parametrize("name", ["matrix", "user subclass", "memmap-like subclass 0-d"])
def test_subclasses_keep_their_type_as_with_a_numpy_ufunc(backend, name):
    x = _subclasses()[name]
    plain = np.asarray(x)
    reference = np.cbrt(x)  # numpy's own rule for the result's type
    got = cg.cbrt(x, backend=backend)
    assert type(got) is type(reference)
    np.testing.assert_allclose(np.asarray(got), np.asarray(cg.cbrt(plain, backend=backend)))
    grad = cg.cbrt_grad(x, x, backend=backend)
    assert type(grad) is type(np.divide(x, x))
    y, dx = cg.cbrt_and_grad(x, x, backend=backend)
    assert type(y) is type(reference) and type(dx) is type(reference)
    out = np.empty_like(plain)
    assert cg.cbrt(x, out=out, backend=backend) is out


@pytest.mark.parametrize("backend", HOST)
def test_masked_arrays_keep_their_mask(backend):
    m = np.ma.array([8.0, -27.0, 64.0], mask=[False, True, False])
    y = cg.cbrt(m, backend=backend)
    assert isinstance(y, np.ma.MaskedArray)
    np.testing.assert_array_equal(y.mask, m.mask)
    np.testing.assert_array_equal(y.compressed(), [2.0, 4.0])
    dx = cg.cbrt_grad(np.ma.array([1.0, 1.0, 1.0], mask=[True, False, False]), y, backend=backend)
    np.testing.assert_array_equal(dx.mask, [True, True, False])
    y2, dx2 = cg.cbrt_and_grad(m, np.ones(3), backend=backend)
    np.testing.assert_array_equal(y2.mask, m.mask)
    np.testing.assert_array_equal(dx2.mask, m.mask)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_dask_chunks_of_array_likes():
    da = pytest.importorskip("dask.array")
    x = da.from_array(np.array([0.0, 8.0, 27.0, 64.0]), chunks=2)
    np.testing.assert_array_equal(
        cg.cbrt_grad(range(4), cg.cbrt(x)).compute()[1:], [1 / 12, 2 / 27, 3 / 48]
    )


def test_engine_output_view_as_out_bumps_the_version():
    t = cg.Tensor(np.ones(3))
    before = t.version
    cg.cbrt(np.full(3, 8.0), out=t.data)
    np.testing.assert_array_equal(t.data, [2.0, 2.0, 2.0])
    assert t.version > before
