"""The float32 gradient's fast path and its second pass (kernels/cpu/blocks.py, grad_block).

The fast path rounds the float64 quotient q64 to float32; that double rounding
is wrong only where q64 is itself a float32 midpoint, and those lanes go to the
scalar kernel (elsewhere, tiny results, infinities and nans included, the fast
path gives the scalar kernel's bits, which the layout test checks). The pairs below
were found by searching 1.7e9 random (g, y) for a q64 that is a midpoint.
"""

from fractions import Fraction

import numba
import numpy as np
import pytest

from cbrtgrad.kernels.cpu import catalog as cpu
from cbrtgrad.verification import cases

from .backends._cases import same_bits

#: (g, y) whose float64 quotient is exactly a float32 midpoint.
MIDPOINT_PAIRS = [
    # rounding q64 again gives the wrong neighbour
    (float.fromhex("-0x1.7C01F6p2"), float.fromhex("0x1.ABC48Ep17")),
    # rounding q64 again happens to be right
    (float.fromhex("-0x1.4A2A36p8"), float.fromhex("0x1.562128p13")),
]


def _correctly_rounded(g: np.float32, y: np.float32) -> np.float32:
    exact = Fraction(float(g)) / (3 * Fraction(float(y)) ** 2)
    near = np.float32(float(exact))
    below, above = (np.nextafter(near, np.float32(v)) for v in (-np.inf, np.inf))
    candidates = [below, near, above]
    return min(candidates, key=lambda c: abs(Fraction(float(c)) - exact))


_grad_fast = cpu.FORMULAS.cube_root_grad_f32_fast
_grad_one_element = cpu.FORMULAS.cube_root_grad_f32


@numba.njit
def _fast(g, y):  # type: ignore[no-untyped-def]
    return _grad_fast(g, y)


@numba.njit(error_model="numpy")
def _scalar_kernel(g, y, dx):  # type: ignore[no-untyped-def]
    for i in range(y.shape[0]):
        dx[i] = _grad_one_element(g[i], y[i])


@pytest.mark.parametrize(("g", "y"), MIDPOINT_PAIRS)
def test_a_midpoint_quotient_is_hard_and_correctly_rounded(g, y):
    g, y = np.float32(g), np.float32(y)
    yd = np.float64(y)
    q64 = np.float64(g) / (3.0 * yd * yd)
    assert int(q64.view(np.int64)) & ((1 << 29) - 1) == 1 << 28  # a float32 midpoint
    _, hard = _fast(g, y)
    assert hard
    want = _correctly_rounded(g, y)
    # Embedded in blocks of ordinary lanes, at a block edge and inside one.
    rng = np.random.default_rng(5)
    gs = rng.uniform(-2, 2, 3000).astype(np.float32)
    ys = rng.uniform(0.5, 4, 3000).astype(np.float32)
    for where in (0, 1023, 1024, 2500):
        gs[where], ys[where] = g, y
    dx = cpu.ufuncs().cube_root_grad(gs, ys)
    assert dx[1023] == want and dx[2500] == want
    reference = np.empty_like(ys)
    _scalar_kernel(gs, ys, reference)
    assert same_bits(dx, reference)


def test_the_naive_double_rounding_is_wrong_on_the_first_pair():
    # So the test above can fail: without the second pass this pair is off.
    g, y = (np.float32(v) for v in MIDPOINT_PAIRS[0])
    naive = np.float32(np.float64(g) / (3.0 * np.float64(y) ** 2))
    assert naive != _correctly_rounded(g, y)


def _edge_pairs(n: int, rng: np.random.Generator, specials: int) -> tuple[np.ndarray, np.ndarray]:
    """(g, y): float32 roots y and g for quotients from 2^-155 (below the
    subnormals) to 2^135 (past overflow), ``specials`` special values put in each."""
    y = np.cbrt(cases.random_inputs(np.dtype(np.float32), n), dtype=np.float32)
    return cases.gradient_pairs(y, rng, (-155, 135), specials=specials)


LAYOUTS = ["contiguous", "in place g", "in place y", "strided", "broadcast"]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_fast_path_gives_the_scalar_kernels_bits(layout):
    # Ordinary operands, the edges of the fast path (tiny and overflowing
    # quotients, zeros, infinities, nans): every lane the bits of the scalar
    # kernel, whichever pass computed it.
    g, y = _edge_pairs(200_003, np.random.default_rng(11), 64)
    if layout == "broadcast":
        g = np.broadcast_to(np.float32(-1.5), y.shape)
    want = np.empty_like(y)
    with np.errstate(all="ignore"):
        _scalar_kernel(np.ascontiguousarray(g), y, want)
        ufunc = cpu.ufuncs().cube_root_grad
        if layout == "contiguous" or layout == "broadcast":
            got = ufunc(g, y)
        elif layout == "in place g":
            got = ufunc(g, y, out=g)
        elif layout == "in place y":
            got = ufunc(g, y, out=y)
        else:
            gs, ys = np.repeat(g, 2)[::2], np.repeat(y, 2)[::2]
            got = ufunc(gs, ys)
    assert same_bits(got, want)


_grad_branching = cpu.FORMULAS.cube_root_grad_f32_branching


@numba.njit(error_model="numpy")
def _branching_kernel(g, y, dx):  # type: ignore[no-untyped-def]
    for i in range(y.shape[0]):
        dx[i] = _grad_branching(g[i], y[i])


def test_the_cuda_form_gives_the_scalar_kernels_bits():
    # The CUDA kernels' float32 gradient (cube_root_grad_f32_branching: no
    # conversion between types for normal operands and results), compiled
    # for the CPU: the scalar kernel's bits on the midpoint pairs, on
    # quotients across the whole float32 range (the subnormal and overflow
    # edges included: 2^-155 to 2^135), with zeros, subnormals, infs and
    # nans among the operands, and on random bit patterns of both.
    n = 400_000
    rng = np.random.default_rng(12)
    g, y = _edge_pairs(n, rng, 256)
    pairs = np.array(MIDPOINT_PAIRS, np.float32)
    patterns = rng.integers(0, 2**32, (2, n), dtype=np.uint64).astype(np.uint32).view(np.float32)
    g = np.concatenate([pairs[:, 0], -pairs[:, 0], g, patterns[0]])
    y = np.concatenate([pairs[:, 1], pairs[:, 1], y, patterns[1]])
    want, got = np.empty_like(y), np.empty_like(y)
    with np.errstate(all="ignore"):
        _scalar_kernel(g, y, want)
        _branching_kernel(g, y, got)
    assert same_bits(got, want)
    # Near 2^128 one more ulp makes the result inf: the right answer, by the bits.
    assert np.isinf(want).sum() > 100 and np.isfinite(want).sum() > n
