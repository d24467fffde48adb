"""Device math on numba device arrays against numpy, under numba's CUDA simulator.

The element-wise ops and casts must give numpy's bits (a nan's payload and
sign excepted: a GPU's are its own); ``power`` is within 1 ulp of numpy's
(CUDA's ``pow`` is not numpy's); sums and means are within a few roundings
of numpy's, relative to the sum of the magnitudes (the order of the
additions differs). With ``NUMBA_ENABLE_CUDASIM=0`` on a machine with a GPU
the same tests check the real kernels.

The CuPy and PyTorch paths need those libraries and a GPU: CI has neither;
the logic they share (numpy's promotion and power shortcuts, the float64 to
float16 cast through float32 rounded to odd) is checked with numpy standing
in for them.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba_cuda", reason="numba-cuda is not installed")

from numba import cuda  # noqa: E402

from cbrtgrad.backends._device_math_libraries import _LibraryMath  # noqa: E402
from cbrtgrad.backends.device_math import namespace  # noqa: E402
from cbrtgrad.engine.shape_ops import reduce_to  # noqa: E402

FLOATS = [np.float16, np.float32, np.float64]
BITS = {np.dtype(np.float16): np.uint16, np.dtype(np.float32): np.uint32}
BITS[np.dtype(np.float64)] = np.uint64
#: Operand shapes that broadcast: () is a 0-d device array.
SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((2, 1, 3), (4, 1)), ((1,), (2, 3)), ((), (2, 3))]


@pytest.fixture(scope="module")
def xp():
    return namespace(cuda.to_device(np.zeros(1)))


def dev(a):
    return cuda.to_device(np.ascontiguousarray(a))


def host(x):
    return x.copy_to_host()


def specials(dtype):
    """Zeros of both signs, infinities, nan, subnormals, extremes and ordinary values."""
    info = np.finfo(dtype)
    values = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.1, -2.5, 3.0]
    values += [info.smallest_subnormal, -info.smallest_subnormal, info.smallest_normal]
    values += [info.smallest_normal / 3, info.max, -info.max, info.eps, 1 + info.eps]
    return np.array(values, dtype)


def sample(shape, dtype, seed):
    """Random values with the special ones mixed in."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    pool = np.concatenate([specials(dtype), rng.standard_normal(16).astype(dtype)])
    return pool[rng.integers(0, len(pool), n)].reshape(shape)


def assert_bits(got, want):
    """Same dtype, shape and bits, a nan matching any nan."""
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.shape)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    bits = BITS[want.dtype]
    np.testing.assert_array_equal(got[~nan].view(bits), want[~nan].view(bits))


def numpy_op(op, a, b):
    with np.errstate(all="ignore"):
        return np.asarray(getattr(np, op)(a, b))


# -- element-wise, bit for bit --------------------------------------------------


@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "divide"])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shapes", SHAPES)
def test_binary_ops_give_numpys_bits(xp, op, dtype, shapes):
    a, b = sample(shapes[0], dtype, 1), sample(shapes[1], dtype, 2)
    got = getattr(xp, op)(dev(a), dev(b))
    assert_bits(host(got), numpy_op(op, a, b))


@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "divide"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_every_pair_of_special_values(xp, op, dtype):
    s = specials(dtype)
    a, b = np.repeat(s, len(s)), np.tile(s, len(s))
    assert_bits(host(getattr(xp, op)(dev(a), dev(b))), numpy_op(op, a, b))


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("scalar", [0.1, 3, True, -1e-8, 1e6])
def test_a_python_scalar_does_not_promote(xp, dtype, scalar):
    # NEP 50: the scalar is rounded to the array's dtype first (1e6 is inf in float16).
    a = sample((2, 3), dtype, 3)
    for op in ("add", "subtract", "multiply", "divide"):
        assert_bits(host(getattr(xp, op)(dev(a), scalar)), numpy_op(op, a, scalar))
        assert_bits(host(getattr(xp, op)(scalar, dev(a))), numpy_op(op, scalar, a))


@pytest.mark.parametrize(
    "left, right",
    [
        (np.float16, np.float32),
        (np.float32, np.float64),
        (np.float16, np.float64),
    ],
)
def test_mixed_dtypes_promote_as_numpy(xp, left, right):
    a, b = sample((2, 3), left, 4), sample((3,), right, 5)
    assert_bits(host(xp.multiply(dev(a), dev(b))), numpy_op("multiply", a, b))
    assert_bits(host(xp.divide(dev(b), dev(a))), numpy_op("divide", b, a))


def test_numpy_scalars_and_0d_arrays_are_strong(xp):
    a = sample((3,), np.float32, 6)
    assert_bits(host(xp.add(dev(a), np.float64(0.1))), numpy_op("add", a, np.float64(0.1)))
    assert_bits(host(xp.add(np.float16(0.1), dev(a))), numpy_op("add", np.float16(0.1), a))
    zero_d = np.array(0.1, np.float64)
    assert_bits(host(xp.add(dev(a), dev(zero_d))), numpy_op("add", a, zero_d))


@pytest.mark.parametrize("dtype", FLOATS)
def test_negative(xp, dtype):
    a = sample((4, 5), dtype, 7)
    assert_bits(host(xp.negative(dev(a))), -a)


@pytest.mark.parametrize("source", FLOATS)
@pytest.mark.parametrize("target", FLOATS)
def test_astype_rounds_once(xp, source, target):
    a = np.concatenate([specials(source), sample((20,), source, 8)])
    if source == np.float64:
        # Just above and below float16 ties, and ties: rounding through
        # float32 first would round 1 + 2^-11 + 2^-40 down to 1.
        a = np.concatenate([a, [1 + 2.0**-11 + 2.0**-40, 1 + 2.0**-11 - 2.0**-40, 1 + 2.0**-11]])
        a = np.concatenate([a, [2.0**-25 + 2.0**-60, 65520.0 - 2.0**-30, 1e-300, -1e300]])
    with np.errstate(all="ignore"):
        want = a.astype(target)
    got = xp.astype(dev(a), target)
    assert_bits(host(got), want)


@pytest.mark.parametrize(
    "shape, to", [((3,), (2, 3)), ((2, 1), (2, 4)), ((), (3,)), ((1,), (2, 1))]
)
def test_broadcast_to(xp, shape, to):
    a = sample(shape, np.float32, 9)
    got = xp.broadcast_to(dev(a), to)
    assert got.is_c_contiguous()
    assert_bits(host(got), np.ascontiguousarray(np.broadcast_to(a, to)))


def test_broadcast_to_its_own_shape_is_the_array(xp):
    x = dev(np.ones((2, 3)))
    assert xp.broadcast_to(x, (2, 3)) is x


# -- power, within 1 ulp ---------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("p", [0.5, 2.0, -1.0, 1.0])
def test_power_gives_numpys_bits_where_numpy_does_not_call_pow(xp, dtype, p):
    # Square, square root, reciprocal, identity in float32 and float64
    # (-inf ** 0.5 is nan, -0.0 ** 0.5 is -0.0); powf for float16.
    a = np.concatenate([sample((30,), dtype, 10), specials(dtype)])
    with np.errstate(all="ignore"):
        want = np.power(a, p)
    assert_bits(host(xp.power(dev(a), p)), want)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("p", [1 / 3, 3.0, -2.5])
def test_power_is_within_one_ulp_of_numpy(xp, dtype, p):
    a = np.concatenate([np.abs(sample((30,), dtype, 10)), specials(dtype)])
    with np.errstate(all="ignore"):
        want = np.power(a, p)
    got = host(xp.power(dev(a), p))
    assert got.dtype == want.dtype
    assert np.array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    assert np.array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
    ulp = np.spacing(np.abs(want[finite]))
    assert np.all(np.abs(got[finite].astype(np.float64) - want[finite]) <= ulp)


def test_power_with_a_numpy_scalar_promotes(xp):
    a = np.array([2.0, 3.0], np.float32)
    assert xp.power(dev(a), np.float64(2.0)).dtype == np.float64


# -- reductions, within a few roundings ------------------------------------------


def assert_close_sum(got, want, a, axis, dtype):
    """Within a few roundings of the exact sum, relative to the sum of the magnitudes."""
    assert got.dtype == want.dtype and got.shape == want.shape, (got.shape, want.shape)
    scale = np.sum(np.abs(a.astype(np.float64)), axis=axis, keepdims=True).reshape(want.shape)
    exact = np.sum(a.astype(np.float64), axis=axis, keepdims=True).reshape(want.shape)
    eps = np.finfo(dtype).eps
    bound = 2 * eps * scale + np.finfo(dtype).smallest_subnormal
    assert np.all(np.abs(got.astype(np.float64) - exact) <= bound), (got, exact)


AXES = [None, (), (0,), (1,), (2,), (0, 2), (1, 2), (0, 1, 2)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("keepdims", [False, True])
def test_sum(xp, dtype, axis, keepdims):
    # (3, 4, 20): sums over the last axis or all take the two-launch path.
    a = (np.random.default_rng(11).standard_normal((3, 4, 20)) * 10).astype(dtype)
    got = host(xp.sum(dev(a), axis, keepdims))
    want = np.sum(a, axis=axis, keepdims=keepdims)
    assert_close_sum(got, np.asarray(want), a, axis, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("axis", [None, (1,), (0, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_mean(xp, dtype, axis, keepdims):
    a = np.random.default_rng(12).standard_normal((3, 4, 20)).astype(dtype)
    got = host(xp.mean(dev(a), axis, keepdims))
    wide = np.float32 if dtype == np.float16 else dtype
    want = np.asarray(np.mean(a, axis=axis, keepdims=keepdims, dtype=wide)).astype(dtype)
    count = a.size // want.size
    assert got.dtype == want.dtype and got.shape == want.shape
    scale = np.mean(np.abs(a.astype(np.float64)), axis=axis, keepdims=keepdims)
    exact = np.mean(a.astype(np.float64), axis=axis, keepdims=keepdims)
    eps = np.finfo(dtype).eps
    assert np.all(np.abs(got - exact) <= 3 * eps * scale + eps * np.abs(exact)), count


def test_sums_of_special_values(xp):
    def total(values, dtype=np.float32):
        return host(xp.sum(dev(np.array(values, dtype))))[()]

    assert np.signbit(total([-0.0, -0.0])) and total([-0.0, -0.0]) == 0
    assert not np.signbit(total([-0.0, 0.0]))
    assert total([1.0, np.inf]) == np.inf and np.isnan(total([np.inf, -np.inf]))
    assert np.isnan(total([1.0, np.nan]))
    # float32 data accumulated in float64, rounded once: no overflow on the way.
    assert total([3e38, 3e38, -3e38]) == np.float32(3e38)
    # float16 data accumulated in float32: 2048 + 1 + 1 is 2050 (float16 steps would give 2048).
    assert total([2048.0, 1.0, 1.0], np.float16) == 2050


def test_empty_sums_and_means(xp):
    empty = dev(np.zeros((0, 3), np.float32))
    s = host(xp.sum(empty, (0,)))
    assert s.shape == (3,) and np.all(s == 0) and not np.any(np.signbit(s))
    assert host(xp.sum(empty, (1,))).shape == (0,)
    assert host(xp.sum(empty, None, True)).shape == (1, 1)
    assert np.all(np.isnan(host(xp.mean(empty, (0,)))))


@pytest.mark.parametrize(
    "shape, to",
    [
        ((2, 3), (3,)),
        ((2, 3), (1, 3)),
        ((4, 2, 3), (2, 1)),
        ((4, 2, 3), ()),
        ((2, 1, 3), (1, 1, 3)),
    ],
)
@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_sum_to_matches_the_engines_reduce_to(xp, shape, to, dtype):
    g = np.random.default_rng(13).standard_normal(shape).astype(dtype)
    got = host(xp.sum_to(dev(g), to))
    want = reduce_to(g, to)
    lead = len(shape) - len(to)
    axes = tuple(range(lead)) + tuple(
        d + lead for d, n in enumerate(to) if n == 1 and shape[d + lead] != 1
    )
    assert_close_sum(got, np.asarray(want), g, axes, dtype)


def test_sum_to_its_own_shape_is_the_array(xp):
    g = dev(np.ones((2, 3)))
    assert xp.sum_to(g, (2, 3)) is g
    with pytest.raises(ValueError, match="not broadcast from shape"):
        xp.sum_to(g, (2,))


# -- shapes, creation, copies ----------------------------------------------------


def test_reshape_is_a_view(xp):
    x = dev(np.arange(6.0))
    y = xp.reshape(x, (2, -1))
    assert y.shape == (2, 3)
    xp_full = xp.full((2, 3), 7.0, np.float64, x)
    assert host(xp.reshape(xp_full, (6,))).tolist() == [7.0] * 6
    with pytest.raises(ValueError, match="cannot reshape"):
        xp.reshape(x, (4, -1))


@pytest.mark.parametrize("dtype", FLOATS)
def test_zeros_and_full(xp, dtype):
    like = dev(np.ones(1))
    z = host(xp.zeros((2, 3), dtype, like))
    assert_bits(z, np.zeros((2, 3), dtype))
    assert_bits(host(xp.full((3,), 0.1, dtype, like)), np.full(3, 0.1, dtype))
    assert_bits(host(xp.full((), -0.0, dtype, like)), np.full((), -0.0, dtype))
    assert host(xp.zeros((0, 2), dtype, like)).shape == (0, 2)


@pytest.mark.parametrize("dtype", FLOATS)
def test_all_finite(xp, dtype):
    assert xp.all_finite(dev(sample((3, 4), dtype, 14) * 0 + 1))
    assert xp.all_finite(dev(np.zeros(0, dtype)))
    for bad in (np.inf, -np.inf, np.nan):
        a = np.ones(40, dtype)
        a[37] = bad
        assert not xp.all_finite(dev(a))


def test_host_copies_round_trip(xp):
    like = dev(np.ones(1))
    a = sample((2, 3), np.float32, 15)
    back = xp.to_host(xp.from_host(a, like))
    assert isinstance(back, np.ndarray)
    assert_bits(back, a)
    assert_bits(xp.to_host(xp.from_host(np.asfortranarray(a), like)), a)


def test_one_namespace_per_library(xp):
    assert namespace(dev(np.ones(2, np.float16))) is xp


# -- errors name the argument ----------------------------------------------------


class _FakeCupyArray:
    """Looks like a CuPy array to the type checks (no CuPy here)."""

    __cuda_array_interface__ = {"typestr": "<f4", "shape": (3,), "version": 3}
    dtype = np.dtype(np.float32)
    shape = (3,)


_FakeCupyArray.__module__ = "cupy._core.core"
_FakeCupyArray.__name__ = "ndarray"


def test_errors_name_the_argument(xp):
    x = dev(np.ones(3, np.float32))
    with pytest.raises(TypeError, match="array must be a device array.*host numpy.ndarray"):
        namespace(np.ones(3))
    with pytest.raises(TypeError, match=r"^cbrtgrad: a must be a numba device array.*host numpy"):
        xp.add(np.ones(3), x)
    with pytest.raises(TypeError, match=r"^cbrtgrad: b must be a numba device array.*list"):
        xp.multiply(x, [1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match="b must be.*complex"):
        xp.divide(x, 1j)
    with pytest.raises(TypeError, match="at least one device array"):
        xp.add(1.0, 2.0)
    with pytest.raises(TypeError, match="b is a CuPy array, but this call computes on numba"):
        xp.subtract(x, _FakeCupyArray())
    with pytest.raises(TypeError, match="a has dtype int32"):
        xp.negative(dev(np.ones(3, np.int32)))
    with pytest.raises(TypeError, match="p must be a real scalar"):
        xp.power(x, x)
    with pytest.raises(TypeError, match="dtype must be float16, float32 or float64, got int64"):
        xp.astype(x, np.int64)
    with pytest.raises(ValueError, match=r"a of shape \(3,\) and b of shape \(2,\) do not"):
        xp.add(x, dev(np.ones(2, np.float32)))
    with pytest.raises(ValueError, match=r"does not broadcast to \(2,\)"):
        xp.broadcast_to(x, (2,))
    with pytest.raises(TypeError, match="axis must be None or a tuple of ints, got 0"):
        xp.sum(x, 0)
    with pytest.raises(ValueError, match="axis must hold distinct axes in"):
        xp.mean(x, (1,))
    with pytest.raises(TypeError, match="like must be a numba device array"):
        xp.zeros((2,), np.float32, np.ones(1))
    with pytest.raises(TypeError, match="array must be a numpy.ndarray, got list"):
        xp.from_host([1.0], x)
    with pytest.raises(TypeError, match="shape must be a tuple of ints"):
        xp.full((2.0,), 1.0, np.float32, x)


def test_non_contiguous_arrays_are_a_value_error(xp):
    strided = dev(np.ones((2, 4), np.float32))[:, ::2]
    with pytest.raises(ValueError, match="a must be a C-contiguous device array"):
        xp.add(strided, 1.0)


def test_mean_of_exact_sums_is_numpys_bits(xp):
    # Small integers sum exactly in any order, so the quotient (a float64
    # division by the count, rounded back, as numpy's mean) must be numpy's.
    rng = np.random.default_rng(16)
    for dtype in FLOATS:
        a = rng.integers(-50, 50, (3, 7, 5)).astype(dtype)
        for axis in (None, (1,), (0, 2)):
            wide = np.float32 if dtype == np.float16 else dtype
            want = np.asarray(np.mean(a, axis=axis, dtype=wide)).astype(dtype)
            assert_bits(host(xp.mean(dev(a), axis)), want)


# -- the CuPy/PyTorch code they share, on numpy arrays ---------------------------


class _NumpyLibraryMath(_LibraryMath):
    """_LibraryMath's shared logic with numpy standing in for CuPy or PyTorch."""

    library = "numpy"

    def _xp(self):
        return np

    def _device(self, value):
        return None

    def _dtype(self, a):
        return a.dtype

    def _convert(self, a, dtype):
        with np.errstate(over="ignore"):
            return a.astype(dtype, copy=False)

    def _scalar(self, value, like):
        return value

    def _view(self, a, dtype):
        return a.view(dtype)

    def _convert_bool(self, a):
        return a.astype(np.int32)

    def _apply(self, op, a, b, dtype):
        with np.errstate(all="ignore"):
            if op in ("negative", "sqrt"):
                return getattr(np, op)(a)
            if op == "power":  # a library's pow, as C's: numpy's array loop has shortcuts
                return np.array([x**b for x in a.ravel()], dtype).reshape(a.shape)
            return getattr(np, op)(a, b, dtype=dtype)

    def _contiguous_copy(self, a, shape):
        return np.ascontiguousarray(np.broadcast_to(a, shape))

    _sum = _reshape = _full = _all_finite = _to_host = _from_host = None


def test_float64_to_float16_through_float32_rounded_to_odd():
    # Through float32 rounded to nearest, 1 + 2^-11 + 2^-40 would round twice (to 1).
    rng = np.random.default_rng(17)
    ties = np.float16(rng.standard_normal(2000)).astype(np.float64)
    half_ulp = np.spacing(np.float16(ties)).astype(np.float64) / 2
    near = [ties + half_ulp, ties + half_ulp * (1 + 2.0**-30), ties + half_ulp * (1 - 2.0**-30)]
    a = np.concatenate([*near, specials(np.float64), [1e300, -1e-300, 65520.0, 2.0**-25]])
    a = np.concatenate([a, rng.standard_normal(2000) * 10.0 ** rng.integers(-9, 6, 2000)])
    with np.errstate(all="ignore"):
        want = a.astype(np.float16)
    assert_bits(_NumpyLibraryMath()._cast(a, np.dtype(np.float16), a.shape), want)
    with np.errstate(over="ignore"):
        twice = a.astype(np.float32).astype(np.float16)
    assert np.count_nonzero(twice != want) > 0  # the trap is in the sample


@pytest.mark.parametrize("dtype", FLOATS)
def test_library_power_and_arithmetic_follow_numpy(dtype):
    math_ = _NumpyLibraryMath()
    a = np.concatenate([sample((40,), dtype, 18), specials(dtype)])
    for p in (2.0, 0.5, -1.0, 1.0):
        with np.errstate(all="ignore"):
            want = np.power(a, p)
        assert_bits(math_._map1("power", a, dtype(p), np.dtype(dtype)), want)
    for op in ("add", "divide"):
        got = math_._map2(op, a, dtype(0.1), np.dtype(dtype), a.shape)
        assert_bits(got, numpy_op(op, a, dtype(0.1)))
