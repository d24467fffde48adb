"""Accuracy against the oracles: exact rounding checks, mpmath at 200 bits, scipy."""

import numpy as np
import pytest
import scipy.special

import cbrtgrad as cg
from cbrtgrad.verification import cases, ulp
from cbrtgrad.verification.exhaustive import is_correctly_rounded, sweep


def test_float32_random_sample_correctly_rounded():
    x = cases.random_inputs(np.dtype(np.float32), 2_000_000, seed=11)
    y = cg.cbrt(x)
    assert is_correctly_rounded(x, y).all()
    # scipy computes float32 in double and rounds once: correctly rounded too.
    np.testing.assert_array_equal(y, scipy.special.cbrt(x))


def test_float32_mpmath_sample():
    x = cases.random_inputs(np.dtype(np.float32), 3000, seed=12)
    errors = ulp.ulp_errors(x, cg.cbrt(x), ulp.cbrt_exact)
    assert errors.max() <= 0.5


def test_float64_mpmath_sample_within_bar():
    x = cases.random_inputs(np.dtype(np.float64), cases.TEST_SIZE, seed=13)
    errors = ulp.ulp_errors(x, cg.cbrt(x), ulp.cbrt_exact)
    assert errors.max() <= cases.BARS[np.dtype(np.float64)].forward_max_ulp
    # Nearly always correctly rounded (np.cbrt with SVML: 0.536 ulp at worst).
    assert np.mean(errors <= 0.5) > 0.999


@pytest.mark.parametrize("dtype", cases.DTYPES)
def test_gradient_within_bars(dtype):
    x = cases.random_inputs(dtype, 4000, seed=14)
    x = x[np.abs(x) > np.finfo(dtype).tiny ** 0.5]  # keep 1/(3 y^2) finite
    y = cg.cbrt(x)
    g = np.ones_like(y)
    dx = cg.cbrt_grad(g, y)
    bar = cases.BARS[np.dtype(dtype)]
    assert ulp.ulp_errors(x, dx, ulp.grad_exact(1.0)).max() <= bar.grad_max_ulp
    assert ulp.ulp_errors(y, dx, ulp.grad_from_output(1.0)).max() <= bar.grad_given_y_max_ulp


@pytest.mark.parametrize("dtype", cases.DTYPES)
def test_exact_cubes_give_exact_roots(dtype):
    k, cubes = cases.exact_cubes(np.dtype(dtype))
    np.testing.assert_array_equal(cg.cbrt(cubes), k)


def test_sweep_of_several_binades_and_subnormals():
    # Subnormals, the binades around 1 (where the exponent trick changes
    # its residue mod 3), and negatives: the same checks as the full sweep.
    for start in (0, 0x3F000000, 0x3F800000, 0x40000000, 0xBF800000):
        result = sweep(start, start + (1 << 21), progress=False)
        assert result.correctly_rounded, result


def test_checker_rejects_a_neighbour():
    x = cases.random_inputs(np.dtype(np.float32), 10_000, seed=15)
    y = cg.cbrt(x)
    wrong = np.nextafter(y, np.float32(np.inf))
    assert not is_correctly_rounded(x, wrong).any()
    assert not is_correctly_rounded(x, -y).any()


def test_sweep_rejects_bad_range():
    with pytest.raises(ValueError, match="start and stop"):
        sweep(5, 2, progress=False)
