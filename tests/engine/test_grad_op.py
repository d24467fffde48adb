"""The gradient kernel as an op: cbrt_grad on Tensors and the differentiable backward."""

import numpy as np
import pytest

import cbrtgrad as cg

RNG = np.random.default_rng(7)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cbrt_grad_on_tensors_is_the_correctly_rounded_kernel(dtype):
    # Values where numpy's g / (y * y * 3) (three roundings) is often 1 ulp off.
    g = RNG.standard_normal(4096).astype(dtype)
    y = RNG.uniform(0.5, 4.0, 4096).astype(dtype)
    kernel = cg.cbrt_grad(g, y)
    naive = g / (y * y * dtype(3))
    assert not np.array_equal(kernel, naive)  # the test can tell them apart
    got = cg.cbrt_grad(cg.Tensor(g, requires_grad=True), cg.Tensor(y))
    assert type(got.grad_fn).__name__ == "CubeRootGradBackward"
    np.testing.assert_array_equal(got.numpy(), kernel)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_create_graph_first_derivative_has_the_plain_bits(dtype):
    x_values = RNG.uniform(-50, 50, 2048).astype(dtype)
    g = RNG.standard_normal(2048).astype(dtype)
    plain = cg.Tensor(x_values, requires_grad=True)
    cg.cbrt(plain).backward(g)
    recorded = cg.Tensor(x_values, requires_grad=True)
    cg.cbrt(recorded).backward(g, create_graph=True)
    assert isinstance(recorded.grad, cg.Tensor)
    np.testing.assert_array_equal(recorded.grad.numpy(), plain.grad)
    np.testing.assert_array_equal(plain.grad, cg.cbrt_grad(g, cg.cbrt(x_values)))


def test_grad_op_second_derivatives_by_finite_differences():
    g = RNG.uniform(0.5, 2.0, 5)
    y = RNG.uniform(0.7, 3.0, 5) * np.array([1, -1, 1, -1, 1])
    assert cg.gradcheck(lambda a, b: cg.cbrt_grad(a, b), (g, y))
    assert cg.gradgradcheck(lambda a, b: cg.cbrt_grad(a, b), (g, y))
    assert cg.gradgradcheck(lambda x: cg.cbrt(x), (y,))


def test_grad_op_third_derivative_of_cbrt():
    # d3/dx3 x^(1/3) = 10 / (27 x^(8/3))
    x = 8.0
    third = cg.grad(cg.grad(cg.grad(cg.cbrt)))(x)
    assert third == pytest.approx(10 / (27 * 2.0**8), rel=1e-12)


def test_grad_op_broadcasts_and_reduces_its_gradients():
    g = cg.Tensor(np.ones((3, 4)), requires_grad=True)
    y = cg.Tensor(np.array([1.0, 2.0, 3.0, 4.0]), requires_grad=True)
    cg.cbrt_grad(g, y).sum().backward()
    assert g.grad.shape == (3, 4) and y.grad.shape == (4,)
    np.testing.assert_allclose(g.grad, np.broadcast_to(1 / (3 * y.numpy() ** 2), (3, 4)))
    np.testing.assert_allclose(y.grad, 3 * -2 / (3 * y.numpy() ** 3))


def test_grad_op_dtypes_follow_the_api_and_come_back_per_input():
    g = cg.Tensor(np.array([1.0, 2.0], dtype=np.float16), requires_grad=True)
    y = cg.Tensor(np.array([2.0, 3.0], dtype=np.float64), requires_grad=True)
    out = cg.cbrt_grad(g, y)
    assert out.dtype == np.result_type(np.float32, np.float64)
    out.sum().backward()
    assert g.grad.dtype == np.float16 and y.grad.dtype == np.float64
    half = cg.cbrt_grad(cg.Tensor(np.array([3.0], np.float16)), np.float16(1.0))
    assert half.dtype == np.float32  # half precision is computed and returned in float32
    weak = cg.cbrt_grad(3.0, cg.Tensor(np.array([1.0], np.float32)))
    assert weak.dtype == np.float32  # a Python float does not promote (NEP 50)


def test_grad_op_refuses_out_where_and_bad_operands():
    t = cg.Tensor(np.array([1.0]))
    with pytest.raises(TypeError, match="out= or where="):
        cg.cbrt_grad(t, t, out=np.empty(1))
    with pytest.raises(TypeError, match="y must be a Tensor"):
        cg.cbrt_grad(t, "1.0")
    with pytest.raises(TypeError, match="g"):
        cg.cbrt_grad(t.numpy().astype(complex), t)
