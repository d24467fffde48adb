"""The float64 gradient, correctly rounded: the rounding test, the exact pass and their domain.

``tests/data/grad_f64_hard.txt`` holds 40 pairs (g, y) whose exact
``g / (3 y^2)`` lies within 2^-98 of a midpoint between doubles, constructed
from the convergents of ``3 Y^2 / 2^s``; the kernel before the rounding test
misrounded 15 of them. Exact answers come from Python fractions (float() of a
Fraction is correctly rounded).
"""

from fractions import Fraction
from pathlib import Path

import numba
import numpy as np
import pytest

import cbrtgrad
from cbrtgrad.kernels.cpu import catalog as cpu
from cbrtgrad.kernels.formulas.exact_rounding import make_exact_rounding
from cbrtgrad.kernels.formulas.primitives import CPU_PRIMITIVES

from .backends._cases import same_bits

HARD = Path(__file__).parent / "data" / "grad_f64_hard.txt"


def _hard_pairs() -> tuple[np.ndarray, np.ndarray]:
    rows = [
        [float.fromhex(v) for v in line.split()]
        for line in HARD.read_text().splitlines()
        if line and not line.startswith("#")
    ]
    pairs = np.array(rows)
    return pairs[:, 0].copy(), pairs[:, 1].copy()


def _exact(g: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.array(
        [float(Fraction(a) / (3 * Fraction(b) ** 2)) for a, b in zip(g, y, strict=True)]
    )


_grad_fast = cpu.FORMULAS.cube_root_grad_f64_fast
_grad_one_element = cpu.FORMULAS.cube_root_grad_f64


@numba.njit
def _hard_flags(g, y):  # type: ignore[no-untyped-def]
    flags = np.zeros(g.shape[0], np.bool_)
    for i in range(g.shape[0]):
        flags[i] = _grad_fast(g[i], y[i])[1]
    return flags


@numba.njit(error_model="numpy")
def _scalar_kernel(g, y):  # type: ignore[no-untyped-def]
    out = np.empty_like(y)
    for i in range(y.shape[0]):
        out[i] = _grad_one_element(g[i], y[i])
    return out


def test_the_hard_pairs_are_flagged_and_decided_exactly():
    g, y = _hard_pairs()
    assert g.size == 40
    assert _hard_flags(g, y).all()
    want = _exact(g, y)
    for backend in ("cpu", "parallel"):
        assert same_bits(cbrtgrad.cbrt_grad(g, y, backend=backend), want), backend
    # Scaled by 2^(3k) in g and 2^k in y: the same quotient times 2^k, as hard.
    for k in (-60, -7, 5, 60):
        gs, ys = np.ldexp(g, 3 * k), np.ldexp(y, k)
        assert same_bits(cbrtgrad.cbrt_grad(gs, ys), np.ldexp(want, k))


def test_the_first_hard_pairs_were_misrounded_without_the_test():
    # So the test above can fail: q + t rounded once is wrong on some of them.
    g, y = _hard_pairs()
    with np.errstate(all="ignore"):
        plain = g / (3.0 * y * y)
    assert (plain != _exact(g, y)).any()


def test_random_pairs_against_fractions():
    rng = np.random.default_rng(17)
    n = 20_000
    # Inside the proved domain: |g| and |g / (3 y^2)| between about 10^-290 and 10^290.
    y = np.cbrt(rng.standard_normal(n) * 10.0 ** rng.integers(-240, 240, n))
    g = rng.standard_normal(n) * 10.0 ** rng.integers(-50, 50, n)
    dx = cbrtgrad.cbrt_grad(g, y)
    assert same_bits(dx, _exact(g, y))


@pytest.mark.parametrize("layout", ["contiguous", "in place g", "in place y", "strided"])
def test_every_layout_gives_the_scalar_kernels_bits(layout):
    g, y = _hard_pairs()
    rng = np.random.default_rng(3)
    n = 5000
    gs = rng.standard_normal(n) * 2.0 ** rng.integers(-1070, 1020, n)
    ys = np.cbrt(rng.standard_normal(n) * 2.0 ** rng.integers(-1070, 1020, n))
    where = rng.integers(0, n, g.size)
    gs[where], ys[where] = g, y
    gs[:8] = [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, 1e-310, 1.0]
    ys[8:16] = [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, 1e-310, 1e300]
    with np.errstate(all="ignore"):
        want = _scalar_kernel(gs, ys)
        ufunc = cpu.ufuncs().cube_root_grad
        if layout == "contiguous":
            got = ufunc(gs, ys)
        elif layout == "in place g":
            got = ufunc(gs, ys, out=gs)
        elif layout == "in place y":
            got = ufunc(gs, ys, out=ys)
        else:
            got = ufunc(np.repeat(gs, 2)[::2], np.repeat(ys, 2)[::2])
    assert same_bits(got, want)


def test_the_integer_test_against_fractions():
    exact = make_exact_rounding(CPU_PRIMITIVES, numba.njit)
    rng = np.random.default_rng(29)
    for _ in range(300):
        y = float(rng.uniform(1.0, 2.0) * 2.0 ** rng.integers(-200, 200))
        q = float(rng.uniform(1.0, 2.0) * 2.0 ** rng.integers(-300, 300))
        lower, upper = q, float(np.nextafter(q, np.inf))
        m = (Fraction(lower) + Fraction(upper)) / 2
        near = float(m * 3 * Fraction(y) ** 2)
        for g in (near, float(np.nextafter(near, 0.0)), float(np.nextafter(near, np.inf))):
            want = Fraction(g) > 3 * m * Fraction(y) ** 2
            assert bool(exact.above_midpoint_times_square(g, lower, upper, y)) == want
