"""Half precision (float16, ml_dtypes' bfloat16): one dtype rule, correctly rounded results.

The rule (cbrtgrad.arrays.dtypes): half precision is computed in float32 and
returned as float32, by the api and the graph engine alike. A half-precision
result exists only in an ``out=`` array of that dtype, and there it is
correctly rounded in its own precision (a double rounding through float32 is
not: 20 float16 inputs of the cube root come out one step off). Checked here
for all 65,536 bit patterns of each dtype against exact rational arithmetic.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import cbrtgrad as cg
from cbrtgrad.arrays import half as _half

ml_dtypes = pytest.importorskip("ml_dtypes")
HALVES = {"float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16)}
HOST = ("cpu", "numpy", "parallel")


def _all(dtype):
    return np.arange(1 << 16, dtype=np.uint16).view(dtype)


def _neighbours(r, dtype):
    """The half values just below and above |r| (as Fractions; inf as None)."""
    bits = np.abs(r).astype(dtype).view(np.uint16).astype(np.int64)
    below = np.maximum(bits - 1, 0).astype(np.uint16).view(dtype).astype(np.float64)
    above = (bits + 1).astype(np.uint16).view(dtype).astype(np.float64)
    return below, above


def _misrounded(value_of, x, r, dtype):
    """Indices where ``r`` is not ``value_of(i)`` rounded to nearest in ``dtype`` (exact check).

    ``value_of(i)`` returns ``(target, power)``: the exact value is ``target ** (1/power)``
    compared through ``(midpoint ** power)`` so that everything stays rational.
    """
    rs = r.astype(np.float64)
    with np.errstate(invalid="ignore"):
        below, above = _neighbours(rs, dtype)
    largest = np.array([ml_dtypes.finfo(dtype).max], dtype)
    top = Fraction(float(largest.astype(np.float64)[0]))
    before_top = (largest.view(np.uint16) - np.uint16(1)).view(dtype).astype(np.float64)[0]
    threshold = top + (top - Fraction(float(before_top))) / 2  # 65520 for float16
    bad = []
    for i in range(rs.size):
        target, compare = value_of(i)
        if target is None:
            continue
        if np.isinf(rs[i]):  # overflow: the exact value is at or beyond the threshold
            if compare(threshold) > target:
                bad.append(i)
            continue
        mag = Fraction(abs(rs[i]))
        low = (Fraction(below[i]) + mag) / 2 if mag != 0 else Fraction(0)
        high = (mag + Fraction(above[i])) / 2 if np.isfinite(above[i]) else None
        if compare(low) > target or (high is not None and compare(high) < target):
            bad.append(i)
    return bad


@pytest.mark.parametrize("name", HALVES)
def test_cube_root_into_a_half_out_is_correctly_rounded_for_all_65536_inputs(name):
    dtype = HALVES[name]
    x = _all(dtype)
    with np.errstate(invalid="ignore"):  # ml_dtypes flags its nans' conversion
        xs = x.astype(np.float64)
    out = np.empty(x.size, dtype)
    with np.errstate(all="ignore"):
        assert cg.cbrt(x, out=out) is out
    finite = np.isfinite(xs) & (xs != 0)

    def value_of(i):
        return (Fraction(abs(xs[i])) if finite[i] else None), (lambda m: m**3)

    assert _misrounded(value_of, x, out, dtype) == []
    got = out.astype(np.float64)
    assert np.array_equal(np.signbit(got[finite]), np.signbit(xs[finite]))
    special = ~finite
    assert np.array_equal(got[special], xs[special], equal_nan=True)
    assert np.array_equal(np.signbit(got[special]), np.signbit(xs[special]))
    # The double rounding it replaces: wrong where float32 lands on a midpoint.
    double = cg.cbrt(x).astype(dtype).astype(np.float64)
    wrong = np.flatnonzero((double != got) & finite)
    if name == "float16":
        assert wrong.size == 20 and x[wrong].astype(np.float64).tolist().count(8.112e-05) == 0
        assert np.float16(8.112e-05) in x[wrong]
    for i in wrong:  # the same from a scalar into a 0-d out
        zero_d = np.empty((), dtype)
        cg.cbrt(x[i], out=zero_d)
        assert zero_d.view(np.uint16) == out[i : i + 1].view(np.uint16)[0]


@pytest.mark.parametrize("name", HALVES)
def test_gradient_into_a_half_out_is_correctly_rounded_for_all_65536_y(name):
    dtype = HALVES[name]
    y = _all(dtype)
    with np.errstate(invalid="ignore"):  # ml_dtypes flags its nans' conversion
        ys = y.astype(np.float64)
    for g_value in (1.0, -0.1):
        g = np.full(y.size, g_value).astype(dtype)
        gs = Fraction(float(g[0].astype(np.float64)))
        out = np.empty(y.size, dtype)
        with np.errstate(all="ignore"):
            cg.cbrt_grad(g, y, out=out)
        usable = np.isfinite(ys) & (ys != 0)

        def value_of(i, usable=usable, gs=gs):
            if not usable[i]:
                return None, None
            y2 = Fraction(ys[i]) ** 2
            return abs(gs), (lambda m, y2=y2: 3 * m * y2)

        assert _misrounded(value_of, y, out, dtype) == []


@pytest.mark.parametrize("backend", HOST)
def test_the_rule_on_every_backend_and_in_the_engine(backend):
    for name, dtype in HALVES.items():
        x = np.array([8.0, -27.0, 8.112e-05], dtype)
        assert cg.cbrt(x, backend=backend).dtype == np.float32, name
        assert cg.cbrt_grad(x, x, backend=backend).dtype == np.float32
        assert all(r.dtype == np.float32 for r in cg.cbrt_and_grad(x, x, backend=backend))
        with cg.backends.use_backend(backend):
            t = cg.Tensor(x, requires_grad=True)
            y = cg.cbrt(t)
            assert y.dtype == np.float32  # the same rule as the api
            y.sum().backward()
            assert t.grad.dtype == dtype  # cast back to the leaf by the recorded cast
            out = cg.Tensor(np.zeros(3, dtype))
            with cg.no_grad():
                cg.cbrt(cg.Tensor(x), out=out)
            expected = np.empty(3, dtype)
            cg.cbrt(x, out=expected)
            assert np.array_equal(out.numpy().view(np.uint16), expected.view(np.uint16))


def test_dtype_keyword_takes_bfloat16():
    x = np.array([8.0, 27.0])
    assert cg.cbrt(x, dtype=HALVES["bfloat16"]).dtype == np.float32


@pytest.mark.parametrize("name", HALVES)
def test_half_reductions_accumulate_in_float32(name):
    dtype = HALVES[name]
    t = cg.Tensor(np.full(70_000, 1.0, dtype), requires_grad=True)
    m = t.mean()
    m.backward()
    assert float(m.item()) == 1.0
    expected = np.asarray(np.float32(1 / 70_000)).astype(dtype)
    assert t.grad.dtype == dtype and (t.grad == expected).all() and expected != 0
    # A sum of many small values, each below the spacing of the running total in half precision.
    small = cg.Tensor(np.full(4096, 2.0**-4, dtype))
    assert float(small.sum().item()) == 256.0
    assert float(small.mean().item()) == 2.0**-4


def test_half_helpers_on_special_values():
    for dtype in HALVES.values():
        x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], dtype)
        r = _half.cube_root(x, cg.cbrt(x), dtype)
        assert np.array_equal(r.astype(np.float64), x.astype(np.float64), equal_nan=True)
        assert np.array_equal(np.signbit(r.astype(np.float64)), np.signbit(x.astype(np.float64)))


def _midpoints(dtype):
    """Every positive midpoint between adjacent finite half values, the overflow threshold
    last, with the neighbours ``(low, high)`` and the one round-half-even picks."""
    finite = _all(dtype)[: 0x7F80 if dtype.name == "bfloat16" else 0x7C00]
    low = finite.astype(np.float64)
    high = np.append(low[1:], np.inf)
    step = np.append(np.diff(low), low[-1] - low[-2])
    mid = low + step / 2  # exact in float64; the last is the threshold
    even = np.where(finite.view(np.uint16) % 2 == 0, low, high)
    return mid, low, high, even


@pytest.mark.parametrize("name", HALVES)
def test_exact_midpoints_round_half_even_on_every_route(name):
    # A float64 x whose cube root is exactly a half midpoint (m^3 has at most
    # 36 bits): the result is the even neighbour, as np.float16(2051.0) is 2052,
    # and the overflow threshold goes to inf. Compared with numpy's (ml_dtypes')
    # own rounding of the midpoint itself: mid.astype(dtype).
    dtype = HALVES[name]
    mid, low, high, even = _midpoints(dtype)
    with np.errstate(over="ignore"):  # the threshold overflows, as it should
        assert np.array_equal(mid.astype(dtype).astype(np.float64), even)
    x = np.concatenate([mid**3, -(mid**3)])
    expected = np.concatenate([even, -even])
    out = np.empty(x.size, dtype)
    cg.cbrt(x, out=out)
    assert np.array_equal(out.astype(np.float64), expected)
    # Just off the tie, each side rounds by its side: the float64 neighbours of m^3.
    above = np.nextafter(mid[:-1] ** 3, np.inf)
    below = np.nextafter(mid[:-1] ** 3, 0)
    inner = mid[:-1] > 2.0**-40  # well inside float64's normal range once cubed
    cg.cbrt(above[inner], out=(got := np.empty(inner.sum(), dtype)))
    assert np.array_equal(got.astype(np.float64), high[:-1][inner])
    cg.cbrt(below[inner], out=got)
    assert np.array_equal(got.astype(np.float64), low[:-1][inner])
    # The other routes to a half out: a tuple, a byte-swapped array, a tensor's .data.
    sample = x[:: max(1, x.size // 300)]
    reference = np.empty(sample.size, dtype)
    cg.cbrt(sample, out=reference)
    routes = [(np.empty(sample.size, dtype),)]
    if name == "float16":
        routes.append(np.empty(sample.size, ">f2"))
    for out in routes:
        cg.cbrt(sample, out=out)
        got = out[0] if isinstance(out, tuple) else out
        assert np.array_equal(got.astype(np.float64), reference.astype(np.float64))
    for k in range(0, x.size, max(1, x.size // 20)):  # 0-d: a scalar in, a 0-d out
        zero_d = np.empty((), dtype)
        cg.cbrt(x[k], out=zero_d)
        assert float(zero_d) == expected[k], (k, x[k])
    t = cg.Tensor(np.zeros(sample.size, dtype))
    before = t.version
    cg.cbrt(sample, out=t.data)
    assert t.version > before
    assert np.array_equal(t.numpy().astype(np.float64), reference.astype(np.float64))


@pytest.mark.parametrize("name", HALVES)
def test_gradient_exact_midpoints_round_half_even(name):
    # g / (3 y^2) exactly a midpoint: g = 3 m y^2 with y a power of two (exact
    # in float64 and, for these m, in float32): the even neighbour, from
    # float64 and from float32 operands alike.
    dtype = HALVES[name]
    mid, low, high, even = _midpoints(dtype)
    keep = (mid > 2.0**-100) & (mid < 2.0**100)
    mid, even = mid[keep], even[keep]
    for y_value in (1.0, 0.25, 8.0):
        g = 3 * mid * y_value**2
        for operands in (np.float64, np.float32):
            out = np.empty(mid.size, dtype)
            cg.cbrt_grad(g.astype(operands), np.full(mid.size, y_value, operands), out=out)
            assert np.array_equal(out.astype(np.float64), even), (y_value, operands)


def test_where_with_a_half_out_computes_only_the_selected_elements():
    # As np.divide(g, 3*y*y, out=o, where=w): the masked-out y = 0 raise nothing.
    g, y = np.ones(4), np.array([0.0, 2.0, 0.0, 1.0])
    where = np.array([False, True, False, True])
    out, out2 = np.full(4, 7.0, np.float16), np.full(4, 7.0, np.float16)
    with np.errstate(all="raise"):
        cg.cbrt_grad(g, y, out=out, where=where)
        cg.cbrt(np.array([1e300, 8.0, np.nan, 27.0]), out=out2, where=where)
    assert out.tolist() == [7.0, np.float16(1 / 12), 7.0, np.float16(1 / 3)]
    assert out2.tolist() == [7.0, 2.0, 7.0, 3.0]
