"""The float64 cube root is correctly rounded: the evidence the tests can hold.

The oracle is ``cbrtgrad/verification/integer_oracle.py`` (Python integers, no floating point);
the hard inputs are the ones ``tools/cbrt_f64_evidence.py find-hard`` found by
searching random inputs for roots within about 2^-25 ulp of a midpoint (the
fast path's exact-path lanes). The 10^8-input random check is in that tool
(docs/accuracy.md gives its last result).
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numba
import numpy as np
import pytest

import cbrtgrad
from cbrtgrad.cli.bench.inputs import bench_inputs
from cbrtgrad.kernels.cpu import catalog as cpu
from cbrtgrad.kernels.formulas.exact_rounding import make_exact_rounding
from cbrtgrad.kernels.formulas.primitives import CPU_PRIMITIVES
from cbrtgrad.verification import cases
from cbrtgrad.verification.integer_oracle import correctly_rounded_cbrt

HARD_FILE = Path(__file__).parent / "data" / "cbrt_f64_hard.txt"
_fast = cpu.FORMULAS.cube_root_f64_fast
_plain = cpu.FORMULAS.cube_root_f64_plain
_one_element = cpu.FORMULAS.cube_root_f64


@numba.njit
def _hard_flags(values, out):  # type: ignore[no-untyped-def]
    for i in range(values.shape[0]):
        out[i] = _fast(values[i])[1] != 0


@numba.njit
def _both_paths(values, fast, plain):  # type: ignore[no-untyped-def]
    # Each path's result bits and whether it flagged the lane.
    for i in range(values.shape[0]):
        y, hard = _fast(values[i])
        fast[i, 0], fast[i, 1] = y, hard != 0
        y, hard = _plain(values[i])
        plain[i, 0], plain[i, 1] = y, hard != 0


def _hard() -> tuple[np.ndarray, np.ndarray]:
    rows = [line.split() for line in HARD_FILE.read_text().splitlines() if not line.startswith("#")]
    x = np.array([float.fromhex(a) for a, _ in rows])
    y = np.array([float.fromhex(b) for _, b in rows])
    return x, y


def test_the_oracle_agrees_with_fractions_at_the_midpoints():
    # The oracle's own check: its result y has x between the cubes of the
    # midpoints around y, in exact rationals.
    rng = np.random.default_rng(5)
    for x in np.ldexp(rng.uniform(1, 2, 300), rng.integers(-1074, 1024, 300)):
        y = correctly_rounded_cbrt(float(x))
        below = (Fraction(y) + Fraction(float(np.nextafter(y, 0)))) / 2
        above = (Fraction(y) + Fraction(float(np.nextafter(y, np.inf)))) / 2
        assert below**3 < Fraction(float(x)) < above**3


def test_exact_midpoint_test_against_fractions():
    above_midpoint_cubed = make_exact_rounding(CPU_PRIMITIVES, numba.njit).above_midpoint_cubed
    rng = np.random.default_rng(0)
    for trial in range(3000):
        lower = float(np.ldexp(rng.uniform(1, 2), int(rng.integers(-300, 300))))
        if trial % 5 == 0:  # just below a power of two: the spacing doubles above
            lower = float(np.nextafter(np.ldexp(1.0, int(rng.integers(-300, 300))), 0))
        upper = float(np.nextafter(lower, np.inf))
        cube = ((Fraction(lower) + Fraction(upper)) / 2) ** 3
        nearest = float(cube)
        for x in (nearest, float(np.nextafter(nearest, 0)), float(np.nextafter(nearest, np.inf))):
            assert bool(above_midpoint_cubed(x, lower, upper)) == (Fraction(x) > cube)


def _within_of_a_midpoint(x: float, y: float, delta: Fraction) -> bool:
    # Whether cbrt(|x|) lies within delta (relative) of the midpoint between
    # |y| and a neighbour, decided on cubes, exactly.
    ax, ay = Fraction(abs(x)), abs(y)
    for neighbour in (np.nextafter(ay, 0.0), np.nextafter(ay, np.inf)):
        m = (Fraction(ay) + Fraction(float(neighbour))) / 2
        if (m * (1 - delta)) ** 3 < ax < (m * (1 + delta)) ** 3:
            return True
    return False


def test_hard_inputs_list_is_exact_and_takes_the_exact_path():
    x, y = _hard()
    assert x.size >= 50
    assert all(correctly_rounded_cbrt(float(a)) == b for a, b in zip(x, y, strict=True))
    flags = np.zeros(x.size, np.bool_)
    _hard_flags(x, flags)
    # The fast path flags every lane whose root lies within 2^-77.2 of a
    # midpoint (its tolerance less its error, docs/mathematics.md). The list
    # holds the lanes an earlier kernel flagged, within about 2^-77: those
    # farther than 2^-78 may go either way, and are checked for the right
    # result on every backend below.
    delta = Fraction(1, 2**78)
    close = np.array([_within_of_a_midpoint(a, b, delta) for a, b in zip(x, y, strict=True)])
    assert close.sum() >= 0.3 * x.size
    assert flags[close].all()
    assert flags.mean() > 0.9


@pytest.mark.parametrize("backend", ["cpu", "parallel", "cuda"])
def test_hard_inputs_on_every_backend(backend):
    x, y = _hard()
    if backend == "cuda":
        # The simulator here (tests/conftest.py); a GPU with NUMBA_ENABLE_CUDASIM=0.
        cuda = pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
        got = cbrtgrad.cbrt(cuda.to_device(x)).copy_to_host()
    else:
        got = np.asarray(cbrtgrad.cbrt(x, backend=backend))
    assert np.array_equal(got.view(np.int64), y.view(np.int64))


def test_hard_inputs_over_all_binades_and_both_signs():
    # cbrt(x 8^k) = cbrt(x) 2^k exactly: the same hard cases in every binade
    # of the roots, subnormal inputs included.
    x, y = _hard()
    exponent = np.frexp(x)[1]
    for k in range(-358, 342, 3):
        shifted = exponent + 3 * k
        keep = (shifted > -1074 + 53) & (shifted < 1024)
        xs = np.ldexp(x[keep], 3 * k)
        want = np.ldexp(y[keep], k)
        got = cbrtgrad.cbrt(np.concatenate([xs, -xs]))
        assert np.array_equal(got, np.concatenate([want, -want])), k


def test_plain_path_is_the_fast_path_on_plain_inputs():
    # The plain fast path (blocks with no zero, inf, nan or |x| < 2^-800)
    # gives the full fast path's bits and flags, lane by lane: on the hard
    # list, on random plain inputs, and at the ends of the plain range.
    hard, _ = _hard()
    hard = hard[np.abs(hard) >= 2.0**-800]
    x = cases.random_inputs(np.dtype(np.float64), 200_000, seed=21)
    ends = [2.0**-800, float(np.nextafter(2.0**-800, 1.0)), np.finfo(np.float64).max]
    x = np.concatenate([hard, -hard, x[np.abs(x) >= 2.0**-800], ends, np.negative(ends)])
    fast = np.zeros((x.size, 2))
    plain = np.zeros((x.size, 2))
    _both_paths(x, fast, plain)
    assert np.array_equal(fast.view(np.int64), plain.view(np.int64))
    assert hard.size >= 50 and plain[: hard.size, 1].mean() > 0.9


def test_plain_and_mixed_blocks_give_the_same_bits():
    # A block with one input that is not plain takes the full fast path: the
    # same inputs with a zero beside each one (every block mixed) give the
    # same roots as alone (every block plain).
    hard, want = _hard()
    x = np.concatenate([hard, bench_inputs(np.dtype(np.float64), 5000, seed=22)])
    mixed = np.zeros(2 * x.size)
    mixed[0::2] = x
    for backend in ("cpu", "parallel"):
        alone = np.asarray(cbrtgrad.cbrt(x, backend=backend))
        beside = np.asarray(cbrtgrad.cbrt(mixed, backend=backend))
        assert np.array_equal(alone[: hard.size], want)
        assert np.array_equal(alone.view(np.int64), beside[0::2].view(np.int64))
        assert np.array_equal(beside[1::2], np.zeros(x.size))


@numba.njit
def _one_by_one(values, out):  # type: ignore[no-untyped-def]
    for i in range(values.shape[0]):
        out[i] = _one_element(values[i])


@pytest.mark.parametrize("special", [0.0, -np.inf, np.nan, 2.0**-1074, 2.0**-900])
@pytest.mark.parametrize("in_place", [False, True])
def test_a_block_that_is_not_plain_is_found_wherever_it_lies(special, in_place):
    # Each block checks the next one as it goes (forward_block_f64): an
    # input that is not plain at either end of any block, in the last (short)
    # block, or in the first, sends that block, and only it, to the full
    # path; every result equals the one-element formula's, in place too.
    block = cpu.SECOND_PASS_BLOCK
    x = bench_inputs(np.dtype(np.float64), 4 * block + 300, seed=23)
    want_plain = np.empty_like(x)
    _one_by_one(x, want_plain)
    for where in (0, block - 1, block, 2 * block - 1, 3 * block + 5, x.size - 1):
        y = x.copy()
        y[where] = special
        want = np.empty_like(y)
        _one_by_one(y, want)
        got = y.copy() if in_place else np.empty_like(y)
        cpu.ufuncs().cube_root(got if in_place else y, out=got)
        assert np.array_equal(got.view(np.int64), want.view(np.int64)), where
        others = np.arange(x.size) != where
        assert np.array_equal(got[others].view(np.int64), want_plain[others].view(np.int64))


_branching = cpu.FORMULAS.cube_root_f64_branching


@numba.njit
def _branching_one_by_one(values, out):  # type: ignore[no-untyped-def]
    for i in range(values.shape[0]):
        out[i] = _branching(values[i])


def test_the_cuda_form_is_the_cpu_kernel_bit_for_bit():
    # The CUDA kernels' float64 forward (cube_root_f64_branching: the plain
    # path, the exact one when it cannot decide, cube_root_f64 outside the
    # plain range), compiled for the CPU: the CPU kernel's bits on the hard
    # list in every binade, random bit patterns (subnormals, nans with
    # payloads, infs), the specials and both ends of the plain range.
    hard, _ = _hard()
    k = np.arange(-100, 100, 7)
    with np.errstate(over="ignore", under="ignore"):  # some reach inf or 0: inputs too
        scaled = np.ldexp(hard[:, None], 3 * k[None, :]).ravel()
    patterns = np.random.default_rng(24).integers(-(2**63), 2**63 - 1, 1_000_000, dtype=np.int64)
    lowest = 2.0**-800
    ends = [lowest, float(np.nextafter(lowest, 0.0)), float(np.nextafter(lowest, 1.0))]
    ends += [np.finfo(np.float64).max, np.inf, np.nan, 0.0, 5e-324, 2.0**-1022]
    x = np.concatenate([hard, scaled, patterns.view(np.float64), ends])
    x = np.concatenate([x, -x])
    got = np.empty_like(x)
    _branching_one_by_one(x, got)
    want = np.asarray(cbrtgrad.cbrt(x, backend="cpu"))
    assert np.array_equal(got.view(np.int64), want.view(np.int64))


def test_exact_cubes_are_exact():
    k = np.arange(1, int(2 ** (53 / 3)) + 1, dtype=np.int64)
    cubes = (k**3).astype(np.float64)
    for j in (-340, -100, 0, 100, 320):  # k^3 2^(3j) stays finite and normal
        xs = np.ldexp(cubes, 3 * j)
        assert np.array_equal(cbrtgrad.cbrt(xs), np.ldexp(k.astype(np.float64), j))
        assert np.array_equal(cbrtgrad.cbrt(-xs), -np.ldexp(k.astype(np.float64), j))


def test_random_inputs_against_python_integers():
    x = cases.random_inputs(np.dtype(np.float64), 5000, seed=11)
    got = cbrtgrad.cbrt(x)
    want = np.array([correctly_rounded_cbrt(float(v)) for v in x])
    assert np.array_equal(got, want)


def test_layouts_give_the_same_bits_on_hard_inputs():
    x, y = _hard()
    assert np.array_equal(cbrtgrad.cbrt(x[::-1]), y[::-1])
    wide = np.repeat(x, 3)
    assert np.array_equal(cbrtgrad.cbrt(wide[::3]), y)
    inplace = x.copy()
    cbrtgrad.cbrt(inplace, out=inplace)
    assert np.array_equal(inplace, y)
    two_d = np.stack([x, -x])
    assert np.array_equal(cbrtgrad.cbrt(two_d.T), np.stack([y, -y]).T)


def test_exact_path_is_rare_and_takes_the_tiny_inputs():
    # The fast path leaves about one lane in 10^7 to the exact path (2^-77
    # tolerance): 10^6 random inputs above 2^-800 have at most a handful.
    # Inputs below 2^-800 (subnormals included) all take the exact path.
    x = cases.random_inputs(np.dtype(np.float64), 1_000_000, seed=12)
    flags = np.zeros(x.size, np.bool_)
    _hard_flags(x, flags)
    tiny = np.abs(x) < 2.0**-800
    assert tiny.any() and flags[tiny].all()
    assert flags[~tiny].sum() <= 5


@pytest.mark.parametrize(
    ("bits", "dtype", "quiet"),
    [
        (0x7FF0000000000001, np.uint64, 0x7FF8000000000001),
        (0xFFF0000000000123, np.uint64, 0xFFF8000000000123),
        (0x7FF8000000000005, np.uint64, 0x7FF8000000000005),
        (0x7F800001, np.uint32, 0x7FC00001),
        (0xFF800123, np.uint32, 0xFFC00123),
    ],
)
def test_signaling_nan_comes_back_quiet_with_its_payload(bits, dtype, quiet):
    float_type = np.float64 if dtype is np.uint64 else np.float32
    x = np.array([bits], dtype).view(float_type)
    for backend in ("cpu", "parallel"):
        assert int(np.asarray(cbrtgrad.cbrt(x, backend=backend)).view(dtype)[0]) == quiet
