"""Fast paths of the backends: a broadcast g as a scalar, plain layouts direct; same bits."""

import numpy as np
import pytest

from cbrtgrad.backends import _layout, _registry
from cbrtgrad.verification import cases


def _y(dtype: np.dtype, n: int) -> np.ndarray:
    special = cases.special_values(dtype)
    values = cases.random_inputs(dtype, n - special.size)
    return np.concatenate([special, values]).astype(dtype)


@pytest.mark.parametrize("backend", ["cpu", "parallel"])
@pytest.mark.parametrize("dtype", cases.DTYPES)
@pytest.mark.parametrize("value", [1.0, -2.5, 0.0, -0.0, np.inf, np.nan, 3e-30])
def test_broadcast_gradient_matches_the_array_path_bit_for_bit(backend, dtype, value):
    dtype = np.dtype(dtype)
    y = _y(dtype, _layout.CONSTANT_MIN + 1234)
    g = np.broadcast_to(dtype.type(value), y.shape)
    assert _layout.constant_operand(g, y, None, True) is not None
    b = _registry.get_backend(backend)
    with np.errstate(all="ignore"):
        fast = b.cube_root_grad(g, y)
        reference = b.cube_root_grad(np.ascontiguousarray(g), y)
    assert fast.dtype == dtype and fast.shape == y.shape
    bits = np.int32 if dtype == np.float32 else np.int64
    assert np.array_equal(fast.view(bits), reference.view(bits))


@pytest.mark.parametrize("dtype", cases.DTYPES)
def test_broadcast_gradient_into_out_matches_the_array_path_bit_for_bit(dtype):
    dtype = np.dtype(dtype)
    b = _registry.get_backend("parallel")
    y = _y(dtype, _layout.CONSTANT_MIN + 1234)
    g = np.broadcast_to(dtype.type(-2.5), y.shape)
    with np.errstate(all="ignore"):
        reference = b.cube_root_grad(np.ascontiguousarray(g), y)
        out = np.full(y.shape, 7, dtype)
        assert b.cube_root_grad(g, y, out) is out
        in_place = y.copy()
        assert b.cube_root_grad(g, in_place, in_place) is in_place
        # g a broadcast of out's own first element: read before it is written.
        own = np.full(y.shape, -2.5, dtype)
        b.cube_root_grad(np.broadcast_to(own[:1], y.shape), y, own)
    bits = np.int32 if dtype == np.float32 else np.int64
    for got in (out, in_place, own):
        assert np.array_equal(got.view(bits), reference.view(bits))


def test_broadcast_gradient_keeps_the_dtype_asked_for():
    b = _registry.get_backend("parallel")
    y = np.ones(_layout.CONSTANT_MIN, np.float32)
    g = np.broadcast_to(np.float32(3.0), y.shape)
    wide = b.cube_root_grad(g, y, dtype=np.float64)
    assert wide.dtype == np.float64 and np.all(wide == 1.0)


def test_constant_path_is_only_taken_where_it_applies():
    y = np.ones(_layout.CONSTANT_MIN)
    g = np.broadcast_to(1.0, y.shape)
    take = _layout.constant_operand
    assert take(g, y, None, True) == 1.0
    assert take(g, y, np.empty_like(y), True) == 1.0  # an out= like y
    assert take(g, y, y, True) == 1.0  # in place
    flat = np.ones(y.size + 1)
    assert take(g, flat[1:], flat[:-1], True) is None  # out= overlapping y in part
    assert take(g, y, np.empty(y.shape, np.float32), True) is None  # out= of another dtype
    assert take(g, y, np.empty((2, y.size))[:, 0], True) is None  # out= strided
    assert take(g, y, None, True, np.dtype(np.float32)) is None  # dtype= another
    assert take(g, y, None, np.ones(y.shape, bool)) is None  # where= given
    assert take(g[:-1], y[:-1], None, True) is None  # too small
    assert take(g.astype(np.float32), y, None, True) is None  # mixed dtypes
    assert take(np.ones(y.shape), y, None, True) is None  # not a broadcast
    assert take(g, y[::-1], None, True) is None  # y not contiguous
    readonly = y.copy()
    readonly.flags.writeable = False
    assert take(g, readonly, None, True) is None
    big = np.ones((4, _layout.CONSTANT_MIN))
    assert take(np.broadcast_to(2.0, big.shape), big, None, True) == 2.0


@pytest.mark.parametrize("backend", ["cpu", "parallel"])
def test_engine_sum_gradient_equals_the_kernel_on_ones(backend):
    import cbrtgrad as cg

    data = cases.random_inputs(np.dtype(np.float32), 70_000)
    x = cg.Tensor(data, requires_grad=True)
    (cg.cbrt(x, backend=backend).sum() * 3.0).backward()
    y = cg.cbrt(data, backend="cpu")
    expected = cg.cbrt_grad(np.full(data.shape, 3.0, np.float32), y, backend="cpu")
    assert np.array_equal(x.grad.view(np.int32), expected.view(np.int32))


def test_direct_operands_only_for_plain_layouts():
    f64 = np.dtype(np.float64)
    x = np.ones((3, 4))
    take = _layout.direct_operands
    flats, result = take((x,), f64, None, True)
    assert flats[0].shape == (12,) and result.shape == (3, 4)
    assert take((x,), f64, x, True)[1] is x  # in place
    assert take((x,), np.dtype(np.float32), None, True) is None  # another dtype
    assert take((x[:, ::2],), f64, None, True) is None  # strided
    assert take((x, np.ones(4)), f64, None, True) is None  # broadcasting
    assert take((x,), f64, None, np.ones(x.shape, bool)) is None  # where=
    assert take((np.float64(2.0),), f64, None, True) is None  # 0-d
    flat = np.ones(10)
    assert take((flat[1:],), f64, flat[:-1], True) is None  # partial overlap
    assert take((x,), f64, np.empty((4, 3)), True) is None  # out of another shape


@pytest.mark.parametrize("dtype", cases.DTYPES)
def test_parallel_in_place_and_overlapping_out_match_cpu(dtype):
    data = cases.random_inputs(np.dtype(dtype), 5000)
    expected = _registry.get_backend("cpu").cube_root(data)
    b = _registry.get_backend("parallel")
    inplace = data.copy()
    assert b.cube_root(inplace, out=inplace) is inplace
    assert np.array_equal(inplace, expected)
    shifted = data.copy()
    b.cube_root(shifted[1:], out=shifted[:-1])  # as if from a copy of the input
    assert np.array_equal(shifted[:-1], expected[1:])
