"""docs/architecture.md's recipe for adding an op, run as written."""

import numpy as np
import pytest

import cbrtgrad as cg
from cbrtgrad.engine.node import Node
from cbrtgrad.engine.op_table import UFUNC_OPS, routes
from cbrtgrad.engine.ops import _operand
from cbrtgrad.engine.recording import apply
from cbrtgrad.engine.schema import OpSchema, Saves


@pytest.fixture
def square_op():
    class SquareBackward(Node):
        __slots__ = ()
        schema = OpSchema(name="square", saves=Saves.INPUTS, ufunc=np.square)

        @staticmethod
        def forward(backend, a):
            return np.square(a)

        def vjp(self, g):
            (a,) = self.saved_for(g)
            return (g * (a * 2.0),)

    @routes(np.square)
    def square(a):
        return apply(SquareBackward, (_operand(a, "a"),))

    try:
        yield SquareBackward
    finally:
        del UFUNC_OPS[np.square]  # the table is global: leave it as it was


def test_the_recipe_adds_a_differentiable_op(square_op):
    x = cg.Tensor(np.array([-2.0, 0.5, 3.0]), requires_grad=True)
    y = np.square(x)
    assert type(y.grad_fn) is square_op
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, [-4.0, 1.0, 6.0])
    assert cg.gradcheck(lambda t: np.square(cg.cbrt(t)), (np.array([-8.0, 0.5, 3.0]),))
    assert cg.gradgradcheck(lambda t: np.square(t), (np.array([-8.0, 0.5, 3.0]),))


def test_without_the_recipe_the_ufunc_is_refused():
    with pytest.raises(TypeError):
        np.square(cg.Tensor(np.array([1.0])))
