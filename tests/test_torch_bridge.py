"""The PyTorch bridge (``cbrtgrad.torch``): cbrtgrad's bits on tensors, autograd, compile, func.

What is checked, on CPU tensors (the CUDA path has not run on a GPU; its
half-precision rounding is checked here on CPU tensors):

* bits: the bridge returns exactly what ``cbrtgrad.cbrt``/``cbrt_grad`` return
  (10^6 random bit patterns per float dtype, specials, nan payloads), and every
  float16 and bfloat16 bit pattern correctly rounded in its own precision;
* strides: a CPU tensor reaches the kernels as a numpy view (no copy);
* dtypes as PyTorch's, autocast's force-fp32 policy, errors of PyTorch's kinds;
* autograd (gradcheck, gradgradcheck, forward mode), the custom ops (opcheck),
  torch.compile with no graph break, torch.func (grad, vmap, jacrev, jvp, jacfwd);
* packaging: ``import cbrtgrad`` imports no torch, and ``cbrtgrad.torch``
  without torch is an ImportError naming the extra.
"""

from __future__ import annotations

import configparser
import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import cbrtgrad
from cbrtgrad.verification.cases import special_values

torch = pytest.importorskip("torch")
ml_dtypes = pytest.importorskip("ml_dtypes")

import cbrtgrad.torch as ct  # noqa: E402  (after the skip: needs torch)
from cbrtgrad.torch import (  # noqa: E402
    _arguments,
    _cpu,  # noqa: E402
    _device_half,
)

ROOT = Path(__file__).resolve().parent.parent
F64 = torch.float64
UINT = {np.dtype(np.float32): np.uint32, np.dtype(np.float64): np.uint64}
TORCH = {np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64}
HALVES = {torch.float16: np.dtype(np.float16), torch.bfloat16: np.dtype(ml_dtypes.bfloat16)}
N_RANDOM = 1_000_000


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(UINT[a.dtype] if a.itemsize > 2 else np.uint16)


def _random_bits(dtype: np.dtype, n: int, seed: int) -> np.ndarray:
    """``n`` uniformly random bit patterns (every sign, exponent, nan payload), then specials."""
    rng = np.random.default_rng(seed)
    uint = UINT[dtype]
    bits = rng.integers(0, np.iinfo(uint).max, size=n, dtype=uint, endpoint=True)
    # Signalling and quiet nans with payloads, of both signs.
    exponent = np.array(np.inf, dtype).view(uint)
    quiet = uint(1) << uint(np.finfo(dtype).nmant - 1)
    sign = uint(1) << uint(8 * dtype.itemsize - 1)
    nans = np.array([exponent | 1, exponent | quiet | 5, exponent | quiet], uint)
    nans = np.concatenate([nans, nans | sign])
    return np.concatenate([bits.view(dtype), special_values(dtype), nans.view(dtype)])


def _half_all(half: torch.dtype) -> torch.Tensor:
    return torch.arange(-(1 << 15), 1 << 15, dtype=torch.int32).to(torch.int16).view(half)


def _host_half(t: torch.Tensor) -> np.ndarray:
    return t.view(torch.int16).numpy().view(HALVES[t.dtype])


# -- bits -----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bits_are_cbrtgrads_own(dtype):
    dtype = np.dtype(dtype)
    x = _random_bits(dtype, N_RANDOM, seed=1)
    g = _random_bits(dtype, N_RANDOM, seed=2)
    y_api = cbrtgrad.cbrt(x)
    # Gradients at the saved outputs, and at random y too (any bit pattern).
    y_any = _random_bits(dtype, N_RANDOM, seed=3)
    with np.errstate(all="ignore"):
        dx_api = cbrtgrad.cbrt_grad(g, y_api)
        dx_any = cbrtgrad.cbrt_grad(g, y_any)
        fused_api = cbrtgrad.cbrt_and_grad(x, g)
    tx, tg = torch.from_numpy(x), torch.from_numpy(g)
    np.testing.assert_array_equal(_bits(ct.cbrt(tx).numpy()), _bits(y_api))
    np.testing.assert_array_equal(
        _bits(ct.cbrt_grad(tg, torch.from_numpy(y_api)).numpy()), _bits(dx_api)
    )
    np.testing.assert_array_equal(
        _bits(ct.cbrt_grad(tg, torch.from_numpy(y_any)).numpy()), _bits(dx_any)
    )
    y, dx = ct.cbrt_and_grad(tx, tg)
    np.testing.assert_array_equal(_bits(y.numpy()), _bits(fused_api[0]))
    np.testing.assert_array_equal(_bits(dx.numpy()), _bits(fused_api[1]))
    assert y.dtype == dx.dtype == TORCH[dtype]


@pytest.mark.parametrize("half", [torch.float16, torch.bfloat16])
def test_every_half_pattern_is_correctly_rounded(half):
    x = _half_all(half)
    with np.errstate(invalid="ignore"):  # numpy flags the signalling nans' widening
        expected = cbrtgrad.cbrt(_host_half(x), out=np.empty(x.shape, HALVES[half]))
    got = ct.cbrt(x)
    assert got.dtype is half
    np.testing.assert_array_equal(_host_half(got).view(np.uint16), expected.view(np.uint16))
    # The gradient at every y (random g of the same dtype), from the float64 kernel.
    g = torch.randint(-(1 << 15), 1 << 15, x.shape, generator=torch.Generator().manual_seed(0))
    g = g.to(torch.int16).view(half)
    with np.errstate(all="ignore"):
        expected_dx = cbrtgrad.cbrt_grad(
            _host_half(g), _host_half(x), out=np.empty(x.shape, HALVES[half])
        )
    got_dx = ct.cbrt_grad(g, x)
    np.testing.assert_array_equal(_host_half(got_dx).view(np.uint16), expected_dx.view(np.uint16))
    y, dx = ct.cbrt_and_grad(x, g)
    assert torch.equal(y.view(torch.int16), got.view(torch.int16))
    y_dx = ct.cbrt_grad(g, got)
    assert torch.equal(dx.view(torch.int16), y_dx.view(torch.int16))


@pytest.mark.parametrize("half", [torch.float16, torch.bfloat16])
def test_the_device_half_rounding_is_the_hosts(half):
    # The CUDA path's rounding, in tensor ops, on CPU tensors: every pattern.
    x = _half_all(half)
    wide = x.float()
    q = torch.from_numpy(cbrtgrad.cbrt(wide.numpy()))
    expected = ct.cbrt(x)
    got = _device_half.cube_root(wide, q, half)
    nan = expected.isnan()
    assert torch.equal(got.isnan(), nan)
    assert torch.equal(got[~nan].view(torch.int16), expected[~nan].view(torch.int16))
    g = torch.randint(-(1 << 15), 1 << 15, x.shape, generator=torch.Generator().manual_seed(1))
    g = g.to(torch.int16).view(half)
    with np.errstate(all="ignore"):
        q64 = torch.from_numpy(cbrtgrad.cbrt_grad(g.double().numpy(), x.double().numpy()))
    expected = ct.cbrt_grad(g, x)
    got = _device_half.gradient(g.double(), x.double(), q64, half)
    nan = expected.isnan()
    assert torch.equal(got.isnan(), nan)
    assert torch.equal(got[~nan].view(torch.int16), expected[~nan].view(torch.int16))


_API = {"cube_root": "cbrt", "cube_root_grad": "cbrt_grad", "cube_root_and_grad": "cbrt_and_grad"}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_the_cuda_path_on_cpu_tensors_gives_the_hosts_bits(dtype, monkeypatch):
    # cbrtgrad/torch/_cuda.py with the cuda backend's call stood in for by the
    # api on the same operands: the widening, broadcasting, contiguity and half
    # rounding around the kernels, without a GPU. The operands must be what the
    # cuda backend takes: C-contiguous float32/float64 of the output's shape.
    from cbrtgrad.torch import _cuda

    def run(method, *inputs, out):
        outs = out if isinstance(out, tuple) else (out,)
        for t in (*inputs, *outs):
            assert t.is_contiguous() and t.dtype in (torch.float32, torch.float64)
            assert t.shape == outs[0].shape
        with np.errstate(all="ignore"):
            result = getattr(cbrtgrad, _API[method])(*(t.numpy() for t in inputs))
        for o, r in zip(outs, result if isinstance(out, tuple) else (result,), strict=True):
            o.copy_(torch.from_numpy(np.asarray(r)))

    monkeypatch.setattr(_cuda, "_run", run)
    if dtype in HALVES:
        x = _half_all(dtype)
    else:
        patterns = _random_bits(np.dtype(str(dtype).split(".")[1]), 1 << 16, seed=4)
        x = torch.from_numpy(patterns[-(1 << 16) :])  # random bits, then the specials
    x = x.reshape(256, 256).t()  # not contiguous
    g = x[:1].flip(1)  # broadcast
    shape = x.shape
    pairs = [
        (_cuda.cube_root(x), _cpu.cube_root(x)),
        (_cuda.cube_root_grad(g, x, shape), _cpu.cube_root_grad(g, x, shape)),
        *zip(
            _cuda.cube_root_and_grad(x, g, shape),
            _cpu.cube_root_and_grad(x, g, shape),
            strict=True,
        ),
    ]
    bits = torch.int16 if dtype in HALVES else {torch.float32: torch.int32}.get(dtype, torch.int64)
    for got, expected in pairs:
        assert got.dtype is dtype and got.shape == expected.shape
        nan = expected.isnan()
        assert torch.equal(got.isnan(), nan)
        assert torch.equal(got[~nan].view(bits), expected[~nan].view(bits))


def test_the_gradient_at_zero_is_inf_and_real_at_negative_x():
    # As jax.grad(jnp.cbrt)(0.0): inf for a finite nonzero g (no warning), nan for g = 0.
    x = torch.tensor([0.0, -0.0, -8.0, -27.0], dtype=F64, requires_grad=True)
    ct.cbrt(x).backward(torch.tensor([1.0, -2.0, 12.0, 9.0], dtype=F64))
    assert x.grad.tolist() == [np.inf, -np.inf, 1.0, 1.0 / 3.0]
    assert ct.cbrt_grad(torch.tensor([0.0]), torch.tensor([0.0])).isnan().all()


# -- layout ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_strided_cpu_tensors_reach_the_kernels_as_views(dtype):
    base = torch.linspace(-30, 30, 60).to(dtype).reshape(6, 10)
    for t in (base.t(), base[::2, 1::3], base[:1].expand(4, 10), base[2]):
        view = _cpu.host_array(t)
        assert view.__array_interface__["data"][0] == t.data_ptr()
        assert view.strides == tuple(s * t.element_size() for s in t.stride())
        got = ct.cbrt(t)
        expected = ct.cbrt(t.contiguous())
        assert got.is_contiguous() and torch.equal(got.view(torch.int8), expected.view(torch.int8))
    g = base.t()
    assert torch.equal(ct.cbrt_grad(g, base.t()), ct.cbrt_grad(g.contiguous(), base.t().clone()))


def _sees_ops() -> tuple[type, list]:
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: list = []

    class Seeing(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.namespace == "cbrtgrad":
                seen.append(func.__name__)
            return func(*args, **(kwargs or {}))

    return Seeing, seen


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_eager_calls_run_the_kernels_directly_only_where_the_ops_would(dtype, monkeypatch):
    from cbrtgrad.torch import _ops

    x = torch.linspace(-30, 30, 12, dtype=dtype).reshape(3, 4)
    g = torch.linspace(1, 2, 4, dtype=dtype)

    def step():
        t = x.clone().requires_grad_(True)
        y, dx = ct.cbrt_and_grad(t, g)
        (ct.cbrt(t) + ct.cbrt_grad(g, y) + dx).sum().backward()
        return [v.detach().view(torch.int16) for v in (y, dx, ct.cbrt(x), t.grad)]

    calls = []
    for name in ("cube_root", "cube_root_grad", "cube_root_and_grad"):
        op = getattr(_ops, name)
        monkeypatch.setattr(_ops, name, lambda *a, _op=op, _n=name: calls.append(_n) or _op(*a))
    direct = step()
    assert calls == []  # plain CPU tensors: no op call, eager
    assert _ops.reaches_cpu_kernel(x, torch.nn.Parameter(g))
    for name in ("reaches_cpu_kernel", "reaches_float_kernel"):  # the general test and float32/64's
        monkeypatch.setattr(_ops, name, lambda *tensors: False)
    through_ops = step()
    assert set(calls) == {"cube_root", "cube_root_grad", "cube_root_and_grad"}
    assert all(torch.equal(a, b) for a, b in zip(direct, through_ops, strict=True))


def test_modes_transforms_and_other_tensors_go_through_the_ops():
    from cbrtgrad.torch import _ops

    Seeing, seen = _sees_ops()
    x = torch.tensor([8.0, -27.0], requires_grad=True)
    with Seeing():
        ct.cbrt(x).sum().backward()
        ct.cbrt_and_grad(x.detach(), 1.0)
    assert seen == ["cube_root.default", "cube_root_grad.default", "cube_root_and_grad.default"]
    assert not _ops.reaches_cpu_kernel(torch.ones(2, device="meta"))
    assert not _ops.reaches_cpu_kernel(torch.ones(2), torch.ones(2).as_subclass(_Sub))
    with torch.autocast("cpu"):
        assert not _ops.reaches_cpu_kernel(torch.ones(2))
    inside: list = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit.trace is deprecated
        torch.jit.trace(
            lambda t: inside.append(_ops.reaches_cpu_kernel(t)) or t * 2,
            torch.ones(2),
            check_trace=False,
        )
    torch.func.vmap(lambda t: inside.append(_ops.reaches_cpu_kernel(t)) or t)(torch.ones(2))
    assert inside == [False, False]


def test_a_direct_kernel_call_errs_as_the_op_does(monkeypatch):
    from cbrtgrad.torch import _functions, _ops

    g, y = torch.ones(2), torch.ones(2, dtype=F64)  # the public functions promote; these do not
    messages = []

    def never(*tensors):
        return False

    for reaches_cpu, reaches_float in (
        (_ops.reaches_cpu_kernel, _ops.reaches_float_kernel),
        (never, never),
    ):
        monkeypatch.setattr(_ops, "reaches_cpu_kernel", reaches_cpu)
        monkeypatch.setattr(_ops, "reaches_float_kernel", reaches_float)
        for call in (_functions._grad, _functions.CubeRootGrad.apply):
            with pytest.raises(TypeError, match="cube_root_grad: g has dtype torch.float32") as e:
                call(g, y)
            messages.append(str(e.value))
    assert len(set(messages)) == 1


class _Sub(torch.Tensor):
    pass


def test_zero_size_and_0d_tensors():
    assert ct.cbrt(torch.empty(0, 3)).shape == (0, 3)
    assert ct.cbrt(torch.tensor(-8.0)).item() == -2.0
    assert ct.cbrt_grad(torch.tensor(12.0), torch.tensor(2.0)).shape == ()


def test_broadcasting_sums_each_gradient_back_to_its_shape():
    g = torch.tensor([3.0], dtype=F64, requires_grad=True)
    y = torch.tensor([[1.0], [2.0]], dtype=F64, requires_grad=True)
    z = ct.cbrt_grad(g, y.expand(2, 3))
    assert z.shape == (2, 3)
    z.sum().backward()
    assert g.grad.shape == (1,) and y.grad.shape == (2, 1)
    torch.testing.assert_close(g.grad, torch.tensor([3 * (1 / 3 + 1 / 12)], dtype=F64))


# -- dtypes ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_float_dtypes_stay_as_they_are(dtype):
    x = torch.tensor([8.0, -27.0], dtype=dtype, requires_grad=True)
    y = ct.cbrt(x)
    assert y.dtype is dtype
    y.sum().backward()
    assert x.grad.dtype is dtype
    assert ct.cbrt_and_grad(x.detach(), x.detach())[1].dtype is dtype


@pytest.mark.parametrize("default", [torch.float32, torch.float64])
@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.int8, torch.int32, torch.int64])
def test_integers_give_the_dtype_torch_sqrt_gives(dtype, default):
    previous = torch.get_default_dtype()
    torch.set_default_dtype(default)
    try:
        t = torch.tensor([0, 1], dtype=dtype)
        assert ct.cbrt(t).dtype is torch.sqrt(t).dtype is default
        assert ct.cbrt(t).tolist() == [0.0, 1.0]
        assert ct.cbrt_grad(t, t).dtype is default
    finally:
        torch.set_default_dtype(previous)


def test_two_inputs_promote_as_torch_add():
    operands = [
        torch.ones(2, dtype=dtype) for dtype in (torch.bool, torch.int32, torch.float16, F64)
    ]
    operands += [torch.tensor(1, dtype=torch.int64), torch.tensor(1.0, dtype=F64)]
    operands += [True, 2, 2.5]
    for a in operands:
        for b in operands:
            if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
                assert _arguments.result_type(a, b) is torch.result_type(a, b), (a, b)
    f16, bf16 = torch.ones(2, dtype=torch.float16), torch.ones(2, dtype=torch.bfloat16)
    f32, f64 = torch.ones(2), torch.ones(2, dtype=F64)
    for a, b in ((f16, bf16), (f32, f64), (f16, f64), (f32, torch.ones(2, dtype=torch.int64))):
        assert ct.cbrt_grad(a, b).dtype is torch.add(a, b).dtype
        assert ct.cbrt_and_grad(a, b)[0].dtype is torch.add(a, b).dtype
    assert ct.cbrt_grad(1.0, f16).dtype is torch.float16  # a Python number is weak
    assert ct.cbrt_grad(f32, 2).tolist() == pytest.approx([1 / 12, 1 / 12])
    # Each gradient comes back in its input's dtype.
    g = torch.ones(2, dtype=torch.float16, requires_grad=True)
    y = torch.full((2,), 2.0, dtype=F64, requires_grad=True)
    ct.cbrt_grad(g, y).sum().backward()
    assert g.grad.dtype is torch.float16 and y.grad.dtype is F64


@pytest.mark.parametrize("half", [torch.float16, torch.bfloat16])
def test_autocast_forces_float32_and_the_gradient_comes_back_in_the_input_dtype(half):
    x = torch.tensor([8.0, 1e-3], dtype=half, requires_grad=True)
    with torch.autocast("cpu", dtype=half):
        y = ct.cbrt(x)
        assert y.dtype is torch.float32
        assert torch.ops.cbrtgrad.cube_root(x.detach()).dtype is torch.float32
        y2, dx = ct.cbrt_and_grad(x.detach(), torch.ones(2, dtype=half))
        assert y2.dtype is dx.dtype is torch.float32
        # The gradient op keeps its inputs (the engine's PROMOTE policy).
        assert ct.cbrt_grad(x.detach(), x.detach()).dtype is half
        assert ct.cbrt(x.detach().double()).dtype is F64  # float64 is left alone
    assert torch.equal(y, ct.cbrt(x.detach().float()))
    y.sum().backward()
    assert x.grad.dtype is half
    assert torch.equal(x.grad, ct.cbrt_grad(torch.ones(2), y.detach()).to(half))


# -- errors ---------------------------------------------------------------------------


def test_complex_and_other_dtypes_are_type_errors_naming_them():
    z = torch.ones(2, dtype=torch.complex64)
    with pytest.raises(TypeError, match=r"cbrt: x has dtype torch\.complex64"):
        ct.cbrt(z)
    with pytest.raises(TypeError, match=r"cbrt_grad: y has dtype torch\.complex128"):
        ct.cbrt_grad(torch.ones(2), z.to(torch.complex128))
    with pytest.raises(TypeError, match=r"cbrt_and_grad: g has dtype torch\.complex64"):
        ct.cbrt_and_grad(torch.ones(2), z)
    with pytest.raises(TypeError, match=r"x has dtype torch\.float8_e4m3fn"):
        ct.cbrt(torch.ones(2).to(torch.float8_e4m3fn))
    with pytest.raises(TypeError, match=r"x has dtype torch\.complex64"):
        torch.ops.cbrtgrad.cube_root(z)
    with pytest.raises(TypeError, match=r"g has dtype torch\.float32 and y torch\.float64"):
        torch.ops.cbrtgrad.cube_root_grad(torch.ones(2), torch.ones(2, dtype=F64))


def test_non_tensors_are_type_errors_naming_the_argument():
    with pytest.raises(TypeError, match="argument 'x' must be a Tensor, not list"):
        ct.cbrt([1.0])
    with pytest.raises(TypeError, match="argument 'g' must be a Tensor, not ndarray"):
        ct.cbrt_grad(np.ones(2), torch.ones(2))
    with pytest.raises(TypeError, match="argument 'g' must be a Tensor, not float"):
        ct.cbrt_grad(1.0, 2.0)


def test_two_devices_are_a_runtime_error_naming_both():
    meta = torch.ones(3, device="meta")
    with pytest.raises(RuntimeError, match="g is on cpu and y on meta"):
        ct.cbrt_grad(torch.ones(3), meta)
    with pytest.raises(RuntimeError, match="x is on meta and g on cpu"):
        ct.cbrt_and_grad(meta, torch.ones(3))
    with pytest.raises(RuntimeError, match="g is on cpu and y on meta"):
        torch.ops.cbrtgrad.cube_root_grad(torch.ones(3), meta)
    # As torch.add: a 0-d CPU tensor goes with a tensor on another device.
    assert ct.cbrt_grad(torch.tensor(1.0), meta).device.type == "meta"


def test_shapes_that_do_not_broadcast_are_a_runtime_error_naming_both():
    with pytest.raises(RuntimeError, match=r"g of shape \(3,\) and y of shape \(4,\)"):
        ct.cbrt_grad(torch.ones(3), torch.ones(4))
    with pytest.raises(RuntimeError, match=r"x of shape \(2, 3\) and g of shape \(2,\)"):
        ct.cbrt_and_grad(torch.ones(2, 3), torch.ones(2))


def test_meta_tensors_go_through_the_fake_kernels():
    y = ct.cbrt(torch.ones(2, 3, device="meta", dtype=torch.bfloat16))
    assert y.device.type == "meta" and y.shape == (2, 3) and y.dtype is torch.bfloat16
    assert ct.cbrt_grad(torch.ones(3, 1, device="meta"), torch.ones(4, device="meta")).shape == (
        3,
        4,
    )


def test_an_in_place_write_to_the_saved_output_is_caught():
    x = torch.ones(3, requires_grad=True)
    y = ct.cbrt(x)
    y.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


# -- autograd, opcheck, compile, func ---------------------------------------------------


def _f64(*values, grad=True):
    return torch.tensor(values, dtype=F64, requires_grad=grad)


def test_gradcheck_and_gradgradcheck_in_float64():
    x = _f64(-2.5, -0.7, 0.3, 1.9, 8.0)
    g = _f64(0.5, -1.5, 2.0, 0.25, 3.0)
    y = _f64(1.5, -0.8, 2.2, -3.1, 0.9)
    for fn, args in ((ct.cbrt, (x,)), (ct.cbrt_grad, (g, y)), (ct.cbrt_and_grad, (x, g))):
        assert torch.autograd.gradcheck(fn, args, check_forward_ad=True)
        assert torch.autograd.gradgradcheck(fn, args, check_fwd_over_rev=True)
    # The ops' own register_autograd (what a direct caller of torch.ops gets).
    ops = torch.ops.cbrtgrad
    for op, args in ((ops.cube_root, (x,)), (ops.cube_root_grad, (g, y))):
        assert torch.autograd.gradcheck(op, args)
        assert torch.autograd.gradgradcheck(op, args)
    assert torch.autograd.gradcheck(ops.cube_root_and_grad, (x, g))


def test_second_derivative_is_the_known_one():
    x = _f64(8.0)
    (dx,) = torch.autograd.grad(ct.cbrt(x).sum(), x, create_graph=True)
    (d2,) = torch.autograd.grad(dx.sum(), x)
    assert dx.item() == 1 / 12 and d2.item() == pytest.approx(-2 / (9 * 2.0**5))


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("cube_root", (_f64(-8.0, 0.3, 27.0),)),
        ("cube_root", (torch.tensor([[1.0, -2.0]]).t(),)),
        ("cube_root", (torch.tensor([8.0, -1e-3], dtype=torch.bfloat16),)),
        ("cube_root_grad", (_f64(1.0, 2.0, 3.0), _f64(2.0, -1.5, 4.0))),
        ("cube_root_grad", (torch.ones(3, 1), torch.full((4,), 2.0, requires_grad=True))),
        (
            "cube_root_grad",
            (torch.ones(2, dtype=torch.float16), torch.ones(2, dtype=torch.float16)),
        ),
        ("cube_root_and_grad", (_f64(8.0, -0.5), _f64(12.0, 3.0))),
        ("cube_root_and_grad", (torch.ones(2, 1), torch.ones(3))),
    ],
)
def test_opcheck(name, args):
    op = getattr(torch.ops.cbrtgrad, name)
    torch.library.opcheck(op, args)


def test_compile_fullgraph_has_no_graph_break():
    # aot_eager: the whole of torch.compile's tracing (dynamo, the fake kernels,
    # AOTAutograd's forward and backward graphs) without inductor's code
    # generation, which takes some 20 s on 2 cores; fullgraph=True raises at a break.
    def loss(x, g):
        y, dx = ct.cbrt_and_grad(x, g)
        return (ct.cbrt(x) * 2 + ct.cbrt_grad(g, y) + dx).sum()

    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")
    x, g = _f64(-8.0, 0.5, 27.0), _f64(1.0, 2.0, 3.0)
    value = compiled(x, g)
    (expected_grad,) = torch.autograd.grad(loss(x, g), x)
    value.backward()
    assert value.item() == loss(x, g).item()
    assert torch.equal(x.grad, expected_grad)
    explained = torch._dynamo.explain(loss)(x.detach(), g.detach())
    assert explained.graph_break_count == 0 and explained.graph_count == 1


def test_torch_func_grad_vmap_jacrev():
    x = torch.tensor([-8.0, 0.5, 27.0], dtype=F64)
    expected = ct.cbrt_grad(torch.ones(3, dtype=F64), ct.cbrt(x))
    grad = torch.func.grad(lambda t: ct.cbrt(t).sum())
    assert torch.equal(grad(x), expected)
    assert torch.equal(torch.diagonal(torch.func.jacrev(ct.cbrt)(x)), expected)
    assert torch.equal(torch.func.vmap(grad)(x.reshape(3, 1)).reshape(3), expected)
    second = torch.func.grad(torch.func.grad(lambda t: ct.cbrt(t)))(torch.tensor(8.0, dtype=F64))
    assert second.item() == pytest.approx(-2 / (9 * 2.0**5))
    batched = torch.func.vmap(ct.cbrt)(x.reshape(3, 1))
    assert torch.equal(batched.reshape(3), ct.cbrt(x))
    # Batched and unbatched operands of the two-input functions, broadcast.
    g, y = torch.arange(1.0, 13.0, dtype=F64).reshape(4, 3), torch.full((2, 3), 2.0, dtype=F64)
    assert torch.equal(
        torch.func.vmap(ct.cbrt_grad, in_dims=(0, None))(g, y),
        ct.cbrt_grad(g.reshape(4, 1, 3), y),
    )
    assert torch.equal(
        torch.func.vmap(ct.cbrt_grad, in_dims=(None, 1))(y[0], y.t()), ct.cbrt_grad(y[0], y)
    )
    ys, dxs = torch.func.vmap(ct.cbrt_and_grad, in_dims=(None, 0))(y, g)
    assert ys.shape == dxs.shape == (4, 2, 3)
    jac = torch.func.jacrev(lambda t: ct.cbrt_and_grad(t, torch.ones(3, dtype=F64))[1])(x)
    torch.testing.assert_close(torch.diagonal(jac), -2 / (9 * ct.cbrt(x) ** 5))


def test_forward_mode_jvp_jacfwd_hessian():
    # The Functions' jvp: the tangent through the correctly rounded gradient op
    # (the custom ops alone would give a zero tangent: torch.library has no
    # forward-mode registration).
    x = torch.tensor([-8.0, 0.5, 27.0], dtype=F64)
    expected = ct.cbrt_grad(torch.ones(3, dtype=F64), ct.cbrt(x))
    _, tangent = torch.func.jvp(ct.cbrt, (x,), (torch.ones(3, dtype=F64),))
    assert torch.equal(tangent, expected)
    assert torch.equal(torch.diagonal(torch.func.jacfwd(ct.cbrt)(x)), expected)
    hessian = torch.func.hessian(lambda t: ct.cbrt(t).sum())(x)
    torch.testing.assert_close(torch.diagonal(hessian), -2 / (9 * ct.cbrt(x) ** 5))
    with torch.autograd.forward_ad.dual_level():
        dual = torch.autograd.forward_ad.make_dual(x, torch.ones(3, dtype=F64))
        assert torch.equal(torch.autograd.forward_ad.unpack_dual(ct.cbrt(dual)).tangent, expected)
    g = torch.tensor([1.0, 2.0, 3.0], dtype=F64)
    for fn, args in ((ct.cbrt_grad, (g, ct.cbrt(x))), (ct.cbrt_and_grad, (x, g))):
        forward = torch.func.jacfwd(fn, argnums=(0, 1))(*args)
        reverse = torch.func.jacrev(fn, argnums=(0, 1))(*args)
        torch.testing.assert_close(forward, reverse)


# -- packaging --------------------------------------------------------------------------


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_import_cbrtgrad_imports_no_torch():
    done = _run("import json, sys, cbrtgrad; print(json.dumps('torch' in sys.modules))")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) is False


def test_without_torch_the_bridge_is_an_import_error_naming_the_extra():
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "try:\n    import cbrtgrad.torch\n"
        "except ImportError as exc:\n    print(exc)\n"
    )
    done = _run(code)
    assert done.returncode == 0, done.stderr
    assert "cbrtgrad[torch]" in done.stdout


def test_the_torch_extra_is_a_range_that_this_torch_is_in():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    extra = config["options.extras_require"]["torch"].split()
    (floor,) = [r for r in extra if r.startswith("torch")]
    assert floor.startswith("torch>=")
    version = tuple(int(v) for v in floor.removeprefix("torch>=").split("."))
    assert tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2]) >= version
