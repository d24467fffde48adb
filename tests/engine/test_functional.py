"""grad, value_and_grad, gradcheck itself, and the error messages of bad input."""

import numpy as np
import pytest

import cbrtgrad as cg


def test_grad_and_nested_grad_closed_forms():
    assert cg.grad(cg.cbrt)(8.0) == pytest.approx(1 / 12, rel=1e-15)
    assert cg.grad(cg.grad(cg.cbrt))(8.0) == pytest.approx(-2 / (9 * 2**5), rel=1e-14)
    third = cg.grad(cg.grad(cg.grad(cg.cbrt)))(8.0)
    assert third == pytest.approx(10 / (27 * 2**8), rel=1e-13)  # d3/dx3 x^(1/3)


def test_grad_argnums_and_value_and_grad():
    def f(a, b):
        return (cg.cbrt(a) * b).sum()

    a, b = np.array([8.0, 27.0]), np.array([2.0, 3.0])
    ga, gb = cg.grad(f, argnums=(0, 1))(a, b)
    roots = np.array([2.0, 3.0])  # cbrt(a), exactly
    np.testing.assert_allclose(ga, b / (3 * roots**2))
    np.testing.assert_array_equal(gb, roots)
    value, g = cg.value_and_grad(f, argnums=1)(a, b)
    assert value == pytest.approx(13.0) and type(g) is np.ndarray


def test_grad_of_constant_function_is_zero():
    assert cg.grad(lambda x: cg.Tensor(np.array(3.0)))(1.0) == 0.0


def test_grad_errors():
    with pytest.raises(TypeError, match="argnums"):
        cg.grad(cg.cbrt, argnums="0")
    with pytest.raises(ValueError, match="argnums 2 is out of range"):
        cg.grad(cg.cbrt, argnums=2)(8.0)
    with pytest.raises(ValueError, match="scalar output"):
        cg.grad(cg.cbrt)(np.array([8.0, 1.0]))
    with pytest.raises(TypeError, match="must return a Tensor"):
        cg.grad(lambda x: 1.0)(8.0)
    with pytest.raises(TypeError, match="float arguments"):
        cg.grad(cg.cbrt)(8)


def test_gradcheck_catches_a_wrong_gradient():
    from cbrtgrad.engine import cube_root, recording

    class WrongCube(cube_root.CubeRootBackward):
        __slots__ = ()

        def vjp(self, g):
            return (g / (2.9 * self.result**2),)

    def f(x):
        return recording.apply(WrongCube, (x,), cg.backends.get_backend("numpy"))

    with pytest.raises(cg.GradcheckError, match="analytic"):
        cg.gradcheck(f, (np.array([8.0, 2.0]),))
    assert cg.gradcheck(f, (np.array([8.0]),), raise_exception=False) is False


def test_gradcheck_argument_errors():
    with pytest.raises(TypeError, match="float64"):
        cg.gradcheck(cg.cbrt, (np.array([8.0], dtype=np.float32),))
    with pytest.raises(ValueError, match="eps"):
        cg.gradcheck(cg.cbrt, (np.array([8.0]),), eps=0.0)
    with pytest.raises(ValueError, match="atol"):
        cg.gradcheck(cg.cbrt, (np.array([8.0]),), atol=-1.0)
    with pytest.raises(TypeError, match="not a Tensor"):
        cg.gradcheck(lambda x: 1.0, (np.array([8.0]),))
    with pytest.raises(ValueError, match="grad_outputs"):
        cg.gradgradcheck(cg.cbrt, (np.array([8.0]),), grad_outputs=(np.ones(1), np.ones(1)))


def test_tensor_construction_errors():
    with pytest.raises(TypeError, match="data has dtype complex128"):
        cg.Tensor(np.array([1j]))
    with pytest.raises(TypeError, match="data has dtype"):
        cg.Tensor(["a"])
    with pytest.raises(TypeError, match="requires_grad must be a bool"):
        cg.Tensor(np.ones(2), requires_grad=1)
    with pytest.raises(TypeError, match="only floating-point tensors can require grad"):
        cg.Tensor(np.array([1, 2]), requires_grad=True)
    y = cg.cbrt(cg.Tensor(np.ones(2), requires_grad=True))
    with pytest.raises(RuntimeError, match="only be changed on a leaf"):
        y.requires_grad = False


def test_op_argument_errors():
    t = cg.Tensor(np.ones(2), requires_grad=True)
    with pytest.raises(TypeError, match="exponent of \\*\\* must be a real scalar"):
        t ** np.array([1.0, 2.0])
    with pytest.raises(TypeError, match="only Tensor \\*\\* scalar"):
        2.0**t
    with pytest.raises(TypeError, match="b must be a Tensor, an ndarray or a real scalar"):
        t + "x"
    with pytest.raises(TypeError, match="b has dtype complex128"):
        t * np.array([1j, 1j])
    with pytest.raises(np.exceptions.AxisError):
        t.sum(axis=3)
    with pytest.raises(TypeError, match="dtype= or out="):
        t.sum(dtype=np.float32)
    with pytest.raises(TypeError, match="dtype must be float"):
        cg.cbrt(t, dtype=np.int32)
    with pytest.raises(TypeError, match="x has dtype complex128"):
        cg.cbrt(np.array([1j]))
    with cg.no_grad(), pytest.raises(ValueError, match="in-place result has shape"):
        t += np.ones((3, 2))


def test_tensor_attributes():
    x = cg.Tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    assert x.shape == (2, 3) and x.dtype == np.float64 and x.ndim == 2 and x.size == 6
    d = x.detach()
    assert d.grad_fn is None and not d.requires_grad and np.shares_memory(d.numpy(), x.numpy())
    assert not x.numpy().flags.writeable
    assert repr(cg.Tensor(np.array([1.0]))) == "Tensor([1.])"
    assert isinstance(x.data, np.ndarray) and repr(x.data).startswith("array(")


class _DeviceLike:
    """Any object with ``__cuda_array_interface__`` (a CuPy or numba device array)."""

    __cuda_array_interface__ = {"shape": (1,), "typestr": "<f8", "data": (0, False), "version": 3}

    def __array__(self, dtype=None, copy=None):
        raise AssertionError("the engine copied a device array to the host")


def test_bare_device_arrays_are_viewed_by_cupy_or_refused_never_copied():
    # A Tensor computes on another library's arrays through their array API
    # namespace (tests/engine/test_array_api_tensors.py); an object with only
    # __cuda_array_interface__ (a numba device array) has none, and is viewed
    # by CuPy: never through __array__, which copies to the host.
    try:
        import cupy  # noqa: F401
    except ImportError:
        with pytest.raises(TypeError, match="_DeviceLike .* through CuPy.*pip install cupy"):
            cg.Tensor(_DeviceLike())
        cuda = pytest.importorskip("numba.cuda")  # the simulator here (tests/conftest.py)
        with pytest.raises(TypeError, match="numba device array .* through CuPy"):
            cg.grad(cg.cbrt)(cuda.to_device(np.array([8.0])))
    xp = pytest.importorskip("array_api_strict")
    with pytest.raises(TypeError, match="gradcheck input 0 has dtype float32; expected float64"):
        cg.gradcheck(cg.cbrt, (xp.asarray([8.0], dtype=xp.float32),))
    with pytest.raises(TypeError, match="grad needs float arguments; argument 0 has dtype int64"):
        cg.grad(cg.cbrt)(xp.asarray([8]))


def test_transform_arguments_as_jax_takes_them():
    # A repeated or negative argnums is the same argument: the same gradient each time.
    def f(a, b):
        return (cg.cbrt(a) * b).sum()

    a, b = np.array([8.0]), np.array([2.0])
    ga, ga_again, gb = cg.grad(f, argnums=(0, 0, 1))(a, b)
    np.testing.assert_allclose(ga, [2 / 12])
    np.testing.assert_array_equal(ga, ga_again)
    np.testing.assert_allclose(gb, [2.0])
    np.testing.assert_array_equal(cg.grad(f, argnums=-1)(a, b), gb)
    np.testing.assert_array_equal(cg.grad(f, argnums=(1, -1))(a, b)[1], gb)
    np.testing.assert_array_equal(cg.grad(f, argnums=np.int64(0))(a, b), ga)
    with pytest.raises(TypeError, match="argnums must be an int"):
        cg.grad(f, argnums=[0])
    with pytest.raises(TypeError, match="argnums must be an int"):
        cg.grad(f, argnums=True)
    with pytest.raises(TypeError, match="grad needs a callable function, got int"):
        cg.grad(3)
    with pytest.raises(TypeError, match="grad needs a callable function"):
        cg.value_and_grad("f")
