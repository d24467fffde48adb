"""cbrtgrad.jax: cbrtgrad's bits inside jax, through every transform.

Each result is compared bit for bit with cbrtgrad's own api called outside
XLA (whose threads flush subnormals: the bridge must not). Timing is not
checked here (asv_benches/benchmarks/bench_jax.py and ``cbrtgrad bench
--engine`` measure it).
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import cbrtgrad

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
ml_dtypes = pytest.importorskip("ml_dtypes")
cj = importlib.import_module("cbrtgrad.jax")
from cbrtgrad.jax._primitives import cbrt_p  # noqa: E402
from cbrtgrad.kernels.cpu import denormals  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
HALVES = {"float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16)}
UINT = {4: np.uint32, 8: np.uint64, 2: np.uint16}


@pytest.fixture(autouse=True)
def _ieee_quietly():
    # The references (cbrtgrad's api outside XLA) warn at y = 0 as numpy does;
    # jax functions do not warn, so neither does the bridge.
    with np.errstate(all="ignore"):
        yield


def _x64():
    # jax.enable_x64 (a context manager) replaced jax.experimental.enable_x64.
    enable = getattr(jax, "enable_x64", None)
    if enable is None:
        enable = importlib.import_module("jax.experimental").enable_x64
    return enable(True)


def _bits(a):
    a = np.asarray(a)
    return a.view(UINT[a.dtype.itemsize])


def _same_bits(got, expected):
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    differ = np.flatnonzero(_bits(got).ravel() != _bits(expected).ravel())
    assert differ.size == 0, (
        f"{differ.size} elements differ, first at {differ[:5]}: "
        f"{got.ravel()[differ[:5]]} != {expected.ravel()[differ[:5]]}"
    )


_ORDINARY = [0.0, 1.0, 8.0, 27.0, 0.125, 3.0, 1e-3]


def _specials(dtype):
    """Signed zeros, subnormals (extremes and random), infs, nans (with payloads), extremes."""
    dt = np.dtype(dtype)
    info = np.finfo(dt)
    uint = UINT[dt.itemsize]
    mantissa = info.nmant
    rng = np.random.default_rng(1)
    sub = rng.integers(1, 1 << mantissa, 2000, dtype=np.uint64).astype(uint)
    top = uint(1 << (dt.itemsize * 8 - 1))
    exponent_all = uint(((1 << (dt.itemsize * 8 - 1)) - 1) ^ ((1 << mantissa) - 1))
    nan_bits = np.array(
        [exponent_all | uint(1 << (mantissa - 1)), exponent_all | uint(1), exponent_all | uint(5)],
        uint,
    )  # quiet, signaling, signaling with another payload
    values = np.concatenate(
        [
            np.array(_ORDINARY, dt),
            np.array([info.smallest_subnormal, info.smallest_normal, info.max, np.inf], dt),
            sub.view(dt),
            np.array([uint(1), uint((1 << mantissa) - 1)], uint).view(dt),
            nan_bits.view(dt),
        ]
    )
    negatives = (_bits(values) | top).view(dt)
    return np.concatenate([values, negatives])


def _random_bits(dtype, n, seed):
    dt = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    return rng.integers(0, np.iinfo(UINT[dt.itemsize]).max, n, dtype=UINT[dt.itemsize],
                        endpoint=True).view(dt)  # fmt: skip


def _half_reference(x, dtype):
    out = np.empty(x.shape, dtype)
    cbrtgrad.cbrt(x, out=out)
    return out


# -- packaging ------------------------------------------------------------------------


def _python(code):
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)  # fmt: skip


@pytest.fixture(scope="module")
def fresh_interpreter():
    # One fresh process for both packaging checks: cbrtgrad imported and used,
    # then cbrtgrad.jax imported with jax made unimportable.
    done = _python(
        "import sys, numpy as np, cbrtgrad\n"
        "cbrtgrad.cbrt(np.ones(3)); cbrtgrad.cbrt_grad(np.ones(3), np.ones(3))\n"
        "print(sorted(m for m in sys.modules if m == 'jax' or m.startswith('jax.')))\n"
        "sys.modules['jax'] = None\n"
        "try:\n    import cbrtgrad.jax\n"
        "except ImportError as exc:\n    print('ImportError:', exc)\n"
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_importing_cbrtgrad_never_imports_jax(fresh_interpreter):
    assert fresh_interpreter[0] == "[]"


def test_import_without_jax_names_the_extra(fresh_interpreter):
    line = fresh_interpreter[1]
    assert line.startswith("ImportError:") and "cbrtgrad[jax]" in line


# -- bits -----------------------------------------------------------------------------


def test_float32_bits_random_and_specials_under_jit():
    # 10^6 random bit patterns, and the specials (the single-thread FFI handler).
    f = jax.jit(cj.cbrt)
    x = _random_bits(np.float32, 10**6, seed=0)
    _same_bits(f(x), cbrtgrad.cbrt(x))
    specials = _specials(np.float32)
    _same_bits(f(specials), cbrtgrad.cbrt(specials))
    _same_bits(cj.cbrt(specials), cbrtgrad.cbrt(specials))  # eager


def test_float32_subnormals_survive_xla_flushing():
    # XLA's threads flush subnormals; jnp.cbrt itself is wrong there (trap c),
    # cbrtgrad.jax must not be, on either route.
    sub = np.arange(1, 1 << 23, 4099, dtype=np.uint32).view(np.float32)
    x = np.concatenate([sub, -sub])
    expected = cbrtgrad.cbrt(x)
    _same_bits(jax.jit(cj.cbrt)(x), expected)
    callback = jax.jit(lambda v: cbrt_p.bind(v, route="callback"))
    _same_bits(callback(x), expected)
    # A gradient whose result is subnormal (g tiny, y = 1): flushed to 0 under FTZ.
    g = np.full(64, 3e-40, np.float32)
    y = np.ones(64, np.float32)
    assert float(cbrtgrad.cbrt_grad(g, y)[0]) > 0
    _same_bits(jax.jit(cj.cbrt_grad)(g, y), cbrtgrad.cbrt_grad(g, y))


@pytest.mark.skipif(not denormals.AVAILABLE, reason="the FFI route is for x86-64 and ARM64")
def test_threaded_handlers_same_bits(monkeypatch):
    # CBRTGRAD_JAX_PARALLEL_MIN=4096: the handlers that run their blocks on
    # numba's threads (each block setting its thread's subnormal mode).
    from cbrtgrad import _config

    monkeypatch.setenv("CBRTGRAD_JAX_PARALLEL_MIN", "4096")
    _config.settings.cache_clear()
    try:
        assert "numba's threads from 4,096" in cj.route("float32")
        x = np.concatenate([_random_bits(np.float32, 1 << 16, 11), _specials(np.float32)])
        ct = _random_bits(np.float32, x.size, 12)
        y, pullback = jax.vjp(jax.jit(lambda v: cj.cbrt(v)), x)
        _same_bits(y, cbrtgrad.cbrt(x))
        _same_bits(jax.jit(pullback)(ct)[0], cbrtgrad.cbrt_grad(ct, np.asarray(y)))
    finally:
        monkeypatch.delenv("CBRTGRAD_JAX_PARALLEL_MIN")
        _config.settings.cache_clear()


def test_route_on_this_cpu():
    if denormals.AVAILABLE:
        assert cj.route("float32").startswith("ffi")
        assert cj.route(np.float64).startswith("ffi")
    assert cj.route("bfloat16").startswith("callback")
    assert cj.route("float16").startswith("callback")


def test_float64_bits_under_x64():
    x = _random_bits(np.float64, 10**6, seed=2)
    specials = _specials(np.float64)
    with _x64():
        f = jax.jit(cj.cbrt)
        got = f(x)
        assert got.dtype == np.float64
        _same_bits(got, cbrtgrad.cbrt(x))
        _same_bits(f(specials), cbrtgrad.cbrt(specials))
        y, pullback = jax.vjp(cj.cbrt, specials)
        ct = _random_bits(np.float64, specials.size, seed=3)
        _same_bits(pullback(ct)[0], cbrtgrad.cbrt_grad(ct, np.asarray(y)))
    assert jnp.ones(1).dtype == np.float32  # x64 is off again


@pytest.mark.parametrize("name", sorted(HALVES))
def test_half_precision_every_bit_pattern(name):
    # All 65,536 patterns, subnormals included (254 of them per sign in
    # bfloat16, which ml_dtypes' conversion flushes on XLA's threads: trap b),
    # correctly rounded in the half dtype by the api's half out=.
    dtype = HALVES[name]
    x = np.arange(1 << 16, dtype=np.uint16).view(dtype)
    got = jax.jit(cj.cbrt)(x)
    assert got.dtype == dtype
    _same_bits(got, _half_reference(x, dtype))


@pytest.mark.parametrize("name", sorted(HALVES))
def test_half_precision_cotangents(name):
    dtype = HALVES[name]
    rng = np.random.default_rng(4)
    x = rng.integers(0, 1 << 16, 4096, dtype=np.uint16).view(dtype)
    ct = rng.integers(0, 1 << 16, 4096, dtype=np.uint16).view(dtype)
    y, pullback = jax.vjp(cj.cbrt, x)
    (dx,) = jax.jit(pullback)(ct)
    assert dx.dtype == dtype
    expected = np.empty(x.shape, dtype)
    cbrtgrad.cbrt_grad(ct, np.asarray(y), out=expected)
    _same_bits(dx, expected)


def test_vjp_cotangent_is_the_kernel_once_rounded():
    # jax.vjp's result is cbrt_grad(ct, y), bit for bit; t * cbrt_grad(1, y)
    # (a transposable but twice-rounded tangent) differs for many of them.
    rng = np.random.default_rng(5)
    x = rng.standard_normal(1 << 16).astype(np.float32) * 100
    ct = rng.standard_normal(1 << 16).astype(np.float32)
    y, pullback = jax.vjp(cj.cbrt, x)
    (dx,) = jax.jit(pullback)(ct)
    expected = cbrtgrad.cbrt_grad(ct, np.asarray(y))
    _same_bits(dx, expected)
    twice = ct * cbrtgrad.cbrt_grad(np.ones_like(ct), np.asarray(y))
    assert np.count_nonzero(twice != expected) > 1000  # the check can see double rounding
    # Random bit patterns too (nans, infs, zeros, subnormals among them).
    xb, cb = _random_bits(np.float32, 1 << 14, 6), _random_bits(np.float32, 1 << 14, 7)
    yb, pullback = jax.vjp(cj.cbrt, xb)
    _same_bits(pullback(cb)[0], cbrtgrad.cbrt_grad(cb, np.asarray(yb)))


def test_jvp_tangent_is_the_kernel():
    rng = np.random.default_rng(8)
    x = rng.standard_normal(4096).astype(np.float32)
    t = rng.standard_normal(4096).astype(np.float32)
    y, tangent = jax.jit(lambda a, b: jax.jvp(cj.cbrt, (a,), (b,)))(x, t)
    _same_bits(y, cbrtgrad.cbrt(x))
    _same_bits(tangent, cbrtgrad.cbrt_grad(t, np.asarray(y)))


def test_cbrt_grad_direct_bits_and_broadcasting():
    rng = np.random.default_rng(9)
    g = _random_bits(np.float32, 4096, 10).reshape(64, 64)
    y = rng.standard_normal(64).astype(np.float32)
    _same_bits(jax.jit(cj.cbrt_grad)(g, y), cbrtgrad.cbrt_grad(g, y))
    _same_bits(cj.cbrt_grad(1.0, y), cbrtgrad.cbrt_grad(np.float32(1.0), y))


def test_gradient_at_zero_and_negative_inputs():
    for value in (0.0, -0.0):
        assert float(jax.grad(cj.cbrt)(value)) == float(jax.grad(jnp.cbrt)(value)) == np.inf
    assert np.isnan(float(cj.cbrt_grad(0.0, 0.0)))  # 0 * inf, as JAX's own
    assert float(jax.grad(lambda v: -cj.cbrt(v))(0.0)) == -np.inf
    d = float(jax.grad(cj.cbrt)(-8.0))
    assert d == pytest.approx(1 / 12)
    assert d == float(cbrtgrad.cbrt_grad(np.float32(1), np.float32(-2)))


# -- transforms -------------------------------------------------------------------------


def test_jit_grad_vmap_and_hessian():
    x = jnp.array([8.0, -27.0, 0.5, 1e-3], jnp.float32)
    grad = jax.jit(jax.grad(lambda v: cj.cbrt(v).sum()))(x)
    _same_bits(grad, cbrtgrad.cbrt_grad(np.ones(4, np.float32), cbrtgrad.cbrt(np.asarray(x))))
    _same_bits(jax.grad(lambda v: cj.cbrt(v).sum())(x), grad)  # eager = jitted
    batch = jnp.stack([x, 2 * x, -x])
    _same_bits(jax.vmap(cj.cbrt)(batch), cbrtgrad.cbrt(np.asarray(batch)))
    _same_bits(jax.jit(jax.vmap(cj.cbrt, in_axes=1, out_axes=1))(batch),
               cbrtgrad.cbrt(np.asarray(batch)))  # fmt: skip
    g = jnp.ones(3, jnp.float32) * 3
    vmapped = jax.vmap(cj.cbrt_grad, in_axes=(0, None))(g, x)
    _same_bits(vmapped, np.broadcast_to(cbrtgrad.cbrt_grad(np.float32(3), np.asarray(x)), (3, 4)))
    both = jax.vmap(cj.cbrt_grad, in_axes=(1, 0))(jnp.ones((4, 3)), batch)
    _same_bits(both, cbrtgrad.cbrt_grad(np.ones((3, 4), np.float32), np.asarray(batch)))
    per_sample = jax.vmap(jax.grad(cj.cbrt))(x)
    _same_bits(per_sample, grad)
    # Second derivatives: -2 / (9 y^5), as jnp's (within rounding).
    y = np.cbrt(np.array([8.0, -27.0, 0.5], np.float64))
    hess = jax.hessian(lambda v: cj.cbrt(v).sum())(x[:3])
    np.testing.assert_allclose(np.diag(np.asarray(hess)), -2 / (9 * y**5), rtol=1e-6)
    assert np.count_nonzero(np.asarray(hess) - np.diag(np.diag(np.asarray(hess)))) == 0
    second = jax.jit(jax.grad(jax.grad(cj.cbrt)))(8.0)
    assert float(second) == pytest.approx(float(jax.grad(jax.grad(jnp.cbrt))(8.0)), rel=1e-6)
    third = jax.grad(jax.grad(jax.grad(cj.cbrt)))(8.0)  # 10 / (27 y^8)
    assert float(third) == pytest.approx(10 / (27 * 2.0**8), rel=1e-5)


def test_cbrt_grad_is_differentiable_in_both_operands():
    g, y = jnp.float32(12.0), jnp.float32(2.0)
    dg, dy = jax.grad(cj.cbrt_grad, argnums=(0, 1))(g, y)
    assert float(dg) == float(cbrtgrad.cbrt_grad(np.float32(1), np.float32(2)))
    assert float(dy) == pytest.approx(-2 * 12 / (3 * 8.0))
    _, tangent = jax.jvp(cj.cbrt_grad, (g, y), (jnp.float32(1.0), jnp.float32(0.0)))
    assert float(tangent) == float(dg)


def test_dtypes_follow_jnp():
    ints = jnp.arange(4)
    assert cj.cbrt(ints).dtype == jnp.cbrt(ints).dtype
    _same_bits(cj.cbrt(ints), cbrtgrad.cbrt(np.arange(4, dtype=np.float32)))
    assert cj.cbrt(jnp.array([True, False])).dtype == jnp.cbrt(jnp.array([True, False])).dtype
    assert cj.cbrt(2).dtype == jnp.cbrt(2).dtype and cj.cbrt(2).weak_type == jnp.cbrt(2).weak_type
    assert cj.cbrt(8.0).weak_type == jnp.cbrt(8.0).weak_type
    with _x64():
        assert cj.cbrt(jnp.arange(3)).dtype == jnp.cbrt(jnp.arange(3)).dtype == np.float64
    bf = jnp.ones(3, jnp.bfloat16)
    assert cj.cbrt_grad(1.0, bf).dtype == jnp.bfloat16  # a Python scalar is weak
    assert cj.cbrt_grad(jnp.ones(3, jnp.float32), bf).dtype == jnp.float32
    assert cj.cbrt(jnp.zeros((0, 3))).shape == (0, 3)
    assert cj.cbrt(jnp.float32(-27.0)).shape == () and float(cj.cbrt(-27.0)) == -3.0


# -- bad input ---------------------------------------------------------------------------


def test_complex_is_a_type_error_naming_the_dtype():
    with pytest.raises(TypeError, match=r"cbrtgrad\.jax\.cbrt: x has dtype complex64"):
        cj.cbrt(jnp.ones(2, jnp.complex64))
    with pytest.raises(TypeError, match=r"cbrtgrad\.jax\.cbrt: x has dtype complex64"):
        jax.jit(cj.cbrt)(jnp.ones(2, jnp.complex64))


@pytest.mark.parametrize("argument", ["g", "y"])
def test_cbrt_grad_wrong_dtype_names_the_argument(argument):
    good, bad = jnp.ones(3), jnp.ones(3, jnp.complex64)
    operands = {"g": good, "y": good, argument: bad}
    with pytest.raises(TypeError, match=rf"cbrt_grad: {argument} has dtype complex64"):
        cj.cbrt_grad(operands["g"], operands["y"])


def test_cbrt_grad_shape_mismatch_names_both():
    with pytest.raises(ValueError, match=r"g of shape \(3,\) and y of shape \(4,\)"):
        cj.cbrt_grad(jnp.ones(3), jnp.ones(4))
    with pytest.raises(ValueError, match=r"g of shape \(2, 3\) and y of shape \(2,\)"):
        jax.jit(cj.cbrt_grad)(jnp.ones((2, 3)), jnp.ones(2))


def test_primitive_refuses_mismatched_operands():
    from cbrtgrad.jax._primitives import cbrt_grad_p

    with pytest.raises(ValueError, match="must have one shape and dtype"):
        jax.jit(lambda g, y: cbrt_grad_p.bind(g, y, route="auto"))(jnp.ones(3), jnp.ones(2))


@pytest.mark.skipif(not denormals.AVAILABLE, reason="the FFI route is for x86-64 and ARM64")
def test_ffi_handler_refuses_buffers_it_was_not_made_for():
    # The handler checks the buffers XLA hands it and returns an XLA error
    # (made by the FFI API's own XLA_FFI_Error_Create) instead of writing past one.
    from cbrtgrad.jax import _ffi

    name = _ffi.target("forward", "float32", False)
    wrong = jax.ffi.ffi_call(name, jax.ShapeDtypeStruct((4,), jnp.int32))
    with pytest.raises(RuntimeError, match="INVALID_ARGUMENT: cbrtgrad: an XLA FFI handler"):
        np.asarray(jax.jit(wrong)(jnp.ones(4, jnp.float32)))
    longer = jax.ffi.ffi_call(name, jax.ShapeDtypeStruct((5,), jnp.float32))
    with pytest.raises(RuntimeError, match="INVALID_ARGUMENT: cbrtgrad: an XLA FFI handler"):
        np.asarray(jax.jit(longer)(jnp.ones(4, jnp.float32)))


def test_bad_jax_parallel_min(monkeypatch):
    from cbrtgrad import _config

    monkeypatch.setenv("CBRTGRAD_JAX_PARALLEL_MIN", "many")
    _config.settings.cache_clear()
    try:
        with pytest.raises(ValueError, match="CBRTGRAD_JAX_PARALLEL_MIN must be an integer"):
            _config.settings()
    finally:
        monkeypatch.delenv("CBRTGRAD_JAX_PARALLEL_MIN")
        _config.settings.cache_clear()
    assert _config.settings().jax_parallel_min_size is None
