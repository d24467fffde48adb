"""The vectorised double-double reference against mpmath at 200 bits and exact arithmetic."""

import mpmath
import numpy as np
import pytest

import cbrtgrad as cg
from cbrtgrad.verification import cases, reference, report, ulp

DTYPES = cases.DTYPES

# Inputs whose cube root lies within about 2^-46 ulp of a float64 midpoint,
# from the worst cases CORE-MATH lists for cbrt (src/binary64/cbrt/cbrt.wc):
# the hardest correctly-rounded decisions there are.
HARD_CASES = [
    "0x1.0082b35be0924p-1",
    "0x1.010b285accf2dp-1",
    "0x1.018369b92e523p-1",
    "0x1.02419aabe811ep-1",
    "0x1.036bc384e93dbp-1",
    "0x1.049c3e59841c1p-1",
    "0x1.0a356521737b8p-1",
    "0x1.0a9bbd11b3a24p-1",
    "0x1.0e845d3a4f2eap-1",
    "0x1.159a01fccde0bp-1",
    "0x1.00357fdfa5412p+0",
    "0x1.05b93f3e0caf9p+0",
    "0x1.0978faca8232ap+0",
    "0x1.0ccd0dbc992edp+0",
    "0x1.1062c4a199abp+0",
]


def _mp(v: float) -> mpmath.mpf:
    return mpmath.mpf(float(v))


def _max_relative_error(hi, lo, exact) -> float:
    """Largest |hi + lo - exact| / |exact| (mpmath at 200 bits), as log2."""
    worst = mpmath.mpf(0)
    with mpmath.workprec(ulp.PRECISION_BITS):
        for h, lo_, t in zip(hi, lo, exact, strict=True):
            worst = max(worst, abs(_mp(h) + _mp(lo_) - t) / abs(t))
        return float(mpmath.log(worst, 2)) if worst else -np.inf


def _edge_inputs(dtype) -> np.ndarray:
    """Extremes, subnormals, powers of 2 and 8 and their neighbours, both signs."""
    info = np.finfo(dtype)
    t = dtype.type
    powers = np.array([2.0**k for k in range(info.minexp, info.maxexp, 7)] + [8.0, 1.0], dtype)
    values = [
        powers,
        np.nextafter(powers, t(0)),
        np.nextafter(powers, t(np.inf)),
        np.array(
            [info.max, np.nextafter(info.max, t(0)), info.tiny, info.smallest_subnormal], dtype
        ),
        np.nextafter(info.tiny, t(0)) * np.array([1, 0.5, 0.25, 1e-3], dtype),
    ]
    x = np.concatenate(values)
    return np.concatenate([x, -x])


def _inputs(dtype, n: int, seed: int) -> np.ndarray:
    x = cases.random_inputs(dtype, n, seed)
    k, cubes = cases.exact_cubes(dtype)
    return np.concatenate([x, cubes[cubes != 0][:: max(1, cubes.size // 200)], _edge_inputs(dtype)])


@pytest.mark.parametrize("dtype", DTYPES)
def test_cbrt_reference_within_2_to_minus_95_of_mpmath(dtype):
    # About 10^4 inputs over both dtypes: every binade, subnormals, exact
    # cubes, near overflow, both signs.
    x = _inputs(dtype, 4500 if dtype == np.float64 else 4000, seed=31)
    hi, lo = reference.cbrt_reference(x)
    assert hi.dtype == lo.dtype == np.float64 and hi.shape == x.shape
    with mpmath.workprec(ulp.PRECISION_BITS):
        exact = [ulp.cbrt_exact(_mp(v)) for v in x]
    assert _max_relative_error(hi, lo, exact) < -95
    # Normalised: lo is at most half an ulp of hi.
    assert (np.abs(lo) <= np.spacing(np.abs(hi)) / 2).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_exact_cubes_are_exact(dtype):
    k, cubes = cases.exact_cubes(dtype)
    hi, lo = reference.cbrt_reference(cubes)
    np.testing.assert_array_equal(hi, k.astype(np.float64))
    assert (lo == 0).all()
    # And across the exponent range: cbrt(k^3 2^(3j)) = k 2^j.
    for j in (-340, -100, 100, 300):
        hi, lo = reference.cbrt_reference(np.ldexp(cubes.astype(np.float64), 3 * j))
        np.testing.assert_array_equal(hi, np.ldexp(k.astype(np.float64), j))


def test_cbrt_reference_special_values_and_symmetry():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan])
    hi, lo = reference.cbrt_reference(x)
    np.testing.assert_array_equal(hi[:4], x[:4])
    assert np.signbit(hi[1]) and not np.signbit(hi[0])
    assert np.isnan(hi[4]) and np.isnan(lo[4]) and (lo[:4] == 0).all()
    v = cases.random_inputs(np.dtype(np.float64), 5000, seed=32)
    hp, lp = reference.cbrt_reference(v)
    hn, ln = reference.cbrt_reference(-v)
    np.testing.assert_array_equal(hn, -hp)
    np.testing.assert_array_equal(ln, -lp)
    # Scalars and 2-d arrays keep their shape.
    assert reference.cbrt_reference(np.float32(8.0))[0].shape == ()
    assert reference.cbrt_reference(np.ones((2, 3)))[0].shape == (2, 3)


def _cotangents(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    g = rng.uniform(1, 2, n) * 2.0 ** rng.integers(-200, 200, n)
    return np.where(rng.random(n) < 0.5, -g, g)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gradient_references_within_2_to_minus_95_of_mpmath(dtype):
    x = _inputs(dtype, 1500, seed=33)
    with np.errstate(over="ignore"):
        g = _cotangents(x.size, seed=34).astype(dtype)
    keep = np.isfinite(g) & (g != 0)
    x, g = x[keep], g[keep]
    hi, lo = reference.grad_reference(x, g)
    with mpmath.workprec(ulp.PRECISION_BITS):
        exact = [ulp.grad_exact(float(gi))(_mp(xi)) for xi, gi in zip(x, g, strict=True)]
    normal = np.abs(hi) >= 2.0**-969
    assert normal.sum() > 0.9 * x.size
    assert _max_relative_error(hi[normal], lo[normal], np.array(exact)[normal]) < -95
    y = cg.cbrt(x)  # the saved outputs
    hi, lo = reference.grad_given_y_reference(y, g)
    with mpmath.workprec(ulp.PRECISION_BITS):
        exact = [ulp.grad_from_output(float(gi))(_mp(yi)) for yi, gi in zip(y, g, strict=True)]
    normal = (np.abs(hi) >= 2.0**-969) & np.isfinite(hi)
    assert normal.sum() > 0.9 * x.size
    assert _max_relative_error(hi[normal], lo[normal], np.array(exact)[normal]) < -95


def test_gradient_reference_special_values():
    inf, nan = np.inf, np.nan
    x = np.array([0.0, 0.0, -0.0, inf, inf, 8.0, 8.0, 8.0, nan])
    g = np.array([1.0, 0.0, -2.0, 1.0, inf, 0.0, -inf, nan, 1.0])
    want = np.array([inf, nan, -inf, 0.0, nan, 0.0, -inf, nan, nan])
    for function in (reference.grad_reference, reference.grad_given_y_reference):
        hi, lo = function(x, g)
        np.testing.assert_array_equal(hi, want)
        assert (lo[np.isfinite(want) | np.isinf(want)] == 0).all()


def _perturbed_results(y: np.ndarray, seed: int) -> np.ndarray:
    """The results, their neighbours a few ulp away and some far values."""
    rng = np.random.default_rng(seed)
    steps = rng.integers(-3, 4, y.size)
    out = y.copy()
    for _ in range(3):
        move = steps != 0
        toward = np.where(steps > 0, np.inf, -np.inf).astype(y.dtype)
        out[move] = np.nextafter(out[move], toward[move])
        steps = steps - np.sign(steps)
    far = rng.random(y.size) < 0.05
    out[far] = (out[far] * rng.uniform(0.5, 2.0, far.sum())).astype(y.dtype)
    return np.concatenate([y, out])


def _assert_close_to_mpmath(ours, theirs):
    diff = np.abs(ours - theirs) / np.maximum(1.0, np.abs(theirs))
    assert diff.max() <= 1e-9, (diff.max(), np.argmax(diff))
    # The correctly-rounded decision is the same.
    np.testing.assert_array_equal(ours <= 0.5, theirs <= 0.5)


@pytest.mark.parametrize("dtype", DTYPES)
def test_forward_ulp_errors_match_mpmath(dtype):
    x = _inputs(dtype, 1500, seed=35)
    y = cg.cbrt(x)
    xs = np.concatenate([x, x])
    ys = _perturbed_results(y, seed=36)
    errors = reference.ulp_errors(xs, ys, "cbrt")
    _assert_close_to_mpmath(errors, ulp.mpmath_ulp_errors(xs, ys, ulp.cbrt_exact))
    assert errors.max() > 1 and (errors[: x.size] <= 0.5).mean() > 0.99


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("g", [1.0, -3.0e-5])
def test_gradient_ulp_errors_match_mpmath(dtype, g):
    x = _inputs(dtype, 600, seed=37)
    y = cg.cbrt(x)
    with np.errstate(all="ignore"):
        dx = cg.cbrt_grad(np.full_like(y, g), y)
    finite = np.isfinite(dx) & (dx != 0)
    x, y, dx = x[finite], y[finite], dx[finite]
    xs, ys = np.concatenate([x, x]), np.concatenate([y, y])
    results = _perturbed_results(dx, seed=38)
    g_dtype = dtype.type(g)
    ours = reference.ulp_errors(xs, results, "grad", g_dtype)
    _assert_close_to_mpmath(
        ours, ulp.mpmath_ulp_errors(xs, results, ulp.grad_exact(float(g_dtype)))
    )
    ours = reference.ulp_errors(ys, results, "grad_given_y", g_dtype)
    theirs = ulp.mpmath_ulp_errors(ys, results, ulp.grad_from_output(float(g_dtype)))
    _assert_close_to_mpmath(ours, theirs)


def test_ulp_errors_of_subnormal_gradients():
    # Tiny cotangents put g / (3 y^2) in float64's subnormal range (or below
    # it), where the grid, not the precision, sets the ulp.
    rng = np.random.default_rng(39)
    n = 300
    y = rng.uniform(1, 2, n) * 2.0 ** rng.integers(0, 20, n)
    g = rng.uniform(1, 2, n) * 2.0 ** rng.integers(-1100, -1030, n)
    with mpmath.workprec(ulp.PRECISION_BITS):
        exact = [ulp.grad_from_output(gi)(_mp(yi)) for gi, yi in zip(g, y, strict=True)]
    nearest = np.array([float(t) for t in exact])
    results = np.concatenate([nearest, np.nextafter(nearest, np.inf), np.nextafter(nearest, 0)])
    ours = reference.ulp_errors(np.tile(y, 3), results, "grad_given_y", np.tile(g, 3))
    index = np.tile(np.arange(n, dtype=np.float64), 3)
    theirs = ulp.mpmath_ulp_errors(index, results, lambda i: exact[int(i)])
    _assert_close_to_mpmath(ours, theirs)
    assert (ours[:n] <= 0.5).mean() > 0.99


def test_hard_cases_are_decided_exactly():
    # Cube roots within ~2^-46 ulp of a midpoint, scaled by 8^j (exactly) and
    # signed: the decision "<= 0.5 ulp" needs more than the double-double.
    base = np.array([float.fromhex(h) for h in HARD_CASES])
    rng = np.random.default_rng(40)
    x = np.concatenate([base, np.ldexp(base, 3 * rng.integers(-330, 330, base.size))])
    x = np.concatenate([x, -x])
    hi, _ = reference.cbrt_reference(x)
    xs = np.tile(x, 3)
    ys = np.concatenate([hi, np.nextafter(hi, -np.inf), np.nextafter(hi, np.inf)])
    errors = reference.ulp_errors(xs, ys)
    assert (np.abs(errors - 0.5) < reference.EXACT_BAND).sum() >= 2 * x.size
    mp_errors = ulp.mpmath_ulp_errors(xs, ys, ulp.cbrt_exact)
    _assert_close_to_mpmath(errors, mp_errors)
    exact = reference.exact_decisions(xs, ys)
    np.testing.assert_array_equal(exact, mp_errors <= 0.5)
    # Exactly one of the two neighbours of each midpoint is correctly rounded.
    assert (errors <= 0.5).sum() == x.size
    # Deciding everything exactly changes nothing.
    np.testing.assert_array_equal(reference.ulp_errors(xs, ys, band=0.5) <= 0.5, exact)


def test_exact_path_agrees_with_fast_path_on_random_results():
    x = cases.random_inputs(np.dtype(np.float64), 300, seed=41)
    y = _perturbed_results(cg.cbrt(x), seed=42)
    xs = np.concatenate([x, x])
    fast = reference.ulp_errors(xs, y, band=0.0)
    np.testing.assert_array_equal(reference.exact_decisions(xs, y), fast <= 0.5)
    np.testing.assert_array_equal(reference.ulp_errors(xs, y, band=0.5) <= 0.5, fast <= 0.5)
    g = _cotangents(x.size, seed=43)
    with np.errstate(all="ignore"):
        dx = cg.cbrt_grad(g, cg.cbrt(x))
    ok = np.isfinite(dx) & (dx != 0)
    for kind, inputs in (("grad", x), ("grad_given_y", cg.cbrt(x))):
        fast = reference.ulp_errors(inputs[ok], dx[ok], kind, g[ok], band=0.0)
        exact = reference.exact_decisions(inputs[ok], dx[ok], kind, g[ok])
        np.testing.assert_array_equal(exact, fast <= 0.5)


@pytest.mark.parametrize("dtype", DTYPES)
def test_ulp_at_a_binade_edge_follows_ulp_py(dtype):
    # cbrt(1 - ulp) rounds to 1, whose spacing is twice the one below: the
    # float below 1 is then 1/3 ulp away in ulp.py's measure (not 2/3).
    x = np.array([np.nextafter(dtype.type(1), dtype.type(0))], dtype)
    y = np.array([np.nextafter(dtype.type(1), dtype.type(0))], dtype)
    ours = reference.ulp_errors(x, y)
    np.testing.assert_allclose(
        ours, ulp.mpmath_ulp_errors(x, y, ulp.cbrt_exact), rtol=0, atol=1e-12
    )
    np.testing.assert_allclose(ours, [1 / 3], atol=1e-6)


def test_exact_ties_count_as_half_an_ulp():
    # g / (3 y^2) = 1 + 2^-24 exactly: a float32 midpoint, so both neighbours
    # are exactly 0.5 ulp away (the ulp of float32(1 + 2^-24) = 1, ties to even).
    g = np.array([3.0 + 3.0 * 2.0**-24] * 2)
    saved = np.ones(2)
    results = np.array([1.0, 1.0 + 2.0**-23], np.float32)
    errors = reference.ulp_errors(saved, results, "grad_given_y", g)
    np.testing.assert_array_equal(errors, [0.5, 0.5])
    assert reference.exact_decisions(saved, results, "grad_given_y", g).all()
    theirs = ulp.mpmath_ulp_errors(saved, results, ulp.grad_from_output(float(g[0])))
    np.testing.assert_array_equal(theirs, [0.5, 0.5])


def test_exact_rounding_handles_overflow_and_subnormals():
    # The exact rounding to float64 behind the decisions (kind 2: g / (3 y^2)).
    big = float(np.finfo(np.float64).max)
    assert reference._exact_round_f64(2, 2.0**-600, big, big) == np.inf
    assert reference._exact_round_f64(2, 2.0**-600, big, np.inf) == np.inf
    assert reference._exact_round_f64(2, 1.0, 3 * 2.0**-1074, 0.0) == 2.0**-1074
    assert reference._exact_round_f64(2, 1.0, -3.0, -0.9999999999999999) == -1.0
    with pytest.raises(RuntimeError, match="did not converge"):
        reference._exact_round_f64(2, 1.0, -3.0, 1.0)  # a start far from the value


def test_non_finite_results_and_references():
    x = np.array([8.0, 8.0, 8.0, 0.0, 0.0])
    y = np.array([np.inf, np.nan, 0.5, np.inf, 1.0])
    errors = reference.ulp_errors(x, y, "grad")  # the reference is inf at x = 0
    np.testing.assert_array_equal(errors[[0, 3, 4]], [np.inf, 0.0, np.inf])
    assert np.isnan(errors[1]) and 1e15 < errors[2] < np.inf
    errors = reference.ulp_errors(np.array([0.0, -0.0]), np.array([0.0, 2.0**-1070]))
    np.testing.assert_array_equal(errors, [0.0, 16.0])


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: reference.cbrt_reference(np.arange(3)), TypeError, "x must be"),
        (lambda: reference.cbrt_reference(np.ones(2, complex)), TypeError, "x must be"),
        (lambda: reference.grad_given_y_reference(np.ones(2, np.float16)), TypeError, "y must"),
        (lambda: reference.grad_reference(np.ones(2), 1j), TypeError, "g must be"),
        (lambda: reference.grad_reference(np.ones(2), np.ones(3)), ValueError, "g must broadcast"),
        (lambda: reference.ulp_errors(np.ones(2, complex), np.ones(2)), TypeError, "x must be"),
        (lambda: reference.ulp_errors(np.ones(2), np.arange(2)), TypeError, "y must be"),
        (lambda: reference.ulp_errors(np.ones(2), np.ones(3)), ValueError, "same shape"),
        (lambda: reference.ulp_errors(np.ones(2), np.ones(2), "grad", "1"), TypeError, "g must"),
        (lambda: reference.ulp_errors(np.ones(2), np.ones(2), "sqrt"), ValueError, "kind"),
        (lambda: reference.exact_decisions(np.ones(2), np.ones(1)), ValueError, "same shape"),
    ],
)
def test_bad_input_names_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_verify_row_checks_the_reference_with_mpmath():
    row = report.verify_backend("cpu", np.dtype(np.float64), 300)
    assert row.mpmath_checked >= 3 * 300 * 0.9 and row.mpmath_max_diff < 1e-9
    assert row.reference_agrees
    assert "mpmath at 200 bits rechecked" in report.format_rows([row])


def test_verify_row_fails_when_the_reference_disagrees_with_mpmath(monkeypatch):
    measure = reference.ulp_errors

    def off_by_a_little(x, y, kind="cbrt", g=1.0):
        return measure(x, y, kind, g) + 1e-5

    monkeypatch.setattr(report.reference, "ulp_errors", off_by_a_little)
    row = report.verify_backend("numpy", np.dtype(np.float32), 200)  # a backend with no bar
    assert not row.passed and not row.reference_agrees
    assert "disagree" in report.format_rows([row])
