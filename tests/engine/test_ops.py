"""Gradients of every op: finite differences (float64), closed forms and numpy."""

import numpy as np
import pytest

import cbrtgrad as cg

RNG = np.random.default_rng(1)
X = np.array([-8.0, -2.5, -0.7, 0.3, 1.0, 27.0])
# NOTE: np.cbrt is an approximate oracle here, never an exact one: glibc's
# (numpy without SVML) is within 3.04 ulp, ours 0.5, so the forward's relative
# difference is below 3.6 * 2^-52 = 7.9e-16 (rtol 1e-15), and the gradient
# formulas built from it stay well inside their 1e-14 and 1e-13.


def test_cbrt_forward_matches_numpy_and_keeps_graph():
    x = cg.Tensor(X, requires_grad=True)
    y = cg.cbrt(x)
    assert isinstance(y, cg.Tensor)
    assert type(y.grad_fn) is cg.CubeRootBackward
    np.testing.assert_allclose(y.data, np.cbrt(X), rtol=1e-15)


def test_cbrt_gradient_closed_form():
    x = cg.Tensor(X, requires_grad=True)
    cg.cbrt(x).sum().backward()
    np.testing.assert_allclose(x.grad, 1 / (3 * np.cbrt(X) ** 2), rtol=1e-14)


def test_issue_example():
    x = cg.Tensor(np.linspace(-8, 8, 4), requires_grad=True)
    loss = (cg.cbrt(x) * 2.0 + x).sum()
    loss.backward()
    np.testing.assert_allclose(x.grad, 2 / (3 * np.cbrt(x.data) ** 2) + 1, rtol=1e-14)


def test_node_class_data():
    node = cg.CubeRootBackward
    assert node.schema.saves is cg.engine.Saves.OUTPUT  # the output, not the input
    assert node.schema == cg.OpSchema(
        name="cube_root",
        amp_policy=cg.AmpPolicy.FORCE_FP32,
        saves=cg.engine.Saves.OUTPUT,
        ufunc=np.cbrt,
    )


def test_schema_arity_is_checked_against_the_forward():
    with pytest.raises(TypeError, match=r"Bad\.forward takes 1 inputs; expected 2"):

        class Bad(cg.engine.Node):
            schema = cg.OpSchema(name="bad", arity=2)

            @staticmethod
            def forward(backend, a):
                return a


def test_every_op_saves_what_its_schema_says():
    a = cg.Tensor(np.array([2.0, 3.0]), requires_grad=True)
    y = cg.cbrt(a)
    assert y.grad_fn.saved == (y._data,)  # the output, not the input
    assert (a * 2.0).grad_fn.saved[0] is a  # the inputs
    assert (a + 2.0).grad_fn.saved == ()  # only shapes


class _Recorder:
    """A backend that counts kernel calls (delegating to the numpy backend)."""

    name = "recorder"

    def __init__(self):
        from cbrtgrad.backends import get_backend

        self.inner = get_backend("numpy")
        self.calls = []

    def cube_root(self, x, out=None, *, where=True, dtype=None):
        self.calls.append("cube_root")
        return self.inner.cube_root(x, out=out, where=where, dtype=dtype)

    def cube_root_grad(self, g, y, out=None, *, where=True):
        self.calls.append("cube_root_grad")
        return self.inner.cube_root_grad(g, y, out=out, where=where)


def test_forward_and_vjp_use_the_backend_and_the_saved_output():
    rec = _Recorder()
    y = cg.CubeRootBackward.forward(rec, np.array([8.0, -27.0]))
    node = cg.CubeRootBackward.__new__(cg.CubeRootBackward)
    node.saved, node.backend = (y,), rec  # what apply saves (schema.saves: the output)
    (dx,) = node.vjp(np.array([12.0, 27.0]))
    assert rec.calls == ["cube_root", "cube_root_grad"]  # the cube root is not re-run
    np.testing.assert_allclose(dx, [1.0, 1.0])


def test_backward_never_reruns_the_cube_root():
    x = cg.Tensor(X, requires_grad=True)
    y = cg.cbrt(x, backend="numpy")
    rec = _Recorder()
    y.grad_fn.backend = rec
    y.sum().backward()
    assert rec.calls == ["cube_root_grad"]


@pytest.mark.parametrize(
    "f",
    [
        lambda a, b: cg.cbrt(a),
        lambda a, b: a + b,
        lambda a, b: a - b,
        lambda a, b: a * b,
        lambda a, b: a / b,
        lambda a, b: -a + 0.0 * b,
        lambda a, b: a**3 + b**0.5,
        lambda a, b: a ** (-2) * b**0,
        lambda a, b: 2.0 - a * 3.0 + 1.0 / b,
        lambda a, b: (a * b).sum(axis=0),
        lambda a, b: (a * b).mean(),
        lambda a, b: (a * b).mean(axis=1, keepdims=True),
        lambda a, b: (a + b).reshape(6),
        lambda a, b: cg.cbrt(a * b) / (b + 5.0),
    ],
)
def test_gradcheck_every_op(f):
    a = RNG.uniform(0.5, 2.0, (2, 3))
    b = RNG.uniform(0.5, 2.0, (2, 3))
    assert cg.gradcheck(f, (a, b), atol=1e-5, rtol=1e-3)


def test_gradcheck_broadcasting_reduces_to_input_shapes():
    a = RNG.uniform(0.5, 2.0, (3, 1))
    b = RNG.uniform(0.5, 2.0, (4,))
    assert cg.gradcheck(lambda a, b: cg.cbrt(a * b + a / b - b), (a, b))
    ta, tb = cg.Tensor(a, requires_grad=True), cg.Tensor(b, requires_grad=True)
    (ta * tb).sum().backward()
    assert ta.grad.shape == (3, 1) and tb.grad.shape == (4,)
    np.testing.assert_allclose(ta.grad, np.full((3, 1), b.sum()))
    np.testing.assert_allclose(tb.grad, np.full(4, a.sum()))


def test_gradients_against_numpy_closed_forms():
    a = RNG.uniform(0.5, 2.0, 5)
    b = RNG.uniform(0.5, 2.0, 5)
    ta, tb = cg.Tensor(a, requires_grad=True), cg.Tensor(b, requires_grad=True)
    (ta / tb + ta**2.5).sum().backward()
    np.testing.assert_allclose(ta.grad, 1 / b + 2.5 * a**1.5, rtol=1e-14)
    np.testing.assert_allclose(tb.grad, -a / b**2, rtol=1e-14)


def test_constants_from_numpy_arrays_on_either_side():
    a = RNG.uniform(0.5, 2.0, 4)
    c = np.array([1.0, 2.0, 3.0, 4.0])
    t = cg.Tensor(a, requires_grad=True)
    out = c * t + c / t - t * c
    assert isinstance(out, cg.Tensor)
    out.sum().backward()
    np.testing.assert_allclose(t.grad, -c / a**2, rtol=1e-14)


def test_numpy_ufuncs_route_to_the_engine():
    t = cg.Tensor(X, requires_grad=True)
    for out in (np.cbrt(t), np.add(t, 1.0), np.multiply(2.0, t), np.negative(t), np.power(t, 2)):
        assert isinstance(out, cg.Tensor) and out.grad_fn is not None
    np.sum(np.cbrt(t)).backward()
    np.testing.assert_allclose(t.grad, 1 / (3 * np.cbrt(X) ** 2), rtol=1e-14)


def test_unsupported_numpy_ufunc_is_a_type_error():
    with pytest.raises(TypeError):
        np.sin(cg.Tensor(X))


def test_cbrt_on_arrays_stays_the_plain_function():
    out = cg.cbrt(X)
    assert type(out) is np.ndarray


def test_cbrt_grad_and_cbrt_and_grad_on_tensors_are_differentiable():
    y = cg.Tensor(np.cbrt(X), requires_grad=True)
    g = cg.cbrt_grad(np.ones_like(X), y)
    np.testing.assert_allclose(g.data, 1 / (3 * np.cbrt(X) ** 2), rtol=1e-14)
    g.sum().backward()
    np.testing.assert_allclose(y.grad, -2 / (3 * np.cbrt(X) ** 3), rtol=1e-13)
    yy, dx = cg.cbrt_and_grad(cg.Tensor(X), np.full(X.shape, 3.0))
    np.testing.assert_allclose(dx.data, 1 / np.cbrt(X) ** 2, rtol=1e-14)
    np.testing.assert_allclose(yy.data, np.cbrt(X), rtol=1e-15)


def test_pow_zero_exponent_gradient_is_zero_at_zero():
    x = cg.Tensor(np.array([0.0, 2.0]), requires_grad=True)
    (x**0).sum().backward()
    np.testing.assert_array_equal(x.grad, [0.0, 0.0])


def test_float32_stays_float32():
    x = cg.Tensor(X.astype(np.float32), requires_grad=True)
    y = cg.cbrt(x) * 2.0
    assert y.dtype == np.float32
    y.sum().backward()
    assert x.grad.dtype == np.float32
    np.testing.assert_allclose(x.grad, 2 / (3 * np.cbrt(X) ** 2), rtol=1e-6)


def test_integer_tensor_cbrt_gives_float64():
    y = cg.cbrt(cg.Tensor(np.array([1, 8, 27])))
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y.data, [1.0, 2.0, 3.0])


def test_cast_gradient_is_cast_back():
    x = cg.Tensor(np.array([8.0, 27.0]), requires_grad=True)
    y = cg.cbrt(x.astype(np.float32))
    assert y.dtype == np.float32 and type(y.grad_fn.next_functions[0]) is cg.engine.CastBackward
    y.sum().backward()
    assert x.grad.dtype == np.float64
    np.testing.assert_allclose(x.grad, [1 / 12, 1 / 27], rtol=1e-6)


def test_cbrt_dtype_keyword_is_a_differentiable_cast():
    x = cg.Tensor(np.array([8.0], dtype=np.float32), requires_grad=True)
    y = cg.cbrt(x, dtype=np.float64)
    assert y.dtype == np.float64
    y.sum().backward()
    assert x.grad.dtype == np.float32
    np.testing.assert_allclose(x.grad, [1 / 12], rtol=1e-7)


def test_large_float32_sum_follows_the_backend():
    import math

    from cbrtgrad.backends import use_backend

    a = np.full(10**6, 0.1, np.float32)
    exact = np.float32(math.fsum(a.astype(np.float64)))
    with use_backend("parallel"):
        total = cg.Tensor(a, requires_grad=True).sum()
    assert total.numpy() == exact  # float64 accumulation on all threads
    total.backward()
    with use_backend("cpu"):
        assert cg.Tensor(a).sum().numpy() == np.add.reduce(a)  # numpy's float32 sum
