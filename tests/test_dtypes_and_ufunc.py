"""dtype rules and numpy ufunc behaviour of the public functions."""

import re

import numpy as np
import pytest

import cbrtgrad as cg


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [
        (np.float32, np.float32),
        (np.float64, np.float64),
        (np.float16, np.float32),
        (np.bool_, np.float64),
        (np.int8, np.float64),
        (np.int16, np.float64),
        (np.int32, np.float64),
        (np.int64, np.float64),
        (np.uint8, np.float64),
        (np.uint64, np.float64),
    ],
)
def test_result_dtype(dtype, expected):
    x = np.array([0, 1, 8], dtype=dtype)
    y = cg.cbrt(x)
    assert y.dtype == expected
    # The exact roots (0, 1, 2; bool's [0, 1, 1]), not a libm's.
    exact = {0: 0, 1: 1, 8: 2}
    np.testing.assert_array_equal(y, np.array([exact[int(v)] for v in x], expected))


@pytest.mark.parametrize(
    "bad",
    [
        np.array([1 + 1j]),
        np.array([1.0], dtype=object),
        np.array(["8"]),
        np.array([b"8"]),
        np.array(["2020-01-01"], dtype="datetime64[D]"),
        np.array([1], dtype="timedelta64[s]"),
        np.array([1.0], dtype=np.longdouble) if np.dtype(np.longdouble).itemsize > 8 else None,
    ],
)
def test_unsupported_dtypes_raise_type_error_naming_dtype(bad):
    if bad is None:
        pytest.skip("long double is float64 on this platform")
    with pytest.raises(TypeError, match=re.escape(str(bad.dtype))):
        cg.cbrt(bad)
    with pytest.raises(TypeError, match=re.escape(str(bad.dtype))):
        cg.cbrt_grad(bad, np.ones(1))
    with pytest.raises(TypeError, match=re.escape(str(bad.dtype))):
        cg.cbrt_and_grad(bad, np.ones(1))


def test_python_complex_scalar_raises():
    with pytest.raises(TypeError, match="complex128"):
        cg.cbrt(1j)


@pytest.mark.parametrize("bad", [int, "int32", np.complex64, "bogus"])
def test_dtype_keyword_must_be_float(bad):
    with pytest.raises(TypeError, match="dtype"):
        cg.cbrt(np.ones(2), dtype=bad)


def test_dtype_keyword():
    assert cg.cbrt(np.ones(2), dtype=np.float32).dtype == np.float32
    assert cg.cbrt(np.ones(2, np.float32), dtype=np.float16).dtype == np.float32
    assert cg.cbrt(np.ones(2, np.float32), dtype=np.float64).dtype == np.float64


def test_where_must_be_bool():
    with pytest.raises(TypeError, match="where"):
        cg.cbrt(np.ones(2), where=np.array([1, 0]))


def test_scalars_lists_and_0d():
    y = cg.cbrt(8.0)
    assert isinstance(y, np.float64) and y == 2.0
    assert cg.cbrt(-27) == -3.0
    np.testing.assert_array_equal(cg.cbrt([1.0, 8.0, -64.0]), [1.0, 2.0, -4.0])
    zero_d = cg.cbrt(np.array(27.0, np.float32))
    assert zero_d.dtype == np.float32 and zero_d == 3.0
    assert cg.cbrt(np.empty((0, 3))).shape == (0, 3)
    assert cg.cbrt_grad(np.empty(0), np.empty(0)).shape == (0,)


def _numpy_with_where(func, *args, where):
    # numpy warns that where= without out= leaves memory uninitialised.
    with pytest.warns(UserWarning, match="'where' used without 'out'"):
        return func(*args, where=where)


@pytest.mark.parametrize("backend", ["cpu", "numpy", "parallel"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize(
    ("x_shape", "where_shape"), [((), ()), ((), (2,)), ((2,), ()), ((2,), (2,))]
)
def test_where_without_out_gives_numpy_s_result_type(backend, dtype, x_shape, where_shape):
    # A 0-d result is a numpy scalar, as numpy's ufuncs give it (issue 38, item 4).
    x = np.full(x_shape, 8, dtype)
    where = np.ones(where_shape, bool)
    expected = _numpy_with_where(np.cbrt, x, where=where)
    got = cg.cbrt(x, where=where, backend=backend)
    assert isinstance(got, np.ndarray) == isinstance(expected, np.ndarray)
    assert np.shape(got) == np.shape(expected)
    np.testing.assert_array_equal(got, expected)
    g = np.full(x_shape, 12, dtype)
    expected = _numpy_with_where(np.divide, g, 3 * x.astype(float) ** (2 / 3), where=where)
    got = cg.cbrt_grad(g, np.full(x_shape, 2, dtype), where=where, backend=backend)
    assert isinstance(got, np.ndarray) == isinstance(expected, np.ndarray)
    assert np.shape(got) == np.shape(expected)
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_out_and_in_place():
    x = np.array([8.0, -1.0, 27.0])
    out = np.empty_like(x)
    assert cg.cbrt(x, out=out) is out
    np.testing.assert_array_equal(out, [2.0, -1.0, 3.0])
    assert cg.cbrt(x, out=x) is x
    np.testing.assert_array_equal(x, [2.0, -1.0, 3.0])
    with pytest.raises(ValueError):
        cg.cbrt(np.ones(3), out=np.empty(4))


def test_where_keeps_out_elsewhere():
    x = np.array([8.0, 27.0, 64.0])
    out = np.full(3, -7.0)
    cg.cbrt(x, out=out, where=np.array([True, False, True]))
    np.testing.assert_array_equal(out, [2.0, -7.0, 4.0])
    g = np.ones(3)
    out = np.full(3, -7.0)
    cg.cbrt_grad(g, np.array([1.0, 1.0, 1.0]), out=out, where=np.array([False, True, False]))
    np.testing.assert_array_equal(out, [-7.0, 1 / 3, -7.0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_strided_and_negative_stride_views(dtype):
    base = np.linspace(-100, 100, 60, dtype=dtype).reshape(6, 10)
    for view in (base[::2, ::3], base[::-1, ::-2], base.T, base[:, 5]):
        np.testing.assert_array_equal(cg.cbrt(view), cg.cbrt(np.ascontiguousarray(view)))
        y = cg.cbrt(view)
        np.testing.assert_array_equal(
            cg.cbrt_grad(view, y), cg.cbrt_grad(np.ascontiguousarray(view), np.ascontiguousarray(y))
        )


def test_broadcasting():
    y = np.array([1.0, 2.0, 4.0])
    g = np.array([[1.0], [3.0]])
    got = cg.cbrt_grad(g, y)
    assert got.shape == (2, 3)
    np.testing.assert_allclose(got, g / (3 * y * y), rtol=1e-15)
    assert cg.cbrt_grad(1.0, np.float32([2.0])).dtype == np.float32  # weak Python scalar


def test_float16_grad_is_float32():
    y = np.array([1.0, 2.0], np.float16)
    assert cg.cbrt_grad(np.ones(2, np.float16), y).dtype == np.float32


def test_mixed_precision_grad_is_float64():
    assert cg.cbrt_grad(np.ones(2, np.float32), np.ones(2)).dtype == np.float64


# Regressions found by the property tests (tests/test_properties_arrays.py).
@pytest.mark.parametrize("backend", ["cpu", "parallel", "numpy"])
@pytest.mark.parametrize("step", [2, -1, -2])
def test_strided_and_reversed_out_is_written_where_it_points(backend, step):
    # numba's ufunc loop ignored the output stride for contiguous inputs:
    # wrong elements, and heap corruption for a negative stride.
    x = np.array([8.0, -27.0, 64.0])
    base = np.full(3 * abs(step), 7.0)
    out = base[::step]
    assert cg.cbrt(x, out=out, backend=backend) is out
    # (numpy's strided, non-SVML np.cbrt is 1 ulp off for -27 here)
    np.testing.assert_allclose(out, [2.0, -3.0, 4.0], rtol=1e-15)
    untouched = np.ones(base.size, bool)
    untouched[::step] = False
    assert (base[untouched] == 7.0).all()
    dx = np.full(3 * abs(step), 7.0)[::step]
    y, got = cg.cbrt_and_grad(x, np.ones(3), out=(np.empty(3), dx), backend=backend)
    assert got is dx
    np.testing.assert_array_equal(dx, 1 / (3 * y * y))


def test_numpy_backend_zero_d_gradient_and_broadcast_fused_shapes():
    assert cg.cbrt_grad(np.float64(3.0), np.array(1.0), backend="numpy") == 1.0
    y, dx = cg.cbrt_and_grad(np.array(8.0), np.ones((2, 3)), backend="numpy")
    assert y.shape == dx.shape == (2, 3)
    np.testing.assert_array_equal(y, 2.0)


@pytest.mark.parametrize("backend", ["cpu", "numpy", "parallel"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_non_native_byte_order_inputs_and_out(backend, dtype):
    # A byte-swapped float array is equal in value but not the native dtype
    # object: the api's hot paths (identity with the native dtype) must not
    # take it, and the general path casts it.
    def swap(a):
        return a.astype(a.dtype.newbyteorder())

    x = np.array([-27.0, 0.125, 8.0, 1e-30], dtype)
    g = np.full_like(x, 3.0)
    expected = cg.cbrt(x, backend=backend)
    expected_dx = cg.cbrt_grad(g, expected, backend=backend)
    y = cg.cbrt(swap(x), backend=backend)
    assert y.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(y, expected)
    out = swap(np.zeros_like(x))
    assert cg.cbrt(x, out=out, backend=backend) is out
    np.testing.assert_array_equal(out, expected)
    dx = cg.cbrt_grad(swap(g), swap(expected), backend=backend)
    assert dx.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(dx, expected_dx)
    fused_y, fused_dx = cg.cbrt_and_grad(swap(x), swap(g), backend=backend)
    np.testing.assert_array_equal(fused_y, expected)
    np.testing.assert_array_equal(fused_dx, expected_dx)


def _swapped(a):
    return a.astype(a.dtype.newbyteorder())


def _unaligned(a):
    # The same values one byte past an aligned address, as a view into bytes
    # (a packed record's field, a buffer read at an offset) gives them.
    u = np.zeros(a.nbytes + 1, np.uint8)[1:].view(a.dtype).reshape(a.shape)
    u[...] = a
    assert not u.flags.aligned
    return u


def _native_bits(a):
    # An array's values as native-order bytes, to compare bit for bit.
    a = np.asarray(a)
    return a.astype(a.dtype.newbyteorder("="), copy=False).view(np.uint8)


#: The layouts numba's dispatchers cannot tell apart (one process-wide type
#: cache keyed without alignment or byte order: prange_loops.check_behaved).
_NOT_BEHAVED = {
    "swapped": _swapped,
    "unaligned": _unaligned,
    "swapped-unaligned": lambda a: _unaligned(_swapped(a)),
}


@pytest.mark.parametrize("backend", ["cpu", "parallel", "numpy"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [5, 3 * 2048 + 7], ids=["small", "blocks"])
def test_swapped_and_unaligned_arrays_give_the_native_bits_in_any_order(backend, dtype, n):
    # Inputs and out= that are byte-swapped, unaligned or both, on every
    # route (forward, gradient, the broadcast-g gradient from 4096 elements,
    # fused, a byte-swapped dtype=), at one size and over several parallel
    # blocks, give the native arrays' bits. Each kind runs before and after
    # the others: had one reached a numba loop, it would decide how the
    # others are typed for the rest of the process (an error, or values read
    # in the wrong byte order).
    def call(func, *args, **kwargs):
        return func(*args, backend=backend, **kwargs)

    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n) * 1e3).astype(dtype)
    g = rng.standard_normal(n).astype(dtype)
    g_one = np.broadcast_to(g[:1], x.shape)
    y = call(cg.cbrt, x)
    dx = call(cg.cbrt_grad, g, y)
    dx_one = call(cg.cbrt_grad, g_one, y)
    same = np.array_equal
    for order in (list(_NOT_BEHAVED), list(_NOT_BEHAVED)[::-1]):
        for name in order:
            make = _NOT_BEHAVED[name]
            got = call(cg.cbrt, make(x))
            assert got.dtype == np.dtype(dtype) and same(_native_bits(got), _native_bits(y)), name
            out = make(np.zeros_like(x))
            assert call(cg.cbrt, x, out=out) is out
            assert same(_native_bits(out), _native_bits(y)), name
            got = call(cg.cbrt_grad, make(g), make(y))
            assert same(_native_bits(got), _native_bits(dx)), name
            got = call(cg.cbrt_grad, np.broadcast_to(make(g[:1]), x.shape), make(y))
            assert same(_native_bits(got), _native_bits(dx_one)), name
            out = make(np.zeros_like(x))
            call(cg.cbrt_grad, make(g), y, out=out)
            assert same(_native_bits(out), _native_bits(dx)), name
            fused = call(cg.cbrt_and_grad, make(x), make(g))
            assert same(_native_bits(fused[0]), _native_bits(y)), name
            assert same(_native_bits(fused[1]), _native_bits(dx)), name
            got = call(cg.cbrt, x, dtype=np.dtype(dtype).newbyteorder())
            assert got.dtype == np.dtype(dtype) and same(_native_bits(got), _native_bits(y))
        # cbrt_and_grad's out=(y, dx) has exactly the compute dtype, so native
        # order (documented), but may be unaligned.
        pair = (_unaligned(np.zeros_like(x)), _unaligned(np.zeros_like(x)))
        call(cg.cbrt_and_grad, x, g, out=pair)
        assert same(_native_bits(pair[0]), _native_bits(y))
        assert same(_native_bits(pair[1]), _native_bits(dx))


def test_ndarray_subclass_with_hook_still_overrides():
    # The hot path skips the hook only for numpy's own ndarray type.
    class Hooked(np.ndarray):
        def __cbrtgrad_function__(self, func, args, kwargs):
            return ("hooked", func.__name__)

    x = np.ones(3, np.float32).view(Hooked)
    assert cg.cbrt(x) == ("hooked", "cbrt")
    assert cg.cbrt_grad(x, x) == ("hooked", "cbrt_grad")
    assert cg.cbrt_and_grad(x, x) == ("hooked", "cbrt_and_grad")


def test_named_backend_is_checked_on_every_call():
    # get_backend caches the backends it has returned, by name: bad names and
    # types must still raise after a good name was cached.
    x = np.ones(2)
    cg.cbrt(x, backend="cpu")
    cg.cbrt(x, backend=" CPU ")
    with pytest.raises(ValueError, match="unknown backend 'cpux'"):
        cg.cbrt(x, backend="cpux")
    with pytest.raises(TypeError, match="backend must be a str"):
        cg.cbrt(x, backend=1)


def test_compute_dtype_of_is_the_one_decision_of_a_call():
    # What the api asks once per call, and backends called without dtype= ask too.
    from cbrtgrad.arrays.dtypes import compute_dtype_of

    f32, f64 = np.dtype(np.float32), np.dtype(np.float64)
    assert compute_dtype_of(np.ones(2, np.float16)) == f32
    assert compute_dtype_of(np.ones(2, np.int8)) == f64
    assert compute_dtype_of([1.5]) == f64
    assert compute_dtype_of(np.ones(2, np.float32), 2.0, argument="g, y") == f32  # weak scalar
    assert compute_dtype_of(np.ones(2, np.float32), np.ones(2), argument="g, y") == f64
    assert compute_dtype_of(np.ones(2), dtype="float16") == f32  # dtype= decides
    assert compute_dtype_of(np.ones(2), dtype=f32) is f32
    with pytest.raises(TypeError, match="y has dtype complex128"):
        compute_dtype_of(np.ones(2), np.ones(2, complex), argument="g, y")
    with pytest.raises(TypeError, match="dtype must be float16, float32 or float64"):
        compute_dtype_of(np.ones(2), dtype=np.int32)


@pytest.mark.parametrize("backend", [None, "cpu"])
@pytest.mark.parametrize(("compute", "other"), [(np.float64, np.float32), (np.float32, np.float64)])
def test_an_out_of_another_dtype_is_written_without_reading_it(backend, compute, other):
    # numpy casts the old content of such an out into its buffer for a
    # numba-built ufunc: a signalling nan left there (uninitialised memory)
    # raised "invalid value encountered in cast" and left out unwritten.
    signalling = {np.float32: (np.uint32, 0x7F800001), np.float64: (np.uint64, 0x7FF0000000000001)}
    bits, pattern = signalling[other]
    x, g = np.full(5, 27.0, compute), np.full(5, 3.0, compute)
    y = cg.cbrt(x)
    for call, expected in (
        (lambda out: cg.cbrt(x, out=out, backend=backend), 3.0),
        (lambda out: cg.cbrt_grad(g, y, out=out, backend=backend), 1 / 9),
    ):
        out = np.full(5, pattern, bits).view(other)
        with np.errstate(all="raise"):
            assert call(out) is out
        np.testing.assert_allclose(out, expected, rtol=1e-7)
