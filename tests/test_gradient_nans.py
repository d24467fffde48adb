"""The gradient's nan results, bit for bit, wherever they are computed.

A nan result of ``g / (3 y^2)`` is g's nan if g is one, else y's, quieted,
else (0/0, inf/inf) the default nan of x86, sign set: the bits numpy's
``g / (3*y*y)`` gives on x86. Before, the float64 CPU loops returned g's nan
in their vector loop and y's in their scalar tail for two nans, and the
float32 kernels put g's sign on y's nan; arm64's default nan has no sign, and
a GPU may return its canonical nan. Checked at every position of arrays that
span the vector loops, their scalar tails and several blocks, in place too,
for each backend that runs cbrtgrad's kernels (the CUDA kernels under the
simulator) and for the scalar formulas the GPU runs.
"""

from __future__ import annotations

import platform

import numba
import numpy as np
import pytest

import cbrtgrad
from cbrtgrad.backends import get_backend
from cbrtgrad.kernels.cpu import blocks

_BITS = {np.dtype(np.float32): np.uint32, np.dtype(np.float64): np.uint64}
_ON_X86 = platform.machine().lower() in {"x86_64", "amd64", "i686", "x86"}


def _nans(dtype: np.dtype) -> np.ndarray:
    """Quiet and signaling nans of both signs, with and without a payload."""
    if dtype == np.float32:
        patterns = [0x7FC00000, 0xFFC00000, 0x7FC12345, 0xFFE00001, 0x7F800001, 0xFF812345]
    else:
        patterns = [
            0x7FF8000000000000,
            0xFFF8000000000000,
            0x7FF8123456789ABC,
            0xFFFC000000000001,
            0x7FF0000000000001,
            0xFFF0123456789ABC,
        ]
    return np.array(patterns, _BITS[dtype]).view(dtype)


def _expected(g: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The rule, from the bits alone (independent of any arithmetic)."""
    kind = _BITS[g.dtype]
    width = 8 * g.dtype.itemsize
    mantissa = 23 if width == 32 else 52
    quiet = kind(1 << (mantissa - 1))
    # The sign, the exponent and the quiet bit set:
    default = kind((((1 << (width - mantissa)) - 1) << mantissa) | (1 << (mantissa - 1)))
    gb, yb = g.view(kind), y.view(kind)
    return np.where(np.isnan(g), gb | quiet, np.where(np.isnan(y), yb | quiet, default))


def _nan_pairs(dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Every (g, y) whose gradient is a nan: a nan operand, 0/0 or inf/inf."""
    t = dtype.type
    nans = _nans(dtype)
    others = np.array([1.0, -2.5, 0.0, -0.0, np.inf, -np.inf, 3e-39], dtype)
    values = np.concatenate([nans, others])
    g = np.repeat(values, values.size)
    y = np.tile(values, values.size)
    nan_result = np.isnan(g) | np.isnan(y)
    invalid = [(t(a), t(b)) for a in (0.0, -0.0) for b in (0.0, -0.0)]
    invalid += [(t(a), t(b)) for a in (np.inf, -np.inf) for b in (np.inf, -np.inf)]
    gi, yi = (np.array(v, dtype) for v in zip(*invalid, strict=True))
    return np.concatenate([g[nan_result], gi]), np.concatenate([y[nan_result], yi])


def _scattered(dtype: np.dtype, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ordinary pairs with the nan pairs scattered over them, and where they went."""
    rng = np.random.default_rng(seed)
    g = rng.standard_normal(n).astype(dtype)
    y = (rng.standard_normal(n) + 3.0).astype(dtype)
    gn, yn = _nan_pairs(dtype)
    at = rng.choice(n, gn.size, replace=False)
    # The last few elements too: the scalar tail after the vector loop.
    at[:3] = [n - 1, n - 2, n - 5]
    g[at], y[at] = gn, yn
    return g, y, at


DTYPES = [np.dtype(np.float32), np.dtype(np.float64)]
# Within one block, and across blocks with a ragged end.
SIZES = [200, 3 * blocks.SECOND_PASS_BLOCK + 37]


@pytest.mark.parametrize("name", ["cpu", "parallel"])
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_host_kernels_give_the_rule_at_every_position(dtype, n, name):
    g, y, at = _scattered(dtype, n, seed=n)
    backend = get_backend(name)
    with np.errstate(all="ignore"):
        dx = backend.cube_root_grad(g, y)
        in_place = g.copy()
        backend.cube_root_grad(in_place, y, out=in_place)
    kind = _BITS[dtype]
    want = _expected(g[at], y[at])
    assert np.array_equal(dx[at].view(kind), want)
    assert np.array_equal(in_place.view(kind), dx.view(kind))
    # And nothing else moved: the other lanes are the kernel's on clean input.
    rest = np.ones(n, bool)
    rest[at] = False
    clean = backend.cube_root_grad(g[rest], y[rest])
    assert np.array_equal(dx[rest].view(kind), clean.view(kind))


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_fused_kernel_and_a_scalar_g(dtype):
    # cbrt_and_grad: y = cbrt(x) keeps x's nan (quieted), so dx follows the
    # rule with that y; a scalar nan g (the parallel backend's grad of a sum).
    x = np.concatenate([_nans(dtype), np.array([8.0, 0.0, -np.inf], dtype)])
    g = np.resize(np.concatenate([_nans(dtype)[::-1], np.array([1.0, 0.0], dtype)]), x.size)
    kind = _BITS[dtype]
    for name in ("cpu", "parallel"):
        with np.errstate(all="ignore"):
            y, dx = cbrtgrad.cbrt_and_grad(x, g, backend=name)
        nan = np.isnan(dx)
        assert nan.any()
        assert np.array_equal(dx[nan].view(kind), _expected(g[nan], y[nan]))
    y = np.full(5000, np.nan, dtype)
    y[::7] = 2.0
    with np.errstate(all="ignore"):
        dx = cbrtgrad.cbrt_grad(_nans(dtype)[3], y, backend="parallel")
    g_full = np.full(y.size, _nans(dtype)[3], dtype)
    assert np.array_equal(dx.view(kind), _expected(g_full, y))


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_scalar_formulas_the_gpu_runs(dtype):
    # The CUDA kernels' formulas (the branching float32 form, the float64
    # one), compiled for the CPU, one element at a time.
    # (Through a numba function: the formulas have no Python entry,
    # kernels/internal_jit.py.)
    f = blocks.FORMULAS
    formula = f.cube_root_grad_f32_branching if dtype == np.float32 else f.cube_root_grad_f64
    grad = numba.njit(error_model="numpy")(lambda a, b: formula(a, b))
    g, y = _nan_pairs(dtype)
    with np.errstate(all="ignore"):
        got = np.array([grad(a, b) for a, b in zip(g, y, strict=True)], dtype)
    assert np.array_equal(got.view(_BITS[dtype]), _expected(g, y))


@pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_kernels_under_the_simulator(dtype):
    cuda = pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
    g, y, at = _scattered(dtype, 300, seed=5)
    with np.errstate(all="ignore"):
        dx = cbrtgrad.cbrt_grad(cuda.to_device(g), cuda.to_device(y)).copy_to_host()
        host = cbrtgrad.cbrt_grad(g, y, backend="cpu")
    kind = _BITS[dtype]
    assert np.array_equal(dx[at].view(kind), _expected(g[at], y[at]))
    assert np.array_equal(dx.view(kind), host.view(kind))


@pytest.mark.skipif(not _ON_X86, reason="numpy's nans are the CPU's: the rule is x86's")
@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_gives_the_same_nans_on_x86(dtype):
    # The rule is numpy's g / (3*y*y) on x86: the reason for choosing it.
    g, y = _nan_pairs(dtype)
    with np.errstate(all="ignore"):
        numpy_dx = g / (dtype.type(3) * y * y)
        ours = cbrtgrad.cbrt_grad(g, y, backend="cpu")
    kind = _BITS[dtype]
    assert np.array_equal(numpy_dx.view(kind), _expected(g, y))
    assert np.array_equal(ours.view(kind), numpy_dx.view(kind))


def test_gradient_pairs_refuses_bad_arguments():
    # cases.gradient_pairs, which draws this suite's and gpu_check's pairs.
    from cbrtgrad.verification.cases import gradient_pairs

    rng = np.random.default_rng(0)
    y = np.ones(4, np.float32)
    with pytest.raises(TypeError, match="y must be a float32 or float64 ndarray"):
        gradient_pairs([1.0, 2.0], rng, (0, 1))
    with pytest.raises(TypeError, match="y must be a float32 or float64 ndarray"):
        gradient_pairs(np.ones(4, np.int64), rng, (0, 1))
    with pytest.raises(ValueError, match="lo < hi"):
        gradient_pairs(y, rng, (3, 3))
    with pytest.raises(ValueError, match="specials must be at least 0"):
        gradient_pairs(y, rng, (0, 1), specials=-1)
    g, y2 = gradient_pairs(y, rng, (0, 1), specials=2)
    assert g.dtype == np.float32 and y2.shape == y.shape and y2 is not y
