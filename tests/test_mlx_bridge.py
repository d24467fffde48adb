"""cbrtgrad.mlx: cbrtgrad's bits on MLX arrays, through every transform.

Each result is compared bit for bit with cbrtgrad's own api on numpy arrays
(float16 and bfloat16 through the api's half ``out=``, which rounds once in
the half dtype). Timing is not checked here (asv_benches/benchmarks/bench_mlx.py
measures it); the packaging, the build and bad input are in
tests/test_mlx_build.py.
"""

from __future__ import annotations

import contextlib
import importlib

import numpy as np
import pytest

import cbrtgrad
from cbrtgrad import _config

mx = pytest.importorskip("mlx.core")
ml_dtypes = pytest.importorskip("ml_dtypes")
cm = importlib.import_module("cbrtgrad.mlx")
_functions = importlib.import_module("cbrtgrad.mlx._functions")

HALVES = {"float16": (np.dtype(np.float16), mx.float16),
          "bfloat16": (np.dtype(ml_dtypes.bfloat16), mx.bfloat16)}  # fmt: skip
UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


@pytest.fixture(autouse=True)
def _ieee_quietly():
    # The references warn at y = 0 as numpy does; MLX's ops do not warn.
    with np.errstate(all="ignore"):
        yield


def _to_mx(a):
    """An mx.array with the bits of the numpy array ``a`` (bfloat16 through its bits)."""
    a = np.ascontiguousarray(a)
    if a.dtype.name == "bfloat16":
        return mx.array(a.view(np.uint16)).view(mx.bfloat16)
    # NOTE: mx.array makes a float64 ndarray float32 unless told otherwise.
    return mx.array(a, mx.float64) if a.dtype == np.float64 else mx.array(a)


def _to_np(a):
    """The numpy array of an mx.array's bits (bfloat16 as ml_dtypes' bfloat16)."""
    if a.dtype == mx.bfloat16:
        return np.array(a.view(mx.uint16)).view(ml_dtypes.bfloat16)
    return np.array(a)


def _bits(a):
    a = np.asarray(a)
    return a.view(UINT[a.dtype.itemsize])


def _same_bits(got, expected):
    got = _to_np(got) if isinstance(got, mx.array) else np.asarray(got)
    expected = np.asarray(expected)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    differ = np.flatnonzero(_bits(got).ravel() != _bits(expected).ravel())
    assert differ.size == 0, (
        f"{differ.size} elements differ, first at {differ[:5]}: "
        f"{got.ravel()[differ[:5]]} != {expected.ravel()[differ[:5]]}"
    )


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
    nans = np.array([exponent_all | uint(1 << (mantissa - 1)), exponent_all | uint(1),
                     exponent_all | uint(5)], uint)  # fmt: skip
    values = np.concatenate([
        np.array([0.0, 1.0, 8.0, 27.0, 0.125, 3.0, 1e-3], dt),
        np.array([info.smallest_subnormal, info.smallest_normal, info.max, np.inf], dt),
        sub.view(dt),
        np.array([uint(1), uint((1 << mantissa) - 1)], uint).view(dt),
        nans.view(dt),
    ])  # fmt: skip
    return np.concatenate([values, (_bits(values) | top).view(dt)])


def _random_bits(dtype, n, seed):
    dt = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    return rng.integers(0, np.iinfo(UINT[dt.itemsize]).max, n, dtype=UINT[dt.itemsize],
                        endpoint=True).view(dt)  # fmt: skip


@contextlib.contextmanager
def _environment(monkeypatch, **values):
    # Settings read by cbrtgrad._config, set for the block (and read afresh).
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    _config.settings.cache_clear()
    try:
        yield
    finally:
        for name in values:
            monkeypatch.delenv(name)
        _config.settings.cache_clear()


def _parallel_min(monkeypatch, size):
    # CBRTGRAD_MLX_PARALLEL_MIN: the size from which the loops run on numba's threads.
    return _environment(monkeypatch, CBRTGRAD_MLX_PARALLEL_MIN=str(size))


def _vjp(x, ct):
    y, (dx,) = mx.vjp(cm.cbrt, [_to_mx(x)], [_to_mx(ct)])
    return y[0], dx


# -- bits ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bits_random_and_specials(dtype, monkeypatch):
    # 10^6 random bit patterns, then the specials, forward and pullback:
    # float32 with the default (numba's threads from CBRTGRAD_PARALLEL_MIN,
    # 10^6, as the api's automatic choice), float64 on one thread
    # (CBRTGRAD_MLX_PARALLEL_MIN above its size: its threaded loops compile
    # for seconds more; the slow test below runs them).
    if dtype is np.float32:
        assert _config.settings().mlx_parallel_min_size is None
        assert _functions._threads_from() == _config.settings().parallel_min_size == 10**6
        _check_bits_random_and_specials(dtype)
    else:
        with _parallel_min(monkeypatch, 10**6 + 1):
            _check_bits_random_and_specials(dtype)


_SETTINGS = ("CBRTGRAD_MLX_PARALLEL_MIN", "CBRTGRAD_PARALLEL_MIN", "CBRTGRAD_BACKEND")


@pytest.mark.parametrize(
    ("values", "threads_from"),
    [
        ({}, 10**6),  # the api's rule: its parallel backend from CBRTGRAD_PARALLEL_MIN
        ({"CBRTGRAD_PARALLEL_MIN": "4096"}, 4096),
        ({"CBRTGRAD_BACKEND": "parallel"}, 0),  # the api's threads at every size
        ({"CBRTGRAD_BACKEND": "cpu"}, None),  # and none
        ({"CBRTGRAD_BACKEND": "numpy", "CBRTGRAD_PARALLEL_MIN": "4096"}, None),
        ({"CBRTGRAD_MLX_PARALLEL_MIN": "77", "CBRTGRAD_BACKEND": "cpu"}, 77),  # the bridge's own
        ({"CBRTGRAD_MLX_PARALLEL_MIN": "77", "CBRTGRAD_PARALLEL_MIN": "4096"}, 77),
    ],
)
def test_threads_follow_the_api_rule(values, threads_from, monkeypatch):
    for name in _SETTINGS:
        monkeypatch.delenv(name, raising=False)
    with _environment(monkeypatch, **values):
        assert _functions._threads_from() == threads_from
        small, large = mx.zeros(76, mx.float32), mx.zeros(1 << 16, mx.float32)
        for a in (small, large):
            serial, threaded, start = _functions._loops("forward", a)
            runs_threads = threads_from is not None and a.size >= threads_from
            assert serial != 0 and (threaded != 0) == (runs_threads and _functions._threaded())
            assert start == (threads_from if threaded else 0)


@pytest.mark.parametrize(
    ("name", "threads_from"), [("cpu", None), ("parallel", 0), ("auto", 10**6)]
)
def test_threads_follow_a_use_backend_block(name, threads_from, monkeypatch):
    # The api's precedence: a use_backend block before CBRTGRAD_BACKEND.
    for setting in _SETTINGS:
        monkeypatch.delenv(setting, raising=False)
    with _environment(monkeypatch, CBRTGRAD_BACKEND="numpy"):
        assert _functions._threads_from() is None
        with cbrtgrad.backends.use_backend(name):
            assert _functions._threads_from() == threads_from
        assert _functions._threads_from() is None


def test_threads_from_the_api_rule_give_the_same_bits(monkeypatch):
    # CBRTGRAD_PARALLEL_MIN=4096 alone: 65,536 elements on numba's threads.
    monkeypatch.delenv("CBRTGRAD_MLX_PARALLEL_MIN", raising=False)
    with _environment(monkeypatch, CBRTGRAD_PARALLEL_MIN="4096"):
        x = np.concatenate([_random_bits(np.float32, 1 << 16, 10), _specials(np.float32)])
        ct = _random_bits(np.float32, x.size, 11)
        y, dx = _vjp(x, ct)
        _same_bits(y, cbrtgrad.cbrt(x))
        _same_bits(dx, cbrtgrad.cbrt_grad(ct, cbrtgrad.cbrt(x)))


def _check_bits_random_and_specials(dtype):
    x = _random_bits(dtype, 10**6, seed=0)
    got = cm.cbrt(_to_mx(x))
    assert got.dtype == _to_mx(x).dtype
    _same_bits(got, cbrtgrad.cbrt(x))
    ct = _random_bits(dtype, x.size, seed=1)
    y, dx = _vjp(x, ct)
    _same_bits(dx, cbrtgrad.cbrt_grad(ct, cbrtgrad.cbrt(x)))
    specials = _specials(dtype)
    ct = _random_bits(dtype, specials.size, seed=2)
    y, dx = _vjp(specials, ct)
    _same_bits(y, cbrtgrad.cbrt(specials))
    _same_bits(dx, cbrtgrad.cbrt_grad(ct, cbrtgrad.cbrt(specials)))


@pytest.mark.parametrize("name", sorted(HALVES))
def test_half_precision_every_bit_pattern(name):
    # All 65,536 patterns (subnormals, nans with payloads), correctly rounded in
    # the half dtype, and the pullback of random cotangents: the api's half out=.
    dtype, mx_dtype = HALVES[name]
    x = np.arange(1 << 16, dtype=np.uint16).view(dtype)
    expected = np.empty(x.shape, dtype)
    cbrtgrad.cbrt(x, out=expected)
    ct = _random_bits(dtype, x.size, seed=3)
    y, dx = _vjp(x, ct)
    assert y.dtype == dx.dtype == mx_dtype
    _same_bits(y, expected)
    dx_expected = np.empty(x.shape, dtype)
    cbrtgrad.cbrt_grad(ct, expected, out=dx_expected)
    _same_bits(dx, dx_expected)


def test_subnormal_results_are_kept():
    # A subnormal root's input and a subnormal gradient result: 0 under FTZ/DAZ.
    sub = np.arange(1, 1 << 23, 4099, dtype=np.uint32).view(np.float32)
    x = np.concatenate([sub, -sub])
    _same_bits(cm.cbrt(_to_mx(x)), cbrtgrad.cbrt(x))
    g, y = np.full(64, 3e-40, np.float32), np.ones(64, np.float32)
    assert float(cbrtgrad.cbrt_grad(g, y)[0]) > 0
    _same_bits(cm.cbrt_grad(_to_mx(g), _to_mx(y)), cbrtgrad.cbrt_grad(g, y))


def test_grad_of_a_sum_and_value_and_grad():
    # The cotangent of a sum is one value broadcast: the loop reads it once.
    x = _random_bits(np.float32, 5000, seed=4)
    value, dx = mx.value_and_grad(lambda v: cm.cbrt(v).sum())(_to_mx(x))
    y = cbrtgrad.cbrt(x)
    _same_bits(dx, cbrtgrad.cbrt_grad(np.ones_like(x), y))
    _same_bits(mx.grad(lambda v: cm.cbrt(v).sum())(_to_mx(x)), cbrtgrad.cbrt_grad(1, y))
    assert np.array(value).item() == pytest.approx(np.sum(y, dtype=np.float64), nan_ok=True)


def test_jvp_tangent_is_the_kernel():
    rng = np.random.default_rng(5)
    x = rng.standard_normal(4096).astype(np.float32)
    t = rng.standard_normal(4096).astype(np.float32)
    (y,), (tangent,) = mx.jvp(cm.cbrt, [_to_mx(x)], [_to_mx(t)])
    _same_bits(y, cbrtgrad.cbrt(x))
    _same_bits(tangent, cbrtgrad.cbrt_grad(t, cbrtgrad.cbrt(x)))


def test_cbrt_grad_direct_broadcasting_and_layouts():
    g = _random_bits(np.float32, 4096, 6).reshape(64, 64)
    y = np.random.default_rng(7).standard_normal(64).astype(np.float32)
    _same_bits(cm.cbrt_grad(_to_mx(g), _to_mx(y)), cbrtgrad.cbrt_grad(g, y))
    _same_bits(cm.cbrt_grad(1.0, _to_mx(y)), cbrtgrad.cbrt_grad(np.float32(1.0), y))
    # Operands that are not row-contiguous (gathered first): transposed, reversed.
    gt = _to_mx(g).T
    _same_bits(cm.cbrt_grad(gt, _to_mx(y)[::-1]), cbrtgrad.cbrt_grad(g.T, y[::-1]))
    _same_bits(cm.cbrt(gt), cbrtgrad.cbrt(g.T))
    # Half precision gathered too (2-byte elements), and float64 under vmap and compile.
    for name in sorted(HALVES):
        dtype = HALVES[name][0]
        h = _random_bits(dtype, 4096, 10).reshape(64, 64)
        expected = np.empty((64, 64), dtype)
        cbrtgrad.cbrt(np.ascontiguousarray(h.T), out=expected)
        _same_bits(cm.cbrt(_to_mx(h).T), expected)
    d = _random_bits(np.float64, 4096, 11).reshape(64, 64)
    _same_bits(mx.compile(mx.vmap(cm.cbrt, in_axes=1))(_to_mx(d)), cbrtgrad.cbrt(d.T))


def test_gradient_at_zero_and_negative_inputs():
    grad = mx.grad(cm.cbrt)
    for value in (0.0, -0.0):
        assert grad(mx.array(value)).item() == np.inf
    assert np.isnan(cm.cbrt_grad(0.0, mx.array(0.0)).item())  # 0 * inf, as cbrtgrad's
    assert mx.grad(lambda v: -cm.cbrt(v))(mx.array(0.0)).item() == -np.inf
    d = grad(mx.array(-8.0)).item()
    assert d == pytest.approx(1 / 12) and d == float(cbrtgrad.cbrt_grad(np.float32(1), -2))


# -- transforms ---------------------------------------------------------------------------


def test_vmap_and_compile_give_the_same_bits():
    x = np.array([8.0, -27.0, 0.5, 1e-3], np.float32)
    batch = np.stack([x, 2 * x, -x])
    expected = cbrtgrad.cbrt(batch)
    _same_bits(mx.vmap(cm.cbrt)(_to_mx(batch)), expected)
    _same_bits(mx.vmap(cm.cbrt, in_axes=1, out_axes=1)(_to_mx(batch)), expected)
    _same_bits(mx.compile(cm.cbrt)(_to_mx(batch)), expected)
    _same_bits(mx.compile(mx.vmap(cm.cbrt))(_to_mx(batch)), expected)
    # cbrt_grad with its batch axes in different places, or one operand unbatched.
    g = np.full(3, 3, np.float32)
    vmapped = mx.vmap(cm.cbrt_grad, in_axes=(0, None))(_to_mx(g), _to_mx(x))
    _same_bits(vmapped, np.broadcast_to(cbrtgrad.cbrt_grad(np.float32(3), x), (3, 4)))
    ones = np.ones((4, 3), np.float32)
    both = mx.vmap(cm.cbrt_grad, in_axes=(1, 0))(_to_mx(ones), _to_mx(batch))
    _same_bits(both, cbrtgrad.cbrt_grad(ones.T, batch))
    # Gradients under vmap and compile: per-sample, and a compiled training step.
    grad = cbrtgrad.cbrt_grad(np.ones_like(x), cbrtgrad.cbrt(x))
    _same_bits(mx.vmap(mx.grad(cm.cbrt))(_to_mx(x)), grad)
    step = mx.compile(mx.value_and_grad(lambda v: cm.cbrt(v).sum()))
    _same_bits(step(_to_mx(x))[1], grad)


def test_second_and_third_derivatives():
    y = np.cbrt(np.array([8.0, -27.0, 0.5]))
    x = mx.array([8.0, -27.0, 0.5])
    second = mx.vmap(mx.grad(mx.grad(cm.cbrt)))(x)
    np.testing.assert_allclose(np.array(second), -2 / (9 * y**5), rtol=1e-6)
    third = mx.grad(mx.grad(mx.grad(cm.cbrt)))(mx.array(8.0)).item()  # 10 / (27 y^8)
    assert third == pytest.approx(10 / (27 * 2.0**8), rel=1e-5)
    # Forward over reverse: jvp of the gradient.
    _, (hvp,) = mx.jvp(mx.grad(cm.cbrt), [mx.array(8.0)], [mx.array(1.0)])
    assert hvp.item() == pytest.approx(second[0].item(), rel=1e-6)


def test_cbrt_grad_is_differentiable_in_both_operands():
    g, y = mx.array(12.0), mx.array(2.0)
    dg, dy = mx.grad(cm.cbrt_grad, argnums=(0, 1))(g, y)
    assert dg.item() == float(cbrtgrad.cbrt_grad(np.float32(1), np.float32(2)))
    assert dy.item() == pytest.approx(-2 * 12 / (3 * 8.0))
    _, (tangent,) = mx.jvp(cm.cbrt_grad, [g, y], [mx.array(1.0), mx.array(0.0)])
    assert tangent.item() == dg.item()
    _, (tangent,) = mx.jvp(cm.cbrt_grad, [g, y], [mx.array(1.0), mx.array(1.0)])
    assert tangent.item() == pytest.approx(dg.item() + dy.item())


# -- broadcast operands of cbrt_grad ------------------------------------------------------
# Every transform of cbrt_grad against MLX's own g / (3 y^2) under the same
# transform: each gradient has its operand's shape (summed over the axes it was
# broadcast along, axes of one kept, 0-d staying 0-d), each tangent the broadcast
# shape; d/dg (the kernel's formula) has the bits of the api's gradient reduced
# by MLX's own broadcast rule, d/dy is within the expression's rounding.

BROADCAST_PAIRS = [
    ((), (3,)),
    ((1,), (3,)),
    ((3,), ()),
    ((3,), (1,)),
    ((1, 3), (2, 3)),
    ((2, 3), (1, 3)),
    ((2, 1), (1, 3)),
    ((3,), (2, 3)),
    ((2, 1, 3), (4, 1)),
    ((), ()),
    ((2, 3), (2, 3)),
]
_RTOL = {mx.float32: 2e-5, mx.float64: 1e-13}


def _expression(g, y):
    return g / (3 * y * y)


def _operands(g_shape, y_shape, dtype=mx.float32, seed=0):
    rng = np.random.default_rng(seed)
    g = rng.standard_normal(g_shape)
    # y away from 0, both signs: the gradient's values stay in range.
    y = rng.uniform(0.5, 4.0, y_shape) * rng.choice([-1.0, 1.0], y_shape)
    weights = rng.standard_normal(np.broadcast_shapes(g_shape, y_shape))
    return tuple(mx.array(v, dtype) for v in (g, y, weights))


def _reduced_kernel(ct, g, y):
    # cbrtgrad's elementwise gradient of ct, reduced to g's shape by MLX's own
    # rule (the pullback of broadcast_to): the bits d/dg of cbrt_grad must have.
    shape = np.broadcast_shapes(g.shape, y.shape)
    np_dtype = np.float64 if y.dtype == mx.float64 else np.float32
    ct_np = np.broadcast_to(np.array(ct), shape).astype(np_dtype)
    elementwise = cbrtgrad.cbrt_grad(ct_np, np.broadcast_to(np.array(y), shape).astype(np_dtype))
    cotangent = mx.array(np.asarray(elementwise), y.dtype)  # exact: same dtype
    _, (reduced,) = mx.vjp(lambda a: mx.broadcast_to(a, shape), [g], [cotangent])
    return reduced


def _same_shapes_and_close(got, expected, rtol):
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
        np.testing.assert_allclose(np.array(a), np.array(b), rtol=rtol, atol=0)


@pytest.mark.parametrize(("g_shape", "y_shape"), BROADCAST_PAIRS)
@pytest.mark.parametrize("dtype", [mx.float32, mx.float64])
def test_broadcast_operands_grad_and_value_and_grad(g_shape, y_shape, dtype):
    g, y, w = _operands(g_shape, y_shape, dtype)

    def loss(function):
        return lambda a, b: (function(a, b) * w).sum()

    rtol = _RTOL[dtype]
    for argnums in (0, 1, (0, 1)):
        ours = mx.grad(loss(cm.cbrt_grad), argnums=argnums)(g, y)
        theirs = mx.grad(loss(_expression), argnums=argnums)(g, y)
        ours, theirs = (v if isinstance(v, tuple) else (v,) for v in (ours, theirs))
        _same_shapes_and_close(ours, theirs, rtol)
    dg = mx.grad(loss(cm.cbrt_grad))(g, y)
    _same_bits(dg, _to_np(_reduced_kernel(w, g, y)))
    (value, grads), (value_0, grads_0) = (
        mx.value_and_grad(loss(f), argnums=(0, 1))(g, y) for f in (cm.cbrt_grad, _expression)
    )
    _same_shapes_and_close((value, *grads), (value_0, *grads_0), rtol)
    _same_bits(grads[0], _to_np(dg))


@pytest.mark.parametrize(("g_shape", "y_shape"), BROADCAST_PAIRS)
def test_broadcast_operands_vjp_and_jvp(g_shape, y_shape):
    g, y, ct = _operands(g_shape, y_shape, seed=1)
    (out,), ours = mx.vjp(cm.cbrt_grad, [g, y], [ct])
    (out_0,), theirs = mx.vjp(_expression, [g, y], [ct])
    _same_shapes_and_close((out, *ours), (out_0, *theirs), 2e-5)
    _same_bits(ours[0], _to_np(_reduced_kernel(ct, g, y)))
    # A tangent of a broadcast operand broadcasts: both followed, or one alone.
    tg, ty, _ = _operands(g_shape, y_shape, seed=2)
    (_, (tangent,)), (_, (tangent_0,)) = (
        mx.jvp(f, [g, y], [tg, ty]) for f in (cm.cbrt_grad, _expression)
    )
    _same_shapes_and_close((tangent,), (tangent_0,), 2e-5)
    shape = np.broadcast_shapes(g_shape, y_shape)
    (_, (tangent_g,)) = mx.jvp(lambda a: cm.cbrt_grad(a, y), [g], [tg])
    (_, (tangent_y,)), (_, (tangent_y0,)) = (
        mx.jvp(lambda b, f=f: f(g, b), [y], [ty]) for f in (cm.cbrt_grad, _expression)
    )
    expected = cbrtgrad.cbrt_grad(np.broadcast_to(np.array(tg), shape), np.array(y))
    _same_bits(tangent_g, np.asarray(expected))
    _same_shapes_and_close((tangent_y,), (tangent_y0,), 2e-5)
    # The primitive's own rules (MLX's jvp walks the nodes inside a custom
    # function), reached without the custom function: the same class.
    extension = importlib.import_module("cbrtgrad.mlx._build").extension()

    def raw(a, b):
        return extension.cube_root_grad(a, b, *_functions._loops("grad", b))

    _same_shapes_and_close(mx.vjp(raw, [g, y], [ct])[1], theirs, 2e-5)
    _same_shapes_and_close(mx.jvp(raw, [g, y], [tg, ty])[1], (tangent_0,), 2e-5)


@pytest.mark.parametrize(("g_shape", "y_shape"), BROADCAST_PAIRS)
def test_broadcast_operands_under_vmap_and_compile(g_shape, y_shape):
    g, y, w = _operands(g_shape, y_shape, seed=3)

    def grads(function):
        return mx.grad(lambda a, b: (function(a, b) * w).sum(), argnums=(0, 1))

    # Per-sample gradients: both operands batched, then g alone.
    batch_g = mx.stack([g, 2 * g, -g])
    batch_y = mx.stack([y, 0.5 * y, -y])
    for in_axes, operands in (((0, 0), (batch_g, batch_y)), ((0, None), (batch_g, y))):
        ours = mx.vmap(grads(cm.cbrt_grad), in_axes=in_axes)(*operands)
        theirs = mx.vmap(grads(_expression), in_axes=in_axes)(*operands)
        _same_shapes_and_close(ours, theirs, 2e-5)
    # Compiled: the same gradients, bits and shapes, as uncompiled.
    compiled = mx.compile(grads(cm.cbrt_grad))(g, y)
    _same_shapes_and_close(compiled, grads(_expression)(g, y), 2e-5)
    for a, b in zip(compiled, grads(cm.cbrt_grad)(g, y), strict=True):
        _same_bits(a, _to_np(b))
    compiled_vjp = mx.compile(lambda a, b, c: mx.vjp(cm.cbrt_grad, [a, b], [c])[1])(g, y, w)
    _same_shapes_and_close(compiled_vjp, mx.vjp(_expression, [g, y], [w])[1], 2e-5)


def test_broadcast_operands_of_mixed_dtypes_and_second_derivatives():
    # A float16 0-d g beside float32 y: promoted, then reduced and cast back.
    g, y = mx.array(2.0, mx.float16), mx.array([1.0, 2.0, 4.0])
    ours, theirs = (
        mx.grad(lambda a, b, f=f: f(a, b).sum(), argnums=(0, 1))(g, y)
        for f in (cm.cbrt_grad, _expression)
    )
    _same_shapes_and_close(ours, theirs, 1e-3)
    assert ours[0].item() == mx.array(0.4375, mx.float16).item()
    # The reduced gradient differentiated again in the broadcast operand's partner.
    g = mx.array(2.0)
    ours, theirs = (
        mx.grad(lambda b, f=f: mx.grad(lambda a: f(a, b).sum())(g) ** 2)(y)
        for f in (cm.cbrt_grad, _expression)
    )
    _same_shapes_and_close((ours,), (theirs,), 2e-5)


def test_shapeless_compile_is_refused_by_mlx():
    # NOTE: MLX cannot infer the output shapes of any mx.custom_function
    # (CustomTransforms), so mx.compile(shapeless=True) refuses cbrt with
    # MLX's own message; compile with shapes (the default) works above.
    with pytest.raises(ValueError, match="CustomTransforms cannot infer output shapes"):
        mx.compile(cm.cbrt, shapeless=True)(mx.array([8.0]))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["float32", "float64", "float16", "bfloat16"])
def test_threaded_loops_every_dtype(name, monkeypatch):
    # CBRTGRAD_MLX_PARALLEL_MIN=4096: every dtype's loops on numba's threads
    # (compiling each costs seconds on first use, hence slow).
    dtype = HALVES[name][0] if name in HALVES else np.dtype(name)
    with _parallel_min(monkeypatch, 4096):
        x = np.concatenate([_random_bits(dtype, 1 << 16, 8), _specials(dtype)])
        ct = _random_bits(dtype, x.size, 9)
        y, dx = _vjp(x, ct)
        expected = np.empty(x.shape, dtype)
        cbrtgrad.cbrt(x, out=expected)
        _same_bits(y, expected)
        dx_expected = np.empty(x.shape, dtype)
        cbrtgrad.cbrt_grad(ct, expected, out=dx_expected)
        _same_bits(dx, dx_expected)


def test_the_forward_primitives_own_rules_are_the_gradient():
    # The primitive differentiated without its custom function (MLX walks the
    # nodes inside one): g / (3 y^2) in MLX's ops, within a rounding or two of
    # the correctly rounded gradient, never another kernel's result.
    extension = importlib.import_module("cbrtgrad.mlx._build").extension()

    def raw(v):
        return extension.cube_root(v, *_functions._loops("forward", v))

    x = mx.array([-27.0, 8.0, 1e-3, 5.0], mx.float32)
    y = cbrtgrad.cbrt(np.array(x))
    want = cbrtgrad.cbrt_grad(np.ones(4, np.float32), y)
    pulled = np.array(mx.grad(lambda v: raw(v).sum())(x))
    _, (pushed,) = mx.jvp(raw, [x], [mx.ones_like(x)])
    for got in (pulled, np.array(pushed)):
        np.testing.assert_allclose(got, want, rtol=4e-7)
