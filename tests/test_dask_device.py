"""dask arrays of device chunks (CuPy on a GPU; numba's simulated device arrays in CI).

The results' ``_meta`` is of the chunks' library, so dask assembles them with
that library (a CuPy result stays on the GPU), and every chunk is computed by
the cuda backend with the CPU's bits. NOTE: numba's CUDA simulator runs kernels
only from the main thread, hence the synchronous scheduler here.
"""

import numpy as np
import pytest

import cbrtgrad as cg
from cbrtgrad.arrays.kinds import is_device_array

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
cuda = pytest.importorskip("numba.cuda")

X = np.linspace(-30.0, 30.0, 24)
G = np.linspace(0.5, 3.0, 24)


def on_device_chunks(values, chunks=6):
    meta = cuda.to_device(np.empty(0, values.dtype))
    return da.from_array(values, chunks=chunks).map_blocks(
        cuda.to_device, dtype=values.dtype, meta=meta
    )


def device_blocks(result):
    blocks = dask.compute(*result.to_delayed().ravel(), scheduler="synchronous")
    assert all(is_device_array(b) for b in blocks)
    return np.concatenate([b.copy_to_host() for b in blocks])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cbrt_and_its_gradient_run_chunk_by_chunk_on_the_device(dtype):
    x, g = on_device_chunks(X.astype(dtype)), on_device_chunks(G.astype(dtype))
    y = cg.cbrt(x)
    assert is_device_array(y._meta) and y.dtype == dtype
    np.testing.assert_array_equal(device_blocks(y), cg.cbrt(X.astype(dtype)))
    dx = cg.cbrt_grad(g, y)
    assert is_device_array(dx._meta)
    expected = cg.cbrt_grad(G.astype(dtype), cg.cbrt(X.astype(dtype)))
    np.testing.assert_array_equal(device_blocks(dx), expected)
    y2, dx2 = cg.cbrt_and_grad(x, g)
    assert is_device_array(y2._meta) and is_device_array(dx2._meta)
    np.testing.assert_array_equal(device_blocks(dx2), expected)


def test_host_chunks_keep_a_numpy_meta():
    y = cg.cbrt(da.from_array(X, chunks=6))
    assert type(y._meta) is np.ndarray
