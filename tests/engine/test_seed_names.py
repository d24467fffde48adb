"""The seed's names on the cube-root node: class data, dispatch and grad_formula."""

from __future__ import annotations

import numpy as np
import pytest

import cbrtgrad
import cbrtgrad as cg
from cbrtgrad.engine.node import Node
from cbrtgrad.engine.schema import AmpPolicy, OpSchema, Saves


def test_saves_flags_are_class_data_from_the_schema():
    assert cg.CubeRootBackward.saves_input is False
    assert cg.CubeRootBackward.saves_output is True
    assert cg.CubeRootBackward.schema.saves is Saves.OUTPUT

    # Derived for every op when it is defined, so they cannot disagree with its schema.
    class SquareBackward(Node):
        schema = OpSchema(name="square", amp_policy=AmpPolicy.PROMOTE, saves=Saves.INPUTS)

        @staticmethod
        def forward(backend, x):  # type: ignore[no-untyped-def]
            return x * x

    assert SquareBackward.saves_input is True and SquareBackward.saves_output is False


def test_dispatch_is_the_forward_on_a_backend():
    x = np.array([27.0, -8.0, 0.5, -0.0])
    for name, backend in (("cpu", "cpu"), ("numpy", cbrtgrad.backends.get_backend("numpy"))):
        got = cg.CubeRootBackward.dispatch(backend, x)  # a name or a backend
        assert np.array_equal(got, cbrtgrad.cbrt(x, backend=name))
    y32 = cg.CubeRootBackward.dispatch("cpu", x, dtype=np.float32)
    assert y32.dtype == np.float32
    with pytest.raises(TypeError, match="stream is only for the cuda backend, not 'cpu'"):
        cg.CubeRootBackward.dispatch("cpu", x, stream=0)


def test_dispatch_with_a_stream_on_the_device():
    cuda = pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
    x = np.linspace(-27.0, 27.0, 50)
    stream = cuda.stream()
    y = cg.CubeRootBackward.dispatch("cuda", cuda.to_device(x), stream=stream)
    stream.synchronize()
    assert np.array_equal(y.copy_to_host(), cbrtgrad.cbrt(x, backend="cpu"))


def test_grad_formula_is_the_gradient_array_from_the_saved_output():
    x = cg.Tensor(np.array([8.0, -27.0, 1e-300]), requires_grad=True)
    y = cg.cbrt(x)
    g = np.array([12.0, 27.0, 1.0])
    got = y.grad_fn.grad_formula(g)
    assert isinstance(got, np.ndarray)
    assert np.array_equal(got, cbrtgrad.cbrt_grad(g, y.numpy()))
