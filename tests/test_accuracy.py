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
    # An independent cross-check of the exact checker: scipy computes float32
    # in double and rounds once (0.5 ulp measured, but double rounding gives it
    # no bit-exact guarantee), so it is held to the neighbour at most.
    np.testing.assert_array_max_ulp(y, scipy.special.cbrt(x), maxulp=1)


def test_float32_mpmath_sample():
    x = cases.random_inputs(np.dtype(np.float32), 3000, seed=12)
    errors = ulp.mpmath_ulp_errors(x, cg.cbrt(x), ulp.cbrt_exact)
    assert errors.max() <= 0.5


def test_float64_mpmath_sample_within_bar():
    x = cases.random_inputs(np.dtype(np.float64), cases.TEST_SIZE, seed=13)
    errors = ulp.mpmath_ulp_errors(x, cg.cbrt(x), ulp.cbrt_exact)
    assert errors.max() <= cases.BARS[np.dtype(np.float64)].forward_max_ulp
    # Nearly always correctly rounded (np.cbrt: 0.536 ulp at worst with SVML, 3.04 with glibc).
    assert np.mean(errors <= 0.5) > 0.999


@pytest.mark.parametrize("dtype", cases.DTYPES)
def test_gradient_within_bars(dtype):
    x = cases.random_inputs(dtype, 4000, seed=14)
    x = x[np.abs(x) > np.finfo(dtype).tiny ** 0.5]  # keep 1/(3 y^2) finite
    y = cg.cbrt(x)
    g = np.ones_like(y)
    dx = cg.cbrt_grad(g, y)
    bar = cases.BARS[np.dtype(dtype)]
    assert ulp.mpmath_ulp_errors(x, dx, ulp.grad_exact(1.0)).max() <= bar.grad_max_ulp
    assert ulp.mpmath_ulp_errors(y, dx, ulp.grad_from_output(1.0)).max() <= bar.grad_given_y_max_ulp


@pytest.mark.parametrize("dtype", cases.DTYPES)
def test_exact_cubes_give_exact_roots(dtype):
    k, cubes = cases.exact_cubes(np.dtype(dtype))
    np.testing.assert_array_equal(cg.cbrt(cubes), k)


@pytest.mark.parametrize("form", ["cpu", "cuda"])
def test_sweep_of_several_binades_and_subnormals(form):
    # Subnormals, the binades around 1 (where the exponent trick changes
    # its residue mod 3), the smallest and largest normals, infs and nans,
    # and negatives: the same checks as the full sweep, for the CPU kernel
    # and for the CUDA kernels' formula (its own bit trick, compiled here).
    starts = (0, 0x00800000 - (1 << 19), 0x3F000000, 0x3F800000, 0x40000000, 0x7F800000 - (1 << 19))
    for start in (*starts, 0xBF800000, 0xFF800000 - (1 << 19)):
        result = sweep(start, start + (1 << 20), form=form, progress=False)
        assert result.correctly_rounded, result


def test_the_cuda_formula_is_the_cpu_kernel_bit_for_bit():
    # Every 1021st bit pattern (all binades, both signs, nans with their
    # payloads): the CUDA kernels' float32 formula, compiled for the CPU,
    # gives the CPU kernel's bits.
    import numba

    from cbrtgrad.kernels.cpu.blocks import FORMULAS

    formula = FORMULAS.cube_root_f32_branching

    @numba.njit
    def roots(x):  # type: ignore[no-untyped-def]
        out = np.empty_like(x)
        for i in range(x.size):
            out[i] = formula(x[i])
        return out

    x = np.arange(0, 1 << 32, 1021, dtype=np.uint64).astype(np.uint32).view(np.float32)
    np.testing.assert_array_equal(roots(x).view(np.uint32), cg.cbrt(x).view(np.uint32))


def test_sweep_rejects_an_unknown_form():
    with pytest.raises(ValueError, match="form must be one of"):
        sweep(0, 1, form="gpu", progress=False)


def test_checker_rejects_a_neighbour():
    x = cases.random_inputs(np.dtype(np.float32), 10_000, seed=15)
    y = cg.cbrt(x)
    wrong = np.nextafter(y, np.float32(np.inf))
    assert not is_correctly_rounded(x, wrong).any()
    assert not is_correctly_rounded(x, -y).any()


@pytest.mark.slow
def test_exhaustive_float32_sweep():
    # All 2^32 bit patterns, as `cbrtgrad verify --exhaustive` (35 s on 2 idle cores).
    for form in ("cpu", "cuda"):
        result = sweep(form=form, progress=False)
        assert result.checked == 1 << 32
        assert result.correctly_rounded, (form, result.failing_inputs)


def test_sweep_rejects_bad_range():
    with pytest.raises(ValueError, match="start and stop"):
        sweep(5, 2, progress=False)


def _exact_float32_gradient(g, y):
    """The correctly rounded float32 of g / (3 y^2), by exact rational arithmetic."""
    from fractions import Fraction

    exact = Fraction(float(g)) / (3 * Fraction(float(y)) ** 2)
    nearest = np.float32(float(exact))  # float() rounds once, then float32 again
    candidates = [np.nextafter(nearest, np.float32(-np.inf)), nearest]
    candidates.append(np.nextafter(nearest, np.float32(np.inf)))
    finite = [c for c in candidates if np.isfinite(c)]
    # Nearest, ties to the even significand (only subnormal results have ties).
    return min(finite, key=lambda c: (abs(Fraction(float(c)) - exact), int(c.view(np.int32)) & 1))


# (g, y) pairs for which float64(g) / (3 y^2) rounded to float32 is a double
# rounding that goes the wrong way (0.5000000002 ulp); found by a search over
# 8.6e9 pairs of the old kernel.
_DOUBLE_ROUNDING_PAIRS = [
    (1.2758434, 1.7264736),
    (1.6921718, 1.0167228),
    (1.5585229, 1.4935715),
    (1.8829352, 1.8244822),
    (1.8676523, 1.9736788),
    (1.9400251, 1.6890272),
]


def test_float32_gradient_correctly_rounded_where_double_rounding_fails():
    g = np.array([p[0] for p in _DOUBLE_ROUNDING_PAIRS], np.float32)
    y = np.array([p[1] for p in _DOUBLE_ROUNDING_PAIRS], np.float32)
    naive = (g.astype(np.float64) / (3.0 * y.astype(np.float64) ** 2)).astype(np.float32)
    want = np.array([_exact_float32_gradient(a, b) for a, b in zip(g, y, strict=True)], np.float32)
    assert (naive != want).all()  # the pairs still exercise the double rounding
    for backend in ("cpu", "parallel"):
        np.testing.assert_array_equal(cg.cbrt_grad(g, y, backend=backend), want)
        np.testing.assert_array_equal(cg.cbrt_grad(-g, y, backend=backend), -want)


def test_float32_gradient_correctly_rounded_on_random_pairs():
    rng = np.random.default_rng(15)
    n = 2000
    y = (rng.uniform(0.5, 2.0, n) * 2.0 ** rng.integers(-60, 60, n)).astype(np.float32)
    # Quotients across the normal range and down into the subnormal one.
    g, y = cases.gradient_pairs(y, rng, (-152, 100), signs=True)
    keep = np.isfinite(g) & (g != 0)
    g, y = g[keep], y[keep]
    with np.errstate(over="ignore", under="ignore"):
        got = cg.cbrt_grad(g, y, backend="cpu")
    want = np.array([_exact_float32_gradient(a, b) for a, b in zip(g, y, strict=True)], np.float32)
    np.testing.assert_array_equal(got, want)


def test_float32_gradient_subnormal_ties_go_to_even():
    # g / (3 y^2) = (2k + 1) 2^-150 exactly: halfway between two subnormals.
    y = np.float32(2.0**40)
    g = np.array([3 * (2 * k + 1) * 2.0**-70 for k in range(6)], np.float32)
    want = np.array([_exact_float32_gradient(a, y) for a in g], np.float32)
    np.testing.assert_array_equal(cg.cbrt_grad(g, y), want)
    assert (want.view(np.int32) & 1 == 0).all()
