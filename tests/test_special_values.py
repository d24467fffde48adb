"""Special values exact (known roots, not a libm's); the gradient's IEEE behaviour at y = 0."""

import warnings

import numpy as np
import pytest

import cbrtgrad as cg
from cbrtgrad.verification import cases


@pytest.mark.parametrize("dtype", cases.DTYPES)
def test_special_values_bit_for_bit(dtype):
    x = cases.special_values(dtype)
    want = cases.expected_special(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no spurious floating-point warning either
        got = cg.cbrt(x)
    exact = ~np.isnan(want)
    assert np.array_equal(got[exact].view(np.uint8), want[exact].view(np.uint8))
    assert np.isnan(got[np.isnan(x)]).all()


@pytest.mark.parametrize("dtype", cases.DTYPES)
def test_signed_zero_and_infinities(dtype):
    x = np.array([0.0, -0.0, np.inf, -np.inf], dtype)
    y = cg.cbrt(x)
    assert np.array_equal(np.signbit(y), [False, True, False, True])
    assert np.array_equal(y, x)


@pytest.mark.parametrize("dtype", cases.DTYPES)
def test_no_floating_point_flags_for_any_input(dtype):
    x = np.concatenate([cases.special_values(dtype), cases.random_inputs(dtype, 5000)])
    with np.errstate(all="raise"):
        cg.cbrt(x)


@pytest.mark.parametrize("dtype", cases.DTYPES)
def test_extremes_and_subnormals_match_scipy_closely(dtype):
    import scipy.special

    info = np.finfo(dtype)
    x = np.array([info.max, info.tiny, info.smallest_subnormal, -info.smallest_subnormal], dtype)
    np.testing.assert_allclose(cg.cbrt(x), scipy.special.cbrt(x), rtol=2 * info.eps)


@pytest.mark.parametrize("dtype", cases.DTYPES)
def test_grad_at_zero_follows_ieee(dtype):
    g = np.array([1.0, -2.0, 0.0, 1.0], dtype)
    y = np.array([0.0, 0.0, 0.0, -0.0], dtype)
    # 0 / 0 (the third element) is invalid, as in numpy.
    with np.errstate(invalid="ignore"), pytest.warns(RuntimeWarning, match="divide by zero"):
        dx = cg.cbrt_grad(g, y)
    assert dx[0] == np.inf and dx[1] == -np.inf and np.isnan(dx[2]) and dx[3] == np.inf
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError):
        cg.cbrt_grad(g[:1], y[:1])


@pytest.mark.parametrize("dtype", cases.DTYPES)
def test_grad_at_infinity_and_nan(dtype):
    g = np.array([1.0, -1.0, np.nan, 1.0], dtype)
    y = np.array([np.inf, np.inf, 1.0, np.nan], dtype)
    # No flag: g / inf is an exact zero and a quiet nan raises nothing (the
    # float64 vector loop used to raise invalid for y = inf; tests/test_gradient_flags.py).
    with np.errstate(all="raise"):
        dx = cg.cbrt_grad(g, y)
    assert dx[0] == 0 and not np.signbit(dx[0])
    assert dx[1] == 0 and np.signbit(dx[1])
    assert np.isnan(dx[2:]).all()


def test_roots_of_the_clamped_float32_patterns():
    # The float32 forward runs zero, inf and nan on clamped patterns and turns
    # the roots it gets for them (constants of the formulas) into x: those
    # constants must be the correctly rounded roots of the clamped inputs
    # (2^-101, the scaled least subnormal, and the largest float32), and what
    # the kernels give for them.
    import mpmath

    from cbrtgrad.kernels.formulas import f32 as formulas
    from cbrtgrad.verification.exhaustive import is_correctly_rounded

    xs = np.array([2.0**-101, np.finfo(np.float32).max], np.float32)
    roots = (
        np.array([formulas._ROOT_OF_CLAMPED_ZERO32, formulas._ROOT_OF_CLAMPED_INF32], np.int64)
        .astype(np.int32)
        .view(np.float32)
    )
    assert is_correctly_rounded(xs, roots).all()
    with mpmath.workprec(200):
        for x, root in zip(xs, roots, strict=True):
            exact = mpmath.cbrt(mpmath.mpf(float(x)))
            ulp = mpmath.mpf(2) ** (mpmath.floor(mpmath.log(exact, 2)) - 23)
            assert abs(exact - mpmath.mpf(float(root))) < ulp / 2
    assert np.array_equal(cg.cbrt(xs).view(np.int32), roots.view(np.int32))
    assert np.array_equal(cg.cbrt(xs, backend="parallel").view(np.int32), roots.view(np.int32))
