"""Property tests over whole arrays: every public function on every host backend.

Random shapes (0-d to 4-d, empty axes), input dtypes (float16/32/64, integers,
bool), strided and negative-stride views, broadcasting, ``out=`` and
``where=``. The oracles: mpmath at 200 bits with the bars of the shared case
table (:data:`cbrtgrad.verification.cases.BARS`), ``np.cbrt`` within its own
documented error, and the closed-form gradient ``g / (3 y^2)``. The numpy
backend *is* ``np.cbrt``, so it is held to numpy's bound (tests/_agreement.py:
its bits depend on the layout and the CPU) and to the semantics.
The cuda backend runs under the simulator with a small budget.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import cbrtgrad as cg
from cbrtgrad.arrays import dtypes as _dtypes
from cbrtgrad.verification.cases import BARS
from cbrtgrad.verification.ulp import PRECISION_BITS, cbrt_exact, mpmath_ulp_errors

from ._agreement import NP_CBRT_STEPS, steps_apart
from .backends._cases import SIMULATED_DIVISION

HOST_BACKENDS = ("cpu", "parallel", "numpy")
OURS = ("cpu", "parallel")
FLOATS = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))
INPUT_DTYPES = (
    *FLOATS,
    *(np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint64)),
    np.dtype(np.bool_),
)
F32, F64 = np.dtype(np.float32), np.dtype(np.float64)

# NOTE: np.cbrt is within NP_CBRT_STEPS of ours (tests/_agreement.py).
# mpmath is the strict oracle; this one catches a wrong formula with an
# independent implementation.
EXAMPLES = 40


def _same_specials(got: np.ndarray, expected: np.ndarray) -> None:
    """nan where expected is nan; zeros and infinities bit for bit (signs included)."""
    assert np.array_equal(np.isnan(got), np.isnan(expected))
    special = ~np.isfinite(expected) | (expected == 0)
    special &= ~np.isnan(expected)
    assert np.array_equal(np.signbit(got[special]), np.signbit(expected[special]))
    assert np.array_equal(got[special], expected[special])


@st.composite
def arrays(draw, dtypes=INPUT_DTYPES, shape=None):
    """An array of a drawn dtype and shape, often a strided or reversed view."""
    dtype = draw(st.sampled_from(dtypes))
    if shape is None:
        shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4))
    steps = tuple(draw(st.sampled_from((1, 1, 2, -1, -2))) for _ in shape)
    base = draw(hnp.arrays(dtype, tuple(n * abs(s) for n, s in zip(shape, steps, strict=True))))
    view = base[tuple(slice(None, None, s) for s in steps)] if shape else base
    if view.ndim > 1 and draw(st.booleans()):
        view = np.asfortranarray(view)
    assert view.shape == tuple(shape)
    return view


def _exact_specials(x: np.ndarray) -> np.ndarray:
    """``x`` where its cube root is ``x`` itself (±0, ±inf, nan), 1 elsewhere.

    The expected specials for :func:`_same_specials`, known exactly rather
    than taken from ``np.cbrt`` (the platform's libm, without SVML).
    """
    return np.where(np.isfinite(x) & (x != 0), np.ones_like(x), x)


def _check_forward(x_compute: np.ndarray, got: np.ndarray, backend: str) -> None:
    with np.errstate(all="ignore"):
        reference = np.cbrt(x_compute)
    _same_specials(got, _exact_specials(x_compute))
    if backend == "numpy":
        # NOTE: np.cbrt's bits depend on the layout (SVML only on contiguous
        # data, libm otherwise): within its documented error of itself.
        finite = np.isfinite(x_compute)
        assert (steps_apart(got[finite], reference[finite]) <= NP_CBRT_STEPS[got.dtype]).all()
        return
    finite = np.isfinite(x_compute) & (x_compute != 0)
    assert (steps_apart(got[finite], reference[finite]) <= NP_CBRT_STEPS[got.dtype]).all()
    errors = mpmath_ulp_errors(x_compute[finite], got[finite], cbrt_exact)
    assert (errors <= BARS[got.dtype].forward_max_ulp).all(), errors.max()


@settings(max_examples=EXAMPLES)
@pytest.mark.parametrize("backend", HOST_BACKENDS)
@given(x=arrays(), dtype=st.sampled_from((None, None, np.float16, np.float32, np.float64)))
def test_cbrt_against_mpmath_and_np_cbrt(backend, x, dtype):
    compute = _dtypes.requested_dtype(dtype) or _dtypes.compute_dtype(x.dtype)
    with np.errstate(all="ignore"):
        got = cg.cbrt(x, dtype=dtype, backend=backend)
    # As a ufunc: a numpy scalar for 0-d input, else an array of x's shape.
    assert isinstance(got, np.generic if x.ndim == 0 else np.ndarray)
    got = np.asarray(got)
    assert got.dtype == compute and got.shape == x.shape
    with np.errstate(over="ignore"):  # x beyond dtype's range: inf, as in the call
        x_compute = x.astype(compute)
    _check_forward(x_compute, got, backend)


@st.composite
def out_and_where(draw, shape):
    """An ``out`` of a float dtype that ``shape`` broadcasts to, and a ``where``."""
    out_shape = draw(
        hnp.broadcastable_shapes(shape, min_dims=len(shape), max_dims=4, min_side=0, max_side=3)
    )
    # The operand must broadcast *to* out's shape, not beyond it.
    out_shape = np.broadcast_shapes(out_shape, shape)
    out = draw(arrays(dtypes=(F32, F64), shape=out_shape))
    out = out.copy() if not out.flags.writeable else out
    out[...] = 7.0
    if draw(st.booleans()):
        where = True
    else:
        # A shape that broadcasts *to* out's: some axes 1, some leading ones dropped.
        ones = [draw(st.booleans()) for _ in out_shape]
        where_shape = tuple(1 if one else n for one, n in zip(ones, out_shape, strict=True))
        where_shape = where_shape[draw(st.integers(0, len(where_shape))) :]
        where = draw(hnp.arrays(np.bool_, where_shape))
    return out, where


@settings(max_examples=EXAMPLES)
@pytest.mark.parametrize("backend", HOST_BACKENDS)
@given(data=st.data())
def test_cbrt_out_and_where_like_a_ufunc(backend, data):
    x = data.draw(arrays())
    out, where = data.draw(out_and_where(x.shape))
    compute = _dtypes.compute_dtype(x.dtype)
    expected = out.copy()
    with np.errstate(all="ignore"):
        full = np.asarray(cg.cbrt(x, backend=backend))
        # NOTE: under errstate too: a float64 root above float32's largest
        # (x near 4e115) overflows in the cast to a float32 out, as in the call.
        np.copyto(expected, np.broadcast_to(full, out.shape), casting="same_kind", where=where)
        result = cg.cbrt(x, out=out, where=where, backend=backend)
    assert result is out
    if backend == "numpy":  # its bits depend on the layout (see _check_forward)
        _same_specials(out, expected)
        finite = np.isfinite(expected)
        # In the compute dtype's steps: a float32 root written to a float64
        # out is one float32 step from another, 2^29 float64 steps.
        got, want = out[finite].astype(compute), expected[finite].astype(compute)
        assert (steps_apart(got, want) <= NP_CBRT_STEPS[compute]).all()
    else:
        assert np.array_equal(out, expected, equal_nan=True)
    assert full.dtype == compute


def _cube_root_range(dtype: np.dtype) -> tuple[float, float]:
    """The cube roots of the smallest subnormal and of the largest finite value.

    From mpmath, each rounded inwards (a libm's could be a few ulp outside).
    """
    info = np.finfo(dtype)
    with mpmath.workprec(PRECISION_BITS):
        exact = [cbrt_exact(mpmath.mpf(float(v))) for v in (info.smallest_subnormal, info.max)]
    t = dtype.type
    lo, hi = t(float(exact[0])), t(float(exact[1]))
    lo = lo if mpmath.mpf(float(lo)) >= exact[0] else np.nextafter(lo, t(np.inf))
    hi = hi if mpmath.mpf(float(hi)) <= exact[1] else np.nextafter(hi, t(0))
    return float(lo), float(hi)


def _grad_exact(g: np.ndarray, y: np.ndarray) -> list[mpmath.mpf]:
    with mpmath.workprec(PRECISION_BITS):
        return [
            mpmath.mpf(float(gi)) / (3 * mpmath.mpf(float(yi)) ** 2)
            for gi, yi in zip(g, y, strict=True)
        ]


def _check_grad(g: np.ndarray, y: np.ndarray, got: np.ndarray, backend: str) -> None:
    """``got`` against ``g / (3 y^2)``; ``g``, ``y`` broadcast, in the compute dtype."""
    with np.errstate(all="ignore"):
        if backend == "numpy":
            assert np.array_equal(got, g / ((y * y) * 3), equal_nan=True)
            return
        ieee = (g.astype(F64) / (3 * y.astype(F64) ** 2)).astype(got.dtype)
    regular = np.isfinite(g) & np.isfinite(y) & (y != 0)
    # IEEE cases (y = 0, infinities, nan) follow the float64 expression.
    _same_specials(got[~regular], ieee[~regular])
    # NOTE: the bars hold where y can be a cube root of a finite number of the
    # dtype, the documented contract. Beyond it the float64 kernel falls back
    # to the plain expression (2.5 ulp), and for |y| > 2^512 / sqrt(3) its
    # y * y overflows: the result is 0 where the exact one is subnormal.
    info = np.finfo(got.dtype)
    lo, hi = _cube_root_range(got.dtype)
    regular &= (np.abs(y) >= lo) & (np.abs(y) <= hi)
    g, y, got = g[regular], y[regular], got[regular]
    assert not np.isnan(got).any()
    # The sign is g's (3 y^2 > 0). NOTE: g = -0.0 is left out: the float64
    # kernel returns +0.0 for it (see test_known_float64_kernel_drops_sign_of_zero).
    nonzero = g != 0
    assert np.array_equal(np.signbit(got[nonzero]), np.signbit(g[nonzero]))
    if not got.size:
        return
    exact = _grad_exact(g, y)
    # Everywhere, overflow and subnormal results included: the neighbour at most.
    # NOTE: an exact result beyond the dtype's largest rounds to inf in the cast.
    with np.errstate(all="ignore"):
        rounded = np.array([float(e) for e in exact]).astype(got.dtype)
        assert (steps_apart(got, rounded) <= 1).all()
    normal = (np.abs(rounded) >= info.smallest_normal) & (np.abs(rounded) < info.max)
    if normal.any():
        # mpmath_ulp_errors' ``exact`` maps each input to its exact result: index into the list.
        index = np.flatnonzero(normal).astype(F64)
        errors = mpmath_ulp_errors(index, got[normal], lambda i: exact[int(i)])
        assert (errors <= BARS[got.dtype].grad_given_y_max_ulp).all(), errors.max()


@settings(max_examples=EXAMPLES)
@pytest.mark.parametrize("backend", HOST_BACKENDS)
@given(data=st.data())
def test_cbrt_grad_with_broadcasting_against_closed_form(backend, data):
    shapes = data.draw(
        hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, min_side=0, max_side=3)
    )
    g = data.draw(arrays(dtypes=INPUT_DTYPES, shape=shapes.input_shapes[0]))
    y = data.draw(arrays(dtypes=FLOATS, shape=shapes.input_shapes[1]))
    compute = _dtypes.result_dtype(g, y)
    with np.errstate(all="ignore"):
        got = np.asarray(cg.cbrt_grad(g, y, backend=backend))
    assert got.dtype == compute and got.shape == shapes.result_shape
    gb, yb = (np.broadcast_to(a, shapes.result_shape).astype(compute) for a in (g, y))
    _check_grad(gb.reshape(-1), yb.reshape(-1), got.reshape(-1), backend)


@settings(max_examples=EXAMPLES)
@pytest.mark.parametrize("backend", HOST_BACKENDS)
@given(data=st.data())
def test_cbrt_and_grad_same_bits_as_two_calls(backend, data):
    shapes = data.draw(
        hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, min_side=0, max_side=3)
    )
    x = data.draw(arrays(shape=shapes.input_shapes[0]))
    g = data.draw(arrays(dtypes=FLOATS, shape=shapes.input_shapes[1]))
    compute = _dtypes.result_dtype(x, g, argument="x, g")
    out = None
    if data.draw(st.booleans()):
        out = tuple(
            data.draw(arrays(dtypes=(compute,), shape=shapes.result_shape)).copy() for _ in range(2)
        )
    with np.errstate(all="ignore"):
        y, dx = cg.cbrt_and_grad(x, g, out=out, backend=backend)
        y_ref = np.asarray(cg.cbrt(x.astype(compute), backend=backend))
        y_ref = np.broadcast_to(y_ref, shapes.result_shape)
        # The gradient from the y it returned (for numpy, whose bits vary with layout).
        dx_ref = np.asarray(cg.cbrt_grad(g.astype(compute), y, backend=backend))
    if out is not None:
        assert y is out[0] and dx is out[1]
    for got in (y, dx):
        assert isinstance(got, np.ndarray)
        assert got.dtype == compute and got.shape == shapes.result_shape
    assert np.array_equal(dx, dx_ref, equal_nan=True)
    if backend == "numpy":
        _check_forward(np.broadcast_to(x, y.shape).astype(compute), y, backend)
    else:
        assert np.array_equal(y, y_ref, equal_nan=True)


def _sum_to(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    lead = a.ndim - len(shape)
    a = a.sum(axis=tuple(range(lead)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and a.shape[i] != 1)
    return a.sum(axis=axes, keepdims=True).reshape(shape)


@settings(max_examples=EXAMPLES)
@pytest.mark.parametrize("backend", HOST_BACKENDS)
@given(data=st.data())
def test_engine_gradients_against_closed_forms(backend, data):
    """``loss = sum(cbrt(a) * b + a / b - b**2)`` with a and b broadcast."""
    shapes = data.draw(
        hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, min_side=0, max_side=3)
    )
    dtype = data.draw(st.sampled_from((F32, F64)))
    values = st.floats(0.5, 20.0, width=32)
    a0 = data.draw(hnp.arrays(dtype, shapes.input_shapes[0], elements=values))
    b0 = data.draw(hnp.arrays(dtype, shapes.input_shapes[1], elements=values))
    sign = data.draw(hnp.arrays(dtype, a0.shape, elements=st.sampled_from((-1.0, 1.0))))
    a0 = a0 * sign
    a = cg.Tensor(a0, requires_grad=True)
    b = cg.Tensor(b0, requires_grad=True)
    loss = (cg.cbrt(a, backend=backend) * b + a / b - b**2).sum()
    loss.backward()
    value, (ga, gb) = cg.value_and_grad(
        lambda s, t: (cg.cbrt(s, backend=backend) * t + s / t - t**2).sum(), argnums=(0, 1)
    )(a0, b0)
    # The functional API and .backward() run the same graph: the same bits.
    assert np.array_equal(ga, a.grad) and np.array_equal(gb, b.grad)
    assert np.array_equal(value, loss.data)
    a64, b64 = np.broadcast_arrays(a0.astype(F64), b0.astype(F64))
    y64 = np.cbrt(a64)
    da = _sum_to(b64 / (3 * y64**2) + 1 / b64, a0.shape)
    db = _sum_to(y64 - a64 / b64**2 - 2 * b64, b0.shape)
    tol = 2e-5 if dtype == F32 else 1e-12
    assert a.grad.dtype == dtype and b.grad.dtype == dtype
    np.testing.assert_allclose(a.grad, da, rtol=tol, atol=tol * np.abs(da).max(initial=1))
    np.testing.assert_allclose(b.grad, db, rtol=tol, atol=tol * np.abs(db).max(initial=1))
    # The cube root's own gradient is the kernel's, bit for bit.
    with np.errstate(all="ignore"):
        y = cg.cbrt(a0, backend=backend)
    x = cg.Tensor(a0, requires_grad=True)
    cg.cbrt(x, backend=backend).backward(np.ones(a0.shape, dtype))
    assert np.array_equal(x.grad, cg.cbrt_grad(np.ones(a0.shape, dtype), y, backend=backend))


@settings(max_examples=10)
@given(x=arrays(dtypes=(F32, F64)), g_seed=st.integers(0, 2**32 - 1))
@pytest.mark.filterwarnings(SIMULATED_DIVISION)
def test_cuda_simulator_same_bits_as_cpu(x, g_seed):
    """The cuda kernels (simulator here) give the cpu backend's bits; small budget."""
    cuda = pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
    x = np.ascontiguousarray(x)  # device arrays are C-contiguous
    g = np.random.default_rng(g_seed).standard_normal(x.shape).astype(x.dtype)
    with np.errstate(all="ignore"):
        y_ref = np.asarray(cg.cbrt(x, backend="cpu"))
        dx_ref = np.asarray(cg.cbrt_grad(g, y_ref, backend="cpu"))
        y = cg.cbrt(cuda.to_device(x)).copy_to_host()
        dx = cg.cbrt_grad(cuda.to_device(g), cuda.to_device(y_ref)).copy_to_host()
        yf, dxf = cg.cbrt_and_grad(cuda.to_device(x), cuda.to_device(g))
    for got, ref in (
        (y, y_ref),
        (dx, dx_ref),
        (yf.copy_to_host(), y_ref),
        (dxf.copy_to_host(), dx_ref),
    ):
        assert got.shape == ref.shape and got.dtype == ref.dtype
        assert np.array_equal(got.view(np.uint8), np.ascontiguousarray(ref).view(np.uint8))


@pytest.mark.parametrize("backend", OURS)
@pytest.mark.parametrize("dtype", [F32, F64])
def test_gradient_keeps_the_sign_of_a_zero_cotangent(backend, dtype):
    """IEEE: ±0 / (3 y^2) is ±0 with the sign of g/y^2 (the Newton correction once lost it)."""
    g = np.array([-0.0, 0.0, -0.0, 0.0], dtype)
    y = np.array([1.5, 1.5, -2.0, -1e-30], dtype)
    got = cg.cbrt_grad(g, y, backend=backend)
    assert np.array_equal(got, np.zeros(4)) and list(np.signbit(got)) == [True, False, True, False]


def test_steps_apart_counts_across_zero_and_to_infinity():
    f32 = np.float32
    assert steps_apart(np.array([f32(1)]), np.array([np.nextafter(f32(1), f32(2))]))[0] == 1
    assert steps_apart(np.array([-0.0]), np.array([0.0]))[0] == 0
    tiny = np.finfo(np.float64).smallest_subnormal
    assert steps_apart(np.array([-tiny]), np.array([tiny]))[0] == 2
    assert steps_apart(np.array([np.finfo(f32).max]), np.array([f32(np.inf)]))[0] == 1
    assert math.isclose(
        float(mpmath_ulp_errors(np.array([8.0]), np.array([2.0]), cbrt_exact)[0]), 0.0
    )
