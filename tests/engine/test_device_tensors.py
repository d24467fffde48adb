"""Tensors on device arrays: the engine on numba device arrays (CUDA simulator in CI).

Every gradient is compared bit for bit with the CPU engine on the same
inputs (the sums' own values may differ in the last bit: device sums
accumulate in another order, see cbrtgrad.backends.device_math).
"""

import copy

import numpy as np
import pytest

import cbrtgrad as cg
from cbrtgrad._array_kinds import is_device_array

from ..backends._cases import SIMULATED_DIVISION

cuda = pytest.importorskip("numba.cuda")

RNG = np.random.default_rng(2026)
X64 = np.concatenate([RNG.uniform(-30, 30, 13), [8.0, -27.0, 1e-300, -2.5e-310]])


def device(a):
    return cuda.to_device(np.ascontiguousarray(a))


def host(a):
    return a.copy_to_host()


def both(values, **kwargs):
    """The same leaf on the host and on the device."""
    return cg.Tensor(values, **kwargs), cg.Tensor(device(values), **kwargs)


@pytest.mark.filterwarnings(SIMULATED_DIVISION)
def test_forward_backward_bits_equal_the_cpu_engine():
    for dtype in (np.float32, np.float64):
        xh, xd = both(X64.astype(dtype), requires_grad=True)
        for x in (xh, xd):
            # In float32, 1e-300 and -2.5e-310 are zeros: their gradient is inf.
            with np.errstate(divide="ignore"):
                (cg.cbrt(x) * 2.0 - x / 3.0).sum().backward()
        assert is_device_array(xd.grad) and xd.grad.dtype == dtype
        np.testing.assert_array_equal(host(xd.grad), xh.grad)
        yd = cg.cbrt(xd)
        np.testing.assert_array_equal(yd.numpy(), cg.cbrt(xh).numpy())
        assert is_device_array(yd.data)  # .data is the library's own array


def test_broadcasting_ops_and_reductions_on_the_device():
    a = RNG.uniform(1, 9, (3, 4))
    b = RNG.uniform(1, 9, (4,))
    ah, ad = both(a, requires_grad=True)
    bh, bd = both(b, requires_grad=True)
    for x, y in ((ah, bh), (ad, bd)):
        z = (cg.cbrt(x) * y + 1.5) ** 2 - x / y
        z.mean(axis=0).sum().backward()
    np.testing.assert_array_equal(host(ad.grad), ah.grad)
    np.testing.assert_array_equal(host(bd.grad), bh.grad)
    # Values of reductions agree to the last bits (another summation order).
    np.testing.assert_allclose(
        cg.cbrt(ad).sum(axis=1).numpy(), cg.cbrt(ah).sum(axis=1).numpy(), rtol=1e-15
    )


def test_double_backward_and_create_graph_on_the_device():
    xh, xd = both(np.array([8.0, -27.0, 0.7, 3.0]), requires_grad=True)
    for x in (xh, xd):
        (g,) = cg.engine.graph.grad_of(cg.cbrt(x).sum(), [x], create_graph=True)
        g.sum().backward()
    assert isinstance(xd.grad, np.ndarray) is False
    np.testing.assert_array_equal(host(xd.grad), xh.grad)
    np.testing.assert_allclose(xh.grad, -2 / (9 * np.cbrt(xh.numpy()) ** 5))


def test_functional_grad_value_and_grad_and_gradcheck_on_the_device():
    xs = np.array([8.0, 0.5, -3.0])
    f = lambda t: (cg.cbrt(t) * t).sum()  # noqa: E731
    value_h, grad_h = cg.value_and_grad(f)(xs)
    value_d, grad_d = cg.value_and_grad(f)(device(xs))
    assert is_device_array(grad_d)
    np.testing.assert_array_equal(host(grad_d), grad_h)
    assert is_device_array(value_d)
    assert host(value_d) == pytest.approx(value_h, rel=1e-15)
    second = cg.grad(lambda t: cg.grad(f)(t).sum())
    np.testing.assert_array_equal(host(second(device(xs))), second(xs))
    assert cg.gradcheck(lambda t: cg.cbrt(t) * t, (device(xs),))
    assert cg.gradgradcheck(lambda t: cg.cbrt(t), (device(xs),))


@pytest.mark.filterwarnings(SIMULATED_DIVISION)
def test_version_check_and_anomaly_mode_on_the_device():
    x = cg.Tensor(device(np.array([8.0, 27.0])), requires_grad=True)
    y = cg.cbrt(x)
    z = y * 1.0
    with cg.no_grad():
        y += 1.0  # rebinds y's data and bumps its version
    with pytest.raises(RuntimeError, match="modified in place"):
        z.sum().backward()
    zero = cg.Tensor(device(np.array([0.0, 8.0])), requires_grad=True)
    with cg.detect_anomaly(), pytest.raises(FloatingPointError, match="CubeRootBackward"):
        cg.cbrt(zero).sum().backward()


def test_half_precision_and_float32_on_the_device():
    v = np.array([8.0, -27.0, 0.3, 5.0], dtype=np.float16)
    xh, xd = both(v, requires_grad=True)
    for x in (xh, xd):
        cg.cbrt(x).sum().backward()
    assert cg.cbrt(xd).dtype == np.float32  # half precision is computed in float32
    assert xd.grad.dtype == np.float16
    np.testing.assert_array_equal(host(xd.grad), xh.grad)


def test_nothing_is_copied_to_the_host_implicitly():
    xd = cg.Tensor(device(np.array([1.0, 8.0])))
    with pytest.raises(TypeError, match="not copied to the host implicitly"):
        np.asarray(xd)
    np.testing.assert_array_equal(xd.numpy(), [1.0, 8.0])  # the explicit copy
    assert not xd.numpy().flags.writeable
    assert "device array" in repr(xd)
    assert cg.Tensor(device(np.array([2.0]))).item() == 2.0


def test_mixing_host_and_device_is_a_type_error_naming_each():
    xh, xd = both(np.array([1.0, 8.0]), requires_grad=True)
    with pytest.raises(TypeError, match="host data .* device array"):
        xd + xh
    with pytest.raises(TypeError, match="host data .* device array"):
        xd * np.ones(2)
    with pytest.raises(TypeError, match="g is a host array and y on the device"):
        cg.cbrt_grad(np.ones(2), xd)
    y = cg.cbrt(xd)
    with pytest.raises(TypeError, match="the tensor is on the device and gradient on the host"):
        y.backward(np.ones(2))
    with pytest.raises(TypeError, match="gradient is on the device and the tensor on the host"):
        cg.cbrt(xh).backward(device(np.ones(2)))


def test_device_gradient_argument_and_accumulation():
    x = cg.Tensor(device(np.array([8.0, 1.0])), requires_grad=True)
    seed = device(np.array([12.0, 3.0]))
    cg.cbrt(x).backward(seed)
    cg.cbrt(x).backward(seed)
    np.testing.assert_array_equal(host(x.grad), [2.0, 2.0])
    assert x.grad is not seed
    clone = copy.deepcopy(x)
    assert is_device_array(clone.data) and clone.data is not x.data
    np.testing.assert_array_equal(host(clone.grad), [2.0, 2.0])


def test_bad_device_input_is_a_clear_error():
    from cbrtgrad.engine.device import DeviceArray

    a = DeviceArray(device(np.array([1.0, 8.0])))
    with pytest.raises(ValueError, match="C order, not 'F'"):
        a.reshape(2, order="F")
    with pytest.raises(TypeError, match="exponent of a device \\*\\* must be a real scalar"):
        a ** DeviceArray(device(np.array([2.0, 2.0])))
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d device array"):
        len(a.sum())
    xd = cg.Tensor(device(np.array([1.0, 8.0])))
    with pytest.raises(TypeError, match="host data .* device array"):
        xd += cg.Tensor(np.ones(2))  # an in-place op cannot mix sides either
    xf = cg.Tensor(device(np.array([1.0, 8.0], np.float32)))
    xf += cg.Tensor(device(np.array([1.0, 1.0])))  # cast back 'same_kind', as numpy's +=
    assert xf.dtype == np.float32 and xf.version == 1
    np.testing.assert_array_equal(xf.numpy(), [2.0, 9.0])


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # y = -0 from -2.5e-310
def test_a_sums_gradient_reaches_the_kernel_as_one_element():
    # loss.sum().backward(): the sum's gradient is one value broadcast to the
    # input's shape. On the device it stays one element (DeviceArray.one)
    # until an array is asked for, and the cube root's gradient kernel reads
    # that element instead of a materialised broadcast: the same bits.
    from cbrtgrad.engine.cube_root import _gradient
    from cbrtgrad.engine.device import DeviceArray

    for dtype in (np.float32, np.float64):
        xh, xd = both(X64.astype(dtype), requires_grad=True)
        for x in (xh, xd):
            cg.cbrt(x).sum().backward()
            (cg.cbrt(x) * 2.0).mean().backward()  # scaled on the one element too
        np.testing.assert_array_equal(host(xd.grad), xh.grad)
        yh = cg.cbrt(xh).numpy()
        one = DeviceArray(device(np.array(1.5, dtype)))
        g = one.broadcast_to(yh.shape)
        assert g.is_lazy_broadcast and g.shape == yh.shape
        backend = cg.backends.get_backend("cuda")
        dx = _gradient(backend, g, DeviceArray(device(yh)))
        assert g.is_lazy_broadcast  # never made into an array
        want = cg.cbrt_grad(np.full(yh.shape, 1.5, dtype), yh)
        np.testing.assert_array_equal(host(dx.raw), want)
        # Asked for, it is the broadcast array itself.
        np.testing.assert_array_equal(host(g.raw), np.full(yh.shape, 1.5, dtype))
        assert not g.is_lazy_broadcast


def test_broadcasts_of_more_than_one_element_are_made_at_once():
    from cbrtgrad.engine.device import DeviceArray

    a = DeviceArray(device(np.array([1.0, 2.0])))
    b = a.broadcast_to((3, 2))
    assert not b.is_lazy_broadcast
    np.testing.assert_array_equal(host(b.raw), np.array([[1.0, 2.0]] * 3))
    one = DeviceArray(device(np.array([4.0])))
    with pytest.raises(ValueError, match="does not broadcast"):
        one.broadcast_to(())  # fewer dimensions than it has: as numpy refuses
    # Element-wise ops of it with scalars stay one element; with an array of
    # its shape it is made into an array first.
    lazy = one.broadcast_to((2, 3))
    scaled = -(lazy * 2.0) / 4.0
    assert scaled.is_lazy_broadcast and scaled.shape == (2, 3)
    np.testing.assert_array_equal(host(scaled.raw), np.full((2, 3), -2.0))
    full = DeviceArray(device(np.ones((2, 3))))
    mixed = lazy + full
    assert not mixed.is_lazy_broadcast
    np.testing.assert_array_equal(host(mixed.raw), np.full((2, 3), 5.0))
