"""No second handle on a saved value's memory escapes its version counter (issue 38, item 3).

Every way to reach the memory of a tensor (``Tensor(...)`` of it, of its
``.data`` or of an array over its memory; the views the engine hands out and
their ``.base`` chains; constants saved by an op) either cannot write it, or
shares the tensor's counter, so a write makes backward raise instead of
giving a gradient from the overwritten value. A masked array, whose mask a
Tensor would drop, is refused.
"""

from __future__ import annotations

import numpy as np
import pytest

import cbrtgrad as cg


def _graph():
    """``x``, the saved output ``y = cbrt(x)`` and a loss whose backward reads it."""
    x = cg.Tensor(np.array([8.0, 27.0]), requires_grad=True)
    y = cg.cbrt(x)
    return x, y, y.sum()


def _rebound_to(value):
    t = cg.Tensor(np.zeros(2))
    t.data = value
    return t


#: Tensors made over the saved output's memory: writable, and sharing its counter.
SHARING = {
    "Tensor(y)": lambda y: cg.Tensor(y),
    "Tensor(y, requires_grad=True)": lambda y: cg.Tensor(y, requires_grad=True),
    "Tensor(y.data)": lambda y: cg.Tensor(y.data),
    "Tensor(y.data[::-1])": lambda y: cg.Tensor(y.data[::-1]),
    "Tensor(y.detach())": lambda y: cg.Tensor(y.detach()),
    "Tensor(Tensor(y))": lambda y: cg.Tensor(cg.Tensor(y)),
    "t.data = y": lambda y: _rebound_to(y),
    "t.data = y.data": lambda y: _rebound_to(y.data),
}

#: Tensors made from read-only arrays over the saved output's memory.
READ_ONLY = {
    "Tensor(np.asarray(y))": lambda y: cg.Tensor(np.asarray(y)),
    "Tensor(y.numpy())": lambda y: cg.Tensor(y.numpy()),
    "Tensor(np.asarray(y.data))": lambda y: cg.Tensor(np.asarray(y.data)),
    "Tensor(y.data.base)": lambda y: cg.Tensor(y.data.base),
    "Tensor(y.data.view(np.ndarray))": lambda y: cg.Tensor(y.data.view(np.ndarray)),
    "Tensor(y.grad_fn.result)": lambda y: cg.Tensor(y.grad_fn.result),
    "t.data = y.numpy()": lambda y: _rebound_to(y.numpy()),
}


def _item(z):
    z.data[0] = 5.0


def _in_place(z):
    with cg.no_grad():
        z += 1.0


def _cbrt_out(z):
    with cg.no_grad():
        cg.cbrt(cg.Tensor(np.array([125.0, 1.0])), out=z)


def _ufunc_out(z):
    np.multiply(z.data, 2.0, out=z.data)


#: The writes a tensor takes (counted ones: they bump its counter).
WRITES = {"item": _item, "in place": _in_place, "cbrt(out=)": _cbrt_out, "ufunc out=": _ufunc_out}


@pytest.mark.parametrize("write", WRITES)
@pytest.mark.parametrize("make", SHARING)
def test_a_tensor_over_a_saved_output_shares_its_counter(make, write):
    x, y, loss = _graph()
    z = SHARING[make](y)
    assert np.shares_memory(z.numpy(), y.numpy())
    with cg.no_grad():
        WRITES[write](z)
    assert not np.array_equal(y.numpy(), [2.0, 3.0])  # the write reached the saved buffer
    with pytest.raises(RuntimeError, match="modified in place"):
        loss.backward()


@pytest.mark.parametrize("write", WRITES)
@pytest.mark.parametrize("make", READ_ONLY)
def test_a_tensor_over_a_read_only_alias_cannot_write_the_saved_output(make, write):
    x, y, loss = _graph()
    z = READ_ONLY[make](y)
    assert np.shares_memory(z.numpy(), y.numpy())
    with pytest.raises(ValueError, match="read-only"):
        WRITES[write](z)
    np.testing.assert_array_equal(y.numpy(), [2.0, 3.0])
    loss.backward()
    np.testing.assert_allclose(x.grad, [1 / 12, 1 / 27], rtol=1e-15)


@pytest.mark.parametrize("make", READ_ONLY)
def test_a_tensor_over_a_read_only_alias_still_shares_the_counter(make):
    # The saved values of z's own graph are y's memory: a write through y is seen there.
    x, y, _ = _graph()
    w = cg.Tensor(np.array([1.0, 1.0]), requires_grad=True)
    product = (w * READ_ONLY[make](y)).sum()  # multiply saves its inputs: z among them
    y.data[0] = 5.0
    with pytest.raises(RuntimeError, match="modified in place"):
        product.backward()


def test_the_issue_s_reproducer():
    x = cg.Tensor(np.array([8.0, 27.0]), requires_grad=True)
    y = cg.cbrt(x)
    loss = y.sum()
    z = cg.Tensor(y)
    z.data[0] = 5
    with pytest.raises(RuntimeError, match="modified in place"):
        loss.backward()


#: Every host array the engine hands out over the memory of a saved output ``y``.
HANDED_OUT = {
    "y.data": lambda y: y.data,
    "y.data[1:]": lambda y: y.data[1:],
    "y.data.T": lambda y: y.data.T,
    "y.data.reshape(2, 1)": lambda y: y.data.reshape(2, 1),
    "y.numpy()": lambda y: y.numpy(),
    "np.asarray(y)": lambda y: np.asarray(y),
    "np.asarray(y, copy=False)": lambda y: np.asarray(y, copy=False),
    "np.asarray(y.data)": lambda y: np.asarray(y.data),
    "y.data.view(np.ndarray)": lambda y: y.data.view(np.ndarray),
    "y.grad_fn.result": lambda y: y.grad_fn.result,
}


@pytest.mark.parametrize("name", HANDED_OUT)
def test_no_base_chain_reaches_a_writable_array(name):
    # Not the array, nor its .base, nor any base above it: writable, or able to become so.
    x, y, loss = _graph()
    array = HANDED_OUT[name](y)
    assert np.shares_memory(array, y.numpy())
    chain = 0
    while isinstance(array, np.ndarray):
        assert not array.flags.writeable
        with pytest.raises(ValueError, match="WRITEABLE"):
            array.flags.writeable = True
        array = array.base
        chain += 1
    assert chain >= 1
    loss.backward()
    np.testing.assert_allclose(x.grad, [1 / 12, 1 / 27], rtol=1e-15)


def _bfloat16():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    return ml_dtypes.bfloat16


LAYOUTS = {
    "float64": lambda: np.array([8.0, 27.0]),
    "float32 0-d": lambda: np.array(8.0, np.float32),
    "float16 byte-swapped": lambda: np.array([8.0, 27.0], ">f2"),
    "bfloat16": lambda: np.array([8.0, 27.0], _bfloat16()),
    "int32 strided": lambda: np.arange(12, dtype=np.int32).reshape(3, 4)[::2, ::-3],
    "empty": lambda: np.zeros((0, 3)),
    "Fortran": lambda: np.asfortranarray(np.arange(6.0).reshape(2, 3)),
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_views_handed_out_keep_the_data_s_dtype_shape_and_memory(layout):
    data = LAYOUTS[layout]()
    t = cg.Tensor(data)
    for view in (t.data, t.numpy(), np.asarray(t)):
        assert view.dtype == data.dtype and view.shape == data.shape
        if data.size:
            assert view.strides == data.strides and np.shares_memory(view, data)
        np.testing.assert_array_equal(view, data)
    if data.size:
        t.data[(0,) * data.ndim] = 1  # counted, written into the tensor's memory
        assert data[(0,) * data.ndim] == 1 and t.version == 1


def test_a_tensor_of_a_read_only_array_stays_read_only():
    frozen = np.array([8.0, 27.0])
    frozen.flags.writeable = False
    t = cg.Tensor(frozen)
    with pytest.raises(ValueError, match="read-only"):
        t.data[0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        np.add(t.data, 1.0, out=t.data)
    assert t.version == 0
    np.testing.assert_array_equal(frozen, [8.0, 27.0])


def test_constants_over_a_tensor_s_memory_are_checked_when_saved():
    for constant in (lambda y: y.data, lambda y: y.numpy(), lambda y: np.asarray(y.data[::-1])):
        x, y, _ = _graph()
        w = cg.Tensor(np.array([1.0, 2.0]), requires_grad=True)
        product = (w * constant(y)).sum()
        y.data[1] = 0.0
        with pytest.raises(RuntimeError, match="modified in place"):
            product.backward()


def test_a_constant_of_its_own_memory_is_not_checked():
    # The documented limit: writes through a plain array of the user's own are not seen.
    w = cg.Tensor(np.array([1.0, 2.0]), requires_grad=True)
    c = np.array([3.0, 4.0])
    product = (w * c[::-1]).sum()
    product.backward()
    np.testing.assert_array_equal(w.grad, [4.0, 3.0])


def test_a_view_set_back_is_not_a_rebinding_but_a_reordered_one_is():
    t = cg.Tensor(np.array([1.0, 2.0, 3.0]))
    d = t.data
    d += 1.0  # t.data = d: the same view, written in place
    assert t.version == 1
    np.testing.assert_array_equal(t.numpy(), [2.0, 3.0, 4.0])
    t.data = t.data[::-1]
    np.testing.assert_array_equal(t.numpy(), [4.0, 3.0, 2.0])
    assert t.version == 2


MASKED = np.ma.array([8.0, 27.0], mask=[False, True])


def _masked_operand():
    return cg.Tensor(np.ones(2), requires_grad=True) * MASKED


def _masked_seed():
    cg.cbrt(cg.Tensor(np.ones(2), requires_grad=True)).backward(gradient=MASKED)


def _masked_data():
    cg.Tensor(np.ones(2)).data = MASKED


#: Every way an array enters the engine, and the name its error gives.
ENTRIES = {
    "Tensor(masked)": (lambda: cg.Tensor(MASKED), "data"),
    "Tensor(unmasked masked array)": (lambda: cg.Tensor(np.ma.array([1.0, 2.0])), "data"),
    "t.data = masked": (_masked_data, "data"),
    "tensor * masked": (_masked_operand, "b"),
    "np.multiply(tensor, masked)": (lambda: np.multiply(cg.Tensor(np.ones(2)), MASKED), "b"),
    "cbrt_grad(tensor, masked)": (lambda: cg.cbrt_grad(cg.Tensor(np.ones(2)), MASKED), "y"),
    "backward(gradient=masked)": (_masked_seed, "gradient"),
    "grad(f)(masked)": (lambda: cg.grad(lambda t: cg.cbrt(t).sum())(MASKED), "argument 0"),
}


@pytest.mark.parametrize("entry", ENTRIES)
def test_masked_arrays_are_refused_naming_the_argument(entry):
    call, name = ENTRIES[entry]
    with pytest.raises(TypeError, match=f"{name} is a masked array"):
        call()


def test_the_api_still_takes_masked_arrays_with_their_mask():
    # The refusal is the engine's (a Tensor has no mask); the api keeps numpy's semantics.
    y = cg.cbrt(MASKED)
    assert isinstance(y, np.ma.MaskedArray)
    np.testing.assert_array_equal(y.mask, [False, True])
