"""The parallel backend: bit for bit the cpu backend, with numpy ufunc semantics."""

from __future__ import annotations

import numpy as np
import pytest

import cbrtgrad
from cbrtgrad.backends import get_backend
from cbrtgrad.verification.cases import gradient_pairs

from ._cases import DTYPES, cases, same_bits

cpu = get_backend("cpu")
par = get_backend("parallel")


@pytest.mark.parametrize("dtype", DTYPES)
def test_case_table_same_bits_as_cpu(dtype):
    x = cases(dtype, 20_000)
    g = cases(dtype, 20_000)[::-1].copy()
    with np.errstate(all="ignore"):
        y = cpu.cube_root(x)
        assert same_bits(par.cube_root(x), y)
        assert same_bits(par.cube_root_grad(g, y), cpu.cube_root_grad(g, y))
        ours = par.cube_root_and_grad(x, g)
        ref = cpu.cube_root_and_grad(x, g)
    assert same_bits(ours[0], ref[0]) and same_bits(ours[1], ref[1])


def _layouts():
    base = np.linspace(-50.0, 50.0, 60).reshape(6, 10)
    yield "c", base
    yield "fortran", np.asfortranarray(base)
    yield "strided", base[::2, ::3]
    yield "reversed", base[::-1]
    yield "0-d", np.array(-8.0)
    yield "empty", np.empty((0, 3))
    yield "float16", base.astype(np.float16)
    yield "int", np.arange(-5, 20)
    yield "bool", np.array([True, False])
    yield "list", [[1.0, -8.0], [27.0, 0.0]]
    yield "scalar", -27.0
    ro = base.copy()
    ro.flags.writeable = False
    yield "read-only", ro


@pytest.mark.parametrize("name, x", list(_layouts()), ids=[n for n, _ in _layouts()])
def test_layouts_like_the_cpu_ufunc(name, x):
    ours = cbrtgrad.cbrt(x, backend="parallel")
    ref = cbrtgrad.cbrt(x, backend="cpu")
    assert type(ours) is type(ref)
    assert same_bits(ours, ref)
    g = np.ones_like(np.asarray(x), dtype=np.asarray(ref).dtype)
    with np.errstate(divide="ignore"):
        assert same_bits(
            cbrtgrad.cbrt_grad(g, ref, backend="parallel"),
            cbrtgrad.cbrt_grad(g, ref, backend="cpu"),
        )
        a = cbrtgrad.cbrt_and_grad(x, g, backend="parallel")
        b = cbrtgrad.cbrt_and_grad(x, g, backend="cpu")
    assert same_bits(a[0], b[0]) and same_bits(a[1], b[1])


def test_broadcasting_out_and_where():
    x = np.array([1.0, 8.0, -27.0])
    out = np.full((2, 3), 7.0)
    where = np.array([[True, False, True], [False, True, True]])
    # NOTE: the cpu backend's numba ufunc rejects where= with out= (numpy's
    # "ARRAYMASK" error), so the reference is built from its unmasked result.
    ref = np.where(where, cpu.cube_root(np.broadcast_to(x, (2, 3)).copy()), 7.0)
    assert par.cube_root(x, out=out, where=where) is out
    assert same_bits(out, ref)
    # out of another float dtype is cast 'same_kind', as by a ufunc.
    out32 = np.empty(3, np.float32)
    par.cube_root(x, out=out32)
    assert same_bits(out32, np.array([1.0, 2.0, -3.0], np.float32))
    # g broadcast against y
    y = cpu.cube_root(np.array([[1.0, 8.0], [27.0, 64.0]]))
    assert same_bits(par.cube_root_grad(2.0, y), cpu.cube_root_grad(2.0, y))
    assert same_bits(par.cube_root_grad(np.ones(2), y), cpu.cube_root_grad(np.ones(2), y))


def test_in_place_and_overlap():
    x = np.linspace(-30.0, 30.0, 101)
    ref = cpu.cube_root(x)
    a = x.copy()
    par.cube_root(a, out=a)
    assert same_bits(a, ref)
    b = x.copy()
    par.cube_root(b[:-1], out=b[1:])  # partial overlap: numpy semantics, as if copied first
    assert same_bits(b[1:], ref[:-1])
    xs, gs = x.copy(), np.ones_like(x)
    with np.errstate(divide="ignore"):  # x = 0 is on the grid: 1 / 0
        ys, dxs = par.cube_root_and_grad(xs, gs, out=(xs, gs))
        grad = cpu.cube_root_grad(np.ones_like(x), ref)
        assert ys is xs and dxs is gs
        assert same_bits(xs, ref) and same_bits(gs, grad)
        x2, g2 = x.copy(), np.ones_like(x)
        par.cube_root_and_grad(x2, g2, out=(g2, x2))  # swapped: must not read what it overwrote
        assert same_bits(g2, ref) and same_bits(x2, grad)


def test_dtype_keyword():
    x = np.array([8.0, 2.0])
    ours = cbrtgrad.cbrt(x, dtype=np.float32, backend="parallel")
    assert same_bits(ours, cbrtgrad.cbrt(x, dtype=np.float32, backend="cpu"))
    assert cbrtgrad.cbrt(x.astype(np.float16), backend="parallel").dtype == np.float32


def test_bad_input_is_a_clear_error():
    # Checked once by the public functions, for every backend (the backend trusts them).
    def cube_root(x, **kwargs):
        return cbrtgrad.cbrt(x, backend="parallel", **kwargs)

    with pytest.raises(ValueError, match=r"out has shape \(4,\); the operands broadcast to \(3,\)"):
        cube_root(np.ones(3), out=np.empty(4))
    with pytest.raises(ValueError, match="could not be broadcast"):
        cbrtgrad.cbrt_grad(np.ones(3), np.ones(4), backend="parallel")
    with pytest.raises(TypeError, match="cannot write a float64 result into out of dtype int64"):
        cube_root(np.ones(3), out=np.empty(3, np.int64))
    with pytest.raises(TypeError, match="out must be a numpy.ndarray"):
        cube_root(np.ones(3), out=[0.0, 0.0, 0.0])
    with pytest.raises(TypeError, match="where must be a bool array"):
        cube_root(np.ones(3), where=np.ones(3))
    ro = np.empty(3)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="out is read-only"):
        cube_root(np.ones(3), out=ro)
    with pytest.raises(TypeError, match="complex128"):
        cube_root(np.ones(3, complex))
    with pytest.raises(TypeError, match=r"out\[y\] has dtype float32; expected float64"):
        cbrtgrad.cbrt_and_grad(
            np.ones(3), np.ones(3), out=(np.empty(3, np.float32), np.empty(3)), backend="parallel"
        )


def test_threads_follow_numba_settings():
    import numba

    assert str(numba.get_num_threads()) in par.availability().reason


# -- the sum the graph engine calls ---------------------------------------------
def test_sum_of_large_float32_is_more_accurate_than_numpy():
    import math

    from cbrtgrad.backends.parallel import ParallelBackend

    rng = np.random.default_rng(21)
    a = rng.uniform(0.0, 1.0, (1000, 300)).astype(np.float32)
    exact = math.fsum(a.astype(np.float64).ravel())
    got = ParallelBackend().sum(a)
    assert isinstance(got, np.float32)
    # Accumulated in float64 and rounded once: the correctly rounded sum here.
    assert got == np.float32(exact)
    tenths = np.full(10**6, 0.1, np.float32)
    exact = math.fsum(tenths.astype(np.float64))
    assert ParallelBackend().sum(tenths) == np.float32(exact)  # 100000.0
    assert np.add.reduce(tenths) != np.float32(exact)  # numpy: 100000.01
    assert ParallelBackend().sum(a, axis=(0, 1), keepdims=True).shape == (1, 1)


def test_sum_special_values_follow_ieee():
    from cbrtgrad.backends.parallel import SUM_MIN_SIZE, ParallelBackend

    backend = ParallelBackend()
    n = SUM_MIN_SIZE
    zeros = np.full(n, -0.0, np.float32)
    assert backend.sum(zeros) == 0 and np.signbit(backend.sum(zeros))
    big = np.full(n, 3e38, np.float32)
    with np.errstate(over="ignore"):
        assert backend.sum(big) == np.inf  # numpy's float32 sum overflows too
    for value, want in ((np.inf, np.inf), (np.nan, np.nan)):
        a = np.ones(n, np.float32)
        a[n // 2] = value
        np.testing.assert_array_equal(backend.sum(a), np.float32(want))
    a = np.ones(n, np.float32)
    a[1], a[-1] = np.inf, -np.inf
    assert np.isnan(backend.sum(a))


def test_sum_outside_the_fast_case_is_numpy():
    from cbrtgrad.backends.parallel import SUM_MIN_SIZE, ParallelBackend

    backend = ParallelBackend()
    rng = np.random.default_rng(22)
    cases_ = [
        (rng.random(100).astype(np.float32), None),  # small
        (rng.random(SUM_MIN_SIZE), None),  # float64
        (rng.random((300, 300)).astype(np.float32), (0,)),  # part of the axes
        (rng.random((600, 300)).astype(np.float32)[:, ::2], None),  # strided
    ]
    for a, axis in cases_:
        np.testing.assert_array_equal(
            backend.sum(a, axis=axis), np.add.reduce(a, axis=axis), strict=True
        )


# -- the float32 gradient near the edges of its fast path ----------------------
def _pairs_near_the_edges(n, seed):
    rng = np.random.default_rng(seed)
    y = (rng.uniform(0.5, 2.0, n) * 2.0 ** rng.integers(-60, 60, n)).astype(np.float32)
    # Quotients from well inside the normal range down through 2^-126 (where
    # the scalar kernel switches rounding) into the subnormal range and to 0;
    # some g overflow to inf: special values too, and 20 more in each operand.
    return gradient_pairs(y, rng, (-155, 40), specials=20, signs=True)


@pytest.mark.parametrize("n", [2048 * 37 + 1, 4095, 3])
def test_float32_gradient_near_the_fast_path_edges_same_bits_as_cpu(n):
    g, y = _pairs_near_the_edges(n, seed=n)
    with np.errstate(all="ignore"):
        want = cpu.cube_root_grad(g, y)
        assert same_bits(par.cube_root_grad(g, y), want)
        for constant in (np.float32(1.5), np.float32(3e-38), np.float32(0.0), np.float32(np.inf)):
            assert same_bits(
                par.cube_root_grad(np.broadcast_to(constant, y.shape), y),
                cpu.cube_root_grad(np.broadcast_to(constant, y.shape), y),
            )
        # In place, the blocks keep their inputs for the second pass.
        for target in ("g", "y"):
            gc, yc = g.copy(), y.copy()
            out = gc if target == "g" else yc
            par.cube_root_grad(gc, yc, out=out)
            assert same_bits(out, want)


# -- arrays numba must never type: unaligned, read-only, byte-swapped -----------
def _off_by_one_byte(a):
    u = np.zeros(a.nbytes + 1, np.uint8)[1:].view(a.dtype)
    u[...] = a
    return u


def test_the_loops_refuse_arrays_numba_would_mistype():
    # Not handed to numba at all (its process-wide type cache would then type
    # the next such array wrongly: prange_loops.check_behaved), whatever the
    # loop and whichever argument, input or output.
    from cbrtgrad.kernels.cpu import catalog as cpu_kernels
    from cbrtgrad.kernels.cpu.reduce import sum_float32

    loops = cpu_kernels.parallel_loops()
    good = np.ones(3)
    read_only = np.ones(3)
    read_only.flags.writeable = False
    bad = {
        "unaligned": _off_by_one_byte(good),
        "read-only": read_only,
        "byte order '>'": good.astype(">f8"),
    }
    for problem, array in bad.items():
        with pytest.raises(TypeError, match=f"parallel forward loop .* {problem}"):
            loops.forward(array, np.empty(3))
        with pytest.raises(TypeError, match=f"parallel grad loop .* {problem}"):
            loops.grad(good, good, array)
        with pytest.raises(TypeError, match=f"parallel fused loop .* {problem}"):
            loops.fused(good, good, array, np.empty(3))
        with pytest.raises(TypeError, match=f"parallel grad_constant loop .* {problem}"):
            loops.grad_constant(1.0, array, np.empty(3))
    with pytest.raises(TypeError, match="parallel sum loop .* unaligned"):
        sum_float32(_off_by_one_byte(np.ones(3, np.float32)))


def test_sum_of_an_unaligned_or_read_only_float32_array_is_numpy():
    from cbrtgrad.backends.parallel import SUM_MIN_SIZE, ParallelBackend

    a = np.random.default_rng(23).random(SUM_MIN_SIZE).astype(np.float32)
    read_only = a.copy()
    read_only.flags.writeable = False
    for odd in (_off_by_one_byte(a), read_only):
        np.testing.assert_array_equal(ParallelBackend().sum(odd), np.add.reduce(a), strict=True)


def test_a_byte_swapped_dtype_keyword_at_the_parallel_size():
    # The reported call: cbrt(np.ones(10**6), dtype='>f8') on the automatic
    # choice (the parallel backend from 10^6 elements), then an unaligned array.
    ones = np.ones(10**6)
    got = cbrtgrad.cbrt(ones, dtype=">f8")
    assert got.dtype == np.float64 and (got == 1.0).all()
    assert same_bits(cbrtgrad.cbrt(_off_by_one_byte(ones), backend="parallel"), got)
