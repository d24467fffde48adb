"""Tensors on other libraries' arrays: the engine through the array API standard.

``array_api_strict`` arrays have nothing outside the standard, so a function
of numpy's slipping into the engine fails here; they wrap numpy, so every
value, gradient and sum is compared bit for bit with the numpy engine. PyTorch
CPU tensors run the same through ``array_api_compat``'s torch namespace (its
sums add in another order: their values agree to the last bits). CuPy arrays
and PyTorch CUDA tensors run where a GPU is present (``NUMBA_ENABLE_CUDASIM=0``).
Results keep the input's library.
"""

import copy
import os

import numpy as np
import pytest

import cbrtgrad as cg
from cbrtgrad.engine.array_api import StandardArray

xp_strict = pytest.importorskip("array_api_strict")

RNG = np.random.default_rng(2026)
X64 = np.concatenate([RNG.uniform(-30, 30, 13), [8.0, -27.0, 1e-300, -2.5e-310]])


def _torch():
    return pytest.importorskip("torch")


def _on_gpu():
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return False
    from numba import cuda

    return cuda.is_available()


class Kind:
    """How to make and read arrays of one library."""

    def __init__(self, name, make, host, exact_sums, half=True):
        self.name, self.make, self.host = name, make, host
        self.exact_sums, self.half = exact_sums, half

    def __repr__(self):
        return self.name

    def owns(self, array):
        return type(array).__module__.split(".")[0] == self.name.split("-")[0]


def strict():
    return Kind("array_api_strict", xp_strict.asarray, np.asarray, True, half=False)


def torch_cpu():
    torch = _torch()
    return Kind("torch-cpu", torch.from_numpy, lambda t: t.numpy(), False)


def torch_cuda():
    torch = _torch()
    if not (_on_gpu() and torch.cuda.is_available()):
        pytest.skip("no GPU (a PyTorch CUDA build and NUMBA_ENABLE_CUDASIM=0)")
    return Kind(
        "torch-cuda", lambda a: torch.from_numpy(a).cuda(), lambda t: t.cpu().numpy(), False
    )


def cupy_gpu():
    cupy = pytest.importorskip("cupy")
    if not _on_gpu():
        pytest.skip("no GPU (NUMBA_ENABLE_CUDASIM=0)")
    return Kind("cupy", cupy.asarray, cupy.asnumpy, False)


@pytest.fixture(params=[strict, torch_cpu, torch_cuda, cupy_gpu], ids=lambda f: f.__name__)
def kind(request):
    return request.param()


def both(kind, values, **kwargs):
    """The same leaf on numpy and on ``kind``'s library."""
    values = np.ascontiguousarray(values)
    return cg.Tensor(values, **kwargs), cg.Tensor(kind.make(values.copy()), **kwargs)


def same(kind, got, want):
    assert kind.owns(got), type(got)
    np.testing.assert_array_equal(kind.host(got), want)


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # float32 zeros
def test_forward_backward_bits_equal_the_numpy_engine(kind):
    for dtype in (np.float32, np.float64):
        xn, xk = both(kind, X64.astype(dtype), requires_grad=True)
        for x in (xn, xk):
            (cg.cbrt(x) * 2.0 - x / 3.0).sum().backward()
        assert xk.grad.dtype == xk.data.dtype
        same(kind, xk.grad, xn.grad)
        yk = cg.cbrt(xk)
        assert kind.owns(yk.data)  # .data is the library's own array
        np.testing.assert_array_equal(yk.numpy(), cg.cbrt(xn).numpy())


def test_broadcasting_ops_and_reductions(kind):
    a = RNG.uniform(1, 9, (3, 4))
    b = RNG.uniform(1, 9, (4,))
    an, ak = both(kind, a, requires_grad=True)
    bn, bk = both(kind, b, requires_grad=True)
    for x, y in ((an, bn), (ak, bk)):
        z = (cg.cbrt(x) * y + 1.5) ** 2 - x / y
        z.mean(axis=0).sum().backward()
    same(kind, ak.grad, an.grad)
    same(kind, bk.grad, bn.grad)
    sums = cg.cbrt(ak).sum(axis=1).numpy(), cg.cbrt(an).sum(axis=1).numpy()
    if kind.exact_sums:
        np.testing.assert_array_equal(*sums)
    else:  # the library's own summation order
        np.testing.assert_allclose(*sums, rtol=1e-15)
    kept = cg.Tensor(kind.make(a.copy())).sum(axis=(0, 1), keepdims=True)
    assert kept.shape == (1, 1) and kind.owns(kept.data)


def test_double_backward_and_create_graph(kind):
    xn, xk = both(kind, np.array([8.0, -27.0, 0.7, 3.0]), requires_grad=True)
    for x in (xn, xk):
        (g,) = cg.engine.graph.grad_of(cg.cbrt(x).sum(), [x], create_graph=True)
        g.sum().backward()
    same(kind, xk.grad, xn.grad)
    np.testing.assert_allclose(xn.grad, -2 / (9 * np.cbrt(xn.numpy()) ** 5))


def test_functional_transforms_and_gradcheck(kind):
    xs = np.array([8.0, 0.5, -3.0])
    f = lambda t: (cg.cbrt(t) * t).sum()  # noqa: E731
    value_n, grad_n = cg.value_and_grad(f)(xs)
    value_k, grad_k = cg.value_and_grad(f)(kind.make(xs.copy()))
    same(kind, grad_k, grad_n)
    assert kind.owns(value_k)
    assert float(kind.host(value_k)) == pytest.approx(value_n, rel=1e-15)
    second = cg.grad(lambda t: cg.grad(f)(t).sum())
    same(kind, second(kind.make(xs.copy())), second(xs))
    assert cg.gradcheck(lambda t: cg.cbrt(t) * t, (kind.make(xs.copy()),))
    assert cg.gradgradcheck(lambda t: cg.cbrt(t), (kind.make(xs.copy()),))


def test_version_check_and_anomaly_mode(kind):
    x = cg.Tensor(kind.make(np.array([8.0, 27.0])), requires_grad=True)
    y = cg.cbrt(x)
    z = y * 1.0
    with cg.no_grad():
        y += 1.0  # rebinds y's data and bumps its version
    with pytest.raises(RuntimeError, match="modified in place"):
        z.sum().backward()
    zero = cg.Tensor(kind.make(np.array([0.0, 8.0])), requires_grad=True)
    with cg.detect_anomaly(), pytest.raises(FloatingPointError, match="CubeRootBackward"):
        with np.errstate(divide="ignore"):
            cg.cbrt(zero).sum().backward()


def test_half_precision_is_computed_in_float32(kind):
    v = np.array([8.0, -27.0, 0.3, 5.0], dtype=np.float16)
    if not kind.half:
        with pytest.raises(TypeError, match="array_api_strict has no dtype float16"):
            cg.Tensor(kind.make(v.astype(np.float32))).astype(np.float16)
        return
    xn, xk = both(kind, v, requires_grad=True)
    for x in (xn, xk):
        cg.cbrt(x).sum().backward()
    assert cg.cbrt(xk).dtype == np.float32
    assert xk.grad.dtype == xk.data.dtype
    same(kind, xk.grad, xn.grad)
    if kind.name.startswith("torch"):  # bfloat16, which neither DLPack nor .numpy() takes
        torch = _torch()
        xb = cg.Tensor(kind.make(v.astype(np.float32)), requires_grad=True)
        xb = cg.Tensor(xb.data.to(torch.bfloat16), requires_grad=True)
        xn = cg.Tensor(xb.numpy(), requires_grad=True)
        for x in (xn, xb):
            cg.cbrt(x).sum().backward()
        assert xb.grad.dtype == torch.bfloat16
        np.testing.assert_array_equal(xb.numpy(), xn.numpy())
        np.testing.assert_array_equal(cg.Tensor(xb.grad).numpy(), xn.grad)


def test_nothing_is_converted_to_numpy_implicitly(kind):
    xk = cg.Tensor(kind.make(np.array([1.0, 8.0])))
    with pytest.raises(TypeError, match="not converted to numpy implicitly"):
        np.asarray(xk)
    np.testing.assert_array_equal(xk.numpy(), [1.0, 8.0])  # the explicit copy
    assert not xk.numpy().flags.writeable
    assert kind.name.split("-")[0] in repr(xk)
    assert cg.Tensor(kind.make(np.array([2.0]))).item() == 2.0


def test_mixing_libraries_is_a_type_error_naming_each(kind):
    xn, xk = both(kind, np.array([1.0, 8.0]), requires_grad=True)
    with pytest.raises(TypeError, match="a numpy array and another a .* array"):
        xk + xn
    with pytest.raises(TypeError, match="a numpy array and another a .* array"):
        xk * np.ones(2)
    with pytest.raises(TypeError, match="g is a numpy array and y a .* array"):
        cg.cbrt_grad(np.ones(2), xk)
    y = cg.cbrt(xk)
    with pytest.raises(TypeError, match="the tensor is a .* array and gradient a numpy"):
        y.backward(np.ones(2))
    with pytest.raises(TypeError, match="gradient is a .* array and the tensor a numpy"):
        cg.cbrt(xn).backward(kind.make(np.ones(2)))


def test_a_gradient_argument_and_accumulation(kind):
    x = cg.Tensor(kind.make(np.array([8.0, 1.0])), requires_grad=True)
    seed = kind.make(np.array([12.0, 3.0]))
    cg.cbrt(x).backward(seed)
    cg.cbrt(x).backward(seed)
    same(kind, x.grad, [2.0, 2.0])
    assert x.grad is not seed
    clone = copy.deepcopy(x)
    assert kind.owns(clone.data) and clone.data is not x.data
    same(kind, clone.grad, [2.0, 2.0])


def test_bad_input_is_a_clear_error(kind):
    a = StandardArray(kind.make(np.array([1.0, 8.0])))
    with pytest.raises(ValueError, match="reshapes in C order only"):
        a.reshape(2, order="F")
    with pytest.raises(TypeError, match="exponent of \\*\\* on a Tensor's array must be a scalar"):
        a ** StandardArray(kind.make(np.array([2.0, 2.0])))
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d array"):
        len(a.sum())
    xk = cg.Tensor(kind.make(np.array([1.0, 8.0])))
    with pytest.raises(TypeError, match="a numpy array and another"):
        xk += cg.Tensor(np.ones(2))  # an in-place op cannot mix libraries either
    xf = cg.Tensor(kind.make(np.array([1.0, 8.0], np.float32)))
    xf += cg.Tensor(kind.make(np.array([1.0, 1.0])))  # cast back 'same_kind', as numpy's +=
    assert xf.dtype == np.float32 and xf.version == 1
    np.testing.assert_array_equal(xf.numpy(), [2.0, 9.0])
    with pytest.raises(TypeError, match="complex"):
        cg.Tensor(kind.make(np.array([1.0 + 1j])))


def test_two_libraries_in_one_op_are_refused():
    torch = _torch()
    a = cg.Tensor(xp_strict.asarray([1.0, 8.0]))
    b = cg.Tensor(torch.tensor([1.0, 8.0], dtype=torch.float64))
    with pytest.raises(TypeError, match="torch array and another a array_api_strict array"):
        a + b


def test_a_broadcast_of_one_element_stays_one_element():
    # loss.sum().backward(): the sum's gradient is one value broadcast to the
    # input's shape. It stays one element (StandardArray.one) until an array
    # is asked for, through element-wise ops with scalars; on a GPU the cube
    # root's gradient kernel reads that element (test_cuda_sim's one-element g).
    one = StandardArray(xp_strict.asarray([4.0]))
    lazy = one.broadcast_to((2, 3))
    assert lazy.is_lazy_broadcast and lazy.shape == (2, 3)
    scaled = -(lazy * 2.0) / 4.0
    assert scaled.is_lazy_broadcast and scaled.shape == (2, 3)
    np.testing.assert_array_equal(scaled.to_host(), np.full((2, 3), -2.0))
    mixed = lazy + StandardArray(xp_strict.ones((2, 3), dtype=xp_strict.float64))
    assert not mixed.is_lazy_broadcast
    np.testing.assert_array_equal(mixed.to_host(), np.full((2, 3), 5.0))
    made = StandardArray(xp_strict.asarray([1.0, 2.0])).broadcast_to((3, 2))
    assert not made.is_lazy_broadcast  # more than one element: made at once
    with pytest.raises(ValueError):
        one.broadcast_to(())  # fewer dimensions than it has, as numpy refuses


def test_numba_device_arrays_need_cupy():
    cuda = pytest.importorskip("numba.cuda")
    try:
        import cupy  # noqa: F401
    except ImportError:
        with pytest.raises(TypeError, match="numba device array .* through CuPy.*pip install cupy"):
            cg.Tensor(cuda.to_device(np.array([8.0])))
        return
    if not _on_gpu():
        pytest.skip("CuPy views numba's arrays on a GPU only")
    x = cg.Tensor(cuda.to_device(np.array([8.0, -27.0])), requires_grad=True)
    cg.cbrt(x).sum().backward()
    assert cuda.is_cuda_array(x.grad) and type(x.grad).__module__.startswith("numba")
    np.testing.assert_array_equal(x.grad.copy_to_host(), cg.cbrt_grad(1.0, np.array([2.0, -3.0])))
