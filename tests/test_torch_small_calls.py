"""The PyTorch bridge's short route for small float32/float64 CPU tensors (``torch/_cpu.py``).

Below the size from which the api takes the parallel backend, a call on a
contiguous float32 or float64 CPU tensor is one call of the cpu backend's
ufunc on the tensor's numpy view, its result taken over by PyTorch, and the
forward without ``np.errstate`` (its ufunc raises no floating-point flag).
What is checked: the api's bits on random bit patterns, specials, nan
payloads, one element and 0-d tensors, through every route (no gradient,
requiring grad, the backward); contiguous results; no flag from the
forward's ufunc and no warning from the gradient's; the parallel backend
where the api would take it.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import cbrtgrad
from cbrtgrad import _config
from cbrtgrad.backends import host as api_host
from cbrtgrad.backends import use_backend

from ._bit_patterns import UINT
from ._bit_patterns import bits as _bits
from ._bit_patterns import patterns as _patterns
from ._bit_patterns import tensor_bits as _tbits

torch = pytest.importorskip("torch")

import cbrtgrad.torch as ct  # noqa: E402  (after the skip: needs torch)

TORCH = {np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64}
SMALL = 1 << 13  # below the fused kernel's serial block and the parallel size


@pytest.fixture(params=[np.float32, np.float64], ids=["float32", "float64"])
def dtype(request):
    return np.dtype(request.param)


def test_the_forward_kernel_raises_no_floating_point_flag(dtype):
    # Why the short route needs no np.errstate (all 2^32 float32 inputs were
    # checked once the same way; here a sample, the specials and every
    # exponent with its edge mantissas).
    cbrtgrad.cbrt(np.ones(1, dtype))  # the api builds the ufunc
    forward = api_host.FORWARD[dtype]
    uint = UINT[dtype]
    mant = np.finfo(dtype).nmant
    sign = uint(1) << uint(8 * dtype.itemsize - 1)
    exponents = np.arange(1 << (8 * dtype.itemsize - 1 - mant), dtype=uint) << uint(mant)
    low = np.arange(8, dtype=uint)
    mantissas = np.concatenate([low, (uint(1) << uint(mant)) - uint(1) - low])
    structured = (exponents[:, None] | mantissas[None, :]).ravel()
    structured = np.concatenate([structured, structured | sign])
    sample, specials = _patterns(dtype, 1 << 18, seed=4), _patterns(dtype, 0, seed=0)
    with np.errstate(all="raise"):
        forward(sample)
        forward(structured.view(dtype))
        for value in specials:  # one element at a time, through the bridge
            ct.cbrt(torch.from_numpy(np.array([value])))


def test_small_calls_give_the_apis_bits(dtype):
    x = _patterns(dtype, SMALL, seed=1)
    g = _patterns(dtype, SMALL, seed=2)[::-1].copy()
    with np.errstate(all="ignore"):
        y = cbrtgrad.cbrt(x)
        dx = cbrtgrad.cbrt_grad(g, y)
        dx_any = cbrtgrad.cbrt_grad(g, x)  # at any y
    tx, tg = torch.from_numpy(x), torch.from_numpy(g)
    for route in (lambda t: t, lambda t: t.clone().requires_grad_(True)):
        tracked = route(tx)
        assert np.array_equal(_tbits(ct.cbrt(tracked)), _bits(y))
        assert np.array_equal(_tbits(ct.cbrt_grad(tg, route(torch.from_numpy(y)))), _bits(dx))
        assert np.array_equal(_tbits(ct.cbrt_grad(tg, route(tx))), _bits(dx_any))
        fused = ct.cbrt_and_grad(tracked, tg)
        assert [_tbits(f).tolist() for f in fused] == [_bits(y).tolist(), _bits(dx).tolist()]
    # The backward (the gradient kernel on the incoming gradient) and one element, 0-d.
    leaf = tx.clone().requires_grad_(True)
    ct.cbrt(leaf).backward(tg)
    assert np.array_equal(_tbits(leaf.grad), _bits(dx))
    for i in range(0, x.size, 97):
        for shape in ((1,), ()):
            root = ct.cbrt(tx[i].reshape(shape))
            grad = ct.cbrt_grad(tg[i].reshape(shape), torch.from_numpy(y[i : i + 1]).reshape(shape))
            assert root.shape == grad.shape == shape  # (_bits makes 0-d arrays 1-d)
            assert _tbits(root).tolist() == _bits(y[i : i + 1]).tolist()
            assert _tbits(grad).tolist() == _bits(dx[i : i + 1]).tolist()


def test_small_results_are_new_contiguous_tensors(dtype):
    t = torch.linspace(-8, 8, 12, dtype=TORCH[dtype]).reshape(3, 4)
    g = torch.tensor(2.0, dtype=t.dtype).expand(3, 4)  # the gradient of a sum: stride 0
    for got in (ct.cbrt(t), ct.cbrt_grad(g, t), *ct.cbrt_and_grad(t, g.contiguous())):
        assert got.is_contiguous() and got.shape == (3, 4) and got.dtype is t.dtype
        assert got.data_ptr() not in (t.data_ptr(), g.data_ptr())
    assert torch.equal(ct.cbrt_grad(g, t), ct.cbrt_grad(g.contiguous(), t))
    assert ct.cbrt(torch.empty(0, 3, dtype=t.dtype)).shape == (0, 3)


def test_the_gradient_warns_of_nothing_and_is_ieee_at_zero(dtype):
    # pytest turns warnings into errors: numpy's "divide by zero" would fail this.
    zero = torch.zeros(1, dtype=TORCH[dtype])
    with np.errstate(all="raise"):
        got = ct.cbrt_grad(torch.tensor([1.0, 0.0], dtype=zero.dtype), zero.expand(2).contiguous())
        y, dx = ct.cbrt_and_grad(zero, -torch.ones(1, dtype=zero.dtype))
    assert got[0].item() == np.inf and got[1].isnan().item()
    assert y.item() == 0.0 and dx.item() == -np.inf


def test_the_parallel_backend_where_the_api_would_take_it(dtype, monkeypatch):
    # The Python route's (the C++ entry's own: tests/test_torch_native.py).
    from cbrtgrad.torch import _cpu

    monkeypatch.setattr(_cpu, "NATIVE", [None])  # the readers look it up there, on each call
    calls: list[int] = []
    forward = api_host.FORWARD[dtype]
    monkeypatch.setitem(
        api_host.FORWARD, dtype, lambda *a, **k: calls.append(a[0].size) or forward(*a, **k)
    )
    t = torch.linspace(-8, 8, 8, dtype=TORCH[dtype])
    expected = ct.cbrt(t)
    assert calls == [8]  # the short route: one ufunc call
    with use_backend("parallel"):
        assert torch.equal(ct.cbrt(t), expected)
    monkeypatch.setenv("CBRTGRAD_PARALLEL_MIN", "4")
    _config.settings.cache_clear()
    try:
        for _ in range(2):  # the first renews the api's kept choice, the second reads it
            assert torch.equal(ct.cbrt(t), expected)
    finally:
        monkeypatch.delenv("CBRTGRAD_PARALLEL_MIN")
        _config.settings.cache_clear()
    assert calls == [8], calls


def _scenarios():
    """Contexts in which a call on a plain float tensor must not take the short route."""
    from contextlib import contextmanager

    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    class Passing(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    class Seeing(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    @contextmanager
    def level():
        with torch.autograd.forward_ad.dual_level():
            yield

    return {
        "dispatch mode": Passing,
        "function mode": Seeing,
        "forward-mode level": level,
        "use_backend": lambda: use_backend("parallel"),
    }


@pytest.mark.parametrize(
    "name", ["dispatch mode", "function mode", "forward-mode level", "use_backend"]
)
def test_the_short_route_is_taken_only_where_the_kernel_alone_would_run(name):
    from cbrtgrad.torch import _routes

    t = torch.linspace(-8, 8, 6)
    ct.cbrt(t)  # the api builds its ufunc and keeps its choice under the current settings
    assert _routes.cube_root_now(t) is not None  # the control
    with torch.autocast("cpu"):  # leaves float32 as it is
        assert _routes.cube_root_now(t) is not None
    with _scenarios()[name]():
        assert _routes.cube_root_now(t) is None
        if name != "use_backend":  # the api's choice; the others are the dispatcher's
            assert not _routes.untracked_float(t)
    for other in (t.reshape(2, 3).t(), t.to("meta"), t.half()):
        assert _routes.cube_root_now(other) is None
    found: list = []
    torch.func.vmap(lambda row: found.append(_routes.cube_root_now(row)) or row)(t.reshape(2, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit.trace is deprecated
        torch.jit.trace(
            lambda u: found.append(_routes.cube_root_now(u)) or u * 2, t, check_trace=False
        )
    assert found == [None, None]


@pytest.mark.parametrize("n", [1, 7, 3 * SMALL], ids=["one", "small", "large"])
@pytest.mark.parametrize("real", [torch.float16, torch.float32, torch.float64], ids=str)
def test_negative_bit_views_give_their_values_cube_roots(real, n):
    # z.conj().imag is a real tensor whose memory holds its values negated
    # (PyTorch's negative bit), which Tensor.numpy() refuses. Every route
    # reads its values, as torch.sqrt does: bit for bit the resolved copy's.
    same_bits = {torch.float16: torch.int16, torch.float32: torch.int32, torch.float64: torch.int64}

    def same(a: torch.Tensor, b: torch.Tensor) -> bool:
        bits = same_bits[a.dtype]
        return a.dtype is b.dtype and torch.equal(a.detach().view(bits), b.detach().view(bits))

    values = torch.linspace(-30, 30, n, dtype=torch.float64).to(real)
    with warnings.catch_warnings():  # PyTorch's own: complex32 is "experimental"
        warnings.simplefilter("ignore", UserWarning)
        z = torch.complex(torch.zeros_like(values), -values)
        leaf = z.clone().requires_grad_()
    lazy = z.conj().imag
    assert lazy.is_neg() and lazy.dtype is real  # the case under test, not a resolved copy
    plain = lazy.resolve_neg()
    assert torch.equal(plain, values)
    assert same(ct.cbrt(lazy), ct.cbrt(plain))
    assert same(ct.cbrt_grad(lazy, lazy), ct.cbrt_grad(plain, plain))
    for got, want in zip(ct.cbrt_and_grad(lazy, lazy), ct.cbrt_and_grad(plain, plain), strict=True):
        assert same(got, want)
    tracked = leaf.conj().imag
    assert tracked.is_neg() and tracked.requires_grad
    y = ct.cbrt(tracked)
    y.sum().backward()
    assert same(y, ct.cbrt(plain))
    assert leaf.grad is not None
