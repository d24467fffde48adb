"""A gradient of one element beside device arrays: broadcast, as numpy and CuPy broadcast it.

``cbrt_grad(1.0, y)`` and ``cbrt_and_grad(x, g)`` with ``g`` a host scalar (as
CuPy takes Python and numpy scalars beside its arrays) or a device array of
one element: the cuda kernels read ``g`` once per thread instead of a
materialised array of ``y``'s size. Under numba's simulator here, against the
cpu backend bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest

import cbrtgrad
from cbrtgrad.backends import get_backend

from ._cases import cases, same_bits

cuda = pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
gpu = get_backend("cuda")

# The simulator's threads do not inherit np.errstate: its scalar warnings at
# y = 0 and on overflow are the IEEE cases the cpu kernels flag too.
pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")


def _scalars(dtype: type) -> list:
    one = np.ones((), dtype)
    return [
        -1.5,  # a Python float: weak, y's dtype decides
        dtype(2.5),  # a numpy scalar of y's dtype
        np.array(-0.75, dtype),  # a 0-d host array
        cuda.to_device(one * 3),  # device arrays of one element, 0-d and 1-d
        cuda.to_device((one * -2).reshape(1)),
        np.float32(np.inf),
        np.float32(np.nan) if dtype is np.float32 else np.float32(0.0),
    ]
    # NOTE: not a float64 nan g: where y is a nan of the other sign, the cpu
    # backend's float64 gradient gives g's nan in its vector loop and y's in
    # its scalar tail (which operand of a product LLVM puts first), so the
    # reference itself depends on the position; the same with full arrays.


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_g_gives_the_bits_of_the_broadcast_host_call(dtype):
    x = cases(dtype, 150).reshape(-1, 1)[: 150 // 2 * 2].reshape(-1, 2)  # 2-d
    with np.errstate(all="ignore"):
        y_host = cbrtgrad.cbrt(x, backend="cpu")
    y = cuda.to_device(y_host)
    xd = cuda.to_device(x)
    for g in _scalars(dtype):
        g_host = g.copy_to_host() if hasattr(g, "copy_to_host") else g
        with np.errstate(all="ignore"):
            want = cbrtgrad.cbrt_grad(g_host, y_host, backend="cpu")
            want_y, want_dx = cbrtgrad.cbrt_and_grad(x, g_host, backend="cpu")
        got = cbrtgrad.cbrt_grad(g, y)
        assert got.shape == y_host.shape and same_bits(got.copy_to_host(), want), repr(g)
        got_y, got_dx = cbrtgrad.cbrt_and_grad(xd, g)
        assert same_bits(got_y.copy_to_host(), want_y)
        assert same_bits(got_dx.copy_to_host(), want_dx), repr(g)


def test_the_dtype_rules_of_a_host_scalar_g():
    # NEP 50, as for host arrays: a Python float leaves float32 y float32, a
    # float64 numpy scalar makes the computation float64.
    y = cuda.to_device(np.array([1.0, 2.0], np.float32))
    assert cbrtgrad.cbrt_grad(1.0, y).dtype == np.float32
    assert cbrtgrad.cbrt_grad(np.float64(1.0), y).dtype == np.float64
    assert gpu.cube_root_grad(1, y).dtype == np.float32  # the backend on its own too


def test_one_g_into_out_and_in_place():
    y_host = np.array([1.0, -2.0, 0.5, 8.0])
    with np.errstate(all="ignore"):
        want = cbrtgrad.cbrt_grad(3.0, y_host)
    y = cuda.to_device(y_host)
    out = cuda.device_array_like(y_host)
    assert gpu.cube_root_grad(3.0, y, out=out) is out
    assert same_bits(out.copy_to_host(), want)
    assert gpu.cube_root_grad(3.0, y, out=y) is y  # y read before it is written
    assert same_bits(y.copy_to_host(), want)


def test_an_empty_y_with_one_g():
    y = cuda.to_device(np.zeros((0, 3)))
    assert cbrtgrad.cbrt_grad(1.0, y).shape == (0, 3)


@pytest.mark.parametrize(
    ("g_shape", "y_shape"),
    [((2,), (4,)), ((1, 1), (3,)), ((3,), (1,)), ((4,), ())],
)
def test_any_other_broadcast_is_a_clear_error(g_shape, y_shape):
    # Only a g of one element that leaves y's shape the result's: anything
    # else numpy would broadcast to another shape, or not at all.
    g = cuda.to_device(np.ones(g_shape))
    y = cuda.to_device(np.ones(y_shape))
    with pytest.raises(ValueError, match="broadcasts only a g of one element"):
        gpu.cube_root_grad(g, y)


def test_a_host_g_of_several_elements_is_still_refused():
    y = cuda.to_device(np.ones(3))
    with pytest.raises(TypeError, match="g is a host ndarray"):
        gpu.cube_root_grad(np.ones(3), y)
    with pytest.raises(TypeError, match="cbrtgrad: g"):
        gpu.cube_root_grad(1 + 2j, y)
