"""Property tests with hypothesis: symmetry, monotonicity, exact cubes, round trip."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import cbrtgrad as cg

finite64 = st.floats(allow_nan=False, allow_infinity=False)
finite32 = st.floats(allow_nan=False, allow_infinity=False, width=32)


@settings(max_examples=300, deadline=None)
@given(st.lists(finite64, min_size=1, max_size=50))
def test_odd_symmetry_bit_for_bit_f64(values):
    x = np.array(values)
    assert np.array_equal(cg.cbrt(-x).view(np.int64), (-cg.cbrt(x)).view(np.int64))


@settings(max_examples=300, deadline=None)
@given(st.lists(finite32, min_size=1, max_size=50))
def test_odd_symmetry_bit_for_bit_f32(values):
    x = np.array(values, np.float32)
    assert np.array_equal(cg.cbrt(-x).view(np.int32), (-cg.cbrt(x)).view(np.int32))


@settings(max_examples=300, deadline=None)
@given(finite64, finite64)
def test_monotone(a, b):
    lo, hi = min(a, b), max(a, b)
    assert cg.cbrt(lo) <= cg.cbrt(hi)


@settings(max_examples=300, deadline=None)
@given(st.integers(-(2**17), 2**17))
def test_exact_cube(k):
    assert cg.cbrt(float(k) ** 3) == k


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=1e-300, max_value=1e300))
def test_cube_of_root_is_close(x):
    y = cg.cbrt(x)
    # y has at most 0.5 ulp of error, so y^3 is within about 1.5 ulp of x.
    assert abs(y**3 - x) <= 4 * np.spacing(x)
