"""The version check cannot be bypassed, and Python's protocols on Tensor are clear (issue 24).

``Tensor.data`` is read-only for numpy's own writers (a subclass cannot see
them all); the writes it does see bump the version, so backward raises
instead of returning a gradient from modified values.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import cbrtgrad as cg

#: Writes numpy makes without any hook a subclass could see: refused.
UNSEEN_WRITES = {
    "fill": lambda y: y.data.fill(1.0),
    "np.copyto": lambda y: np.copyto(y.data, 5.0),
    "flat": lambda y: y.data.flat.__setitem__(0, 5.0),
    "np.put": lambda y: np.put(y.data, [0], [5.0]),
    "sort": lambda y: y.data.sort(),
    "np.place": lambda y: np.place(y.data, [True, False], [5.0]),
    "np.putmask": lambda y: np.putmask(y.data, [True, False], 5.0),
    "partition": lambda y: y.data.partition(0),
    "slice fill": lambda y: y.data[1:].fill(0.0),
    "reshaped fill": lambda y: y.data.reshape(2, 1).fill(0.0),
    "np.asarray(y, float64)": lambda y: np.asarray(y, dtype=np.float64).fill(5.0),
    "np.asarray(y)": lambda y: np.asarray(y).fill(5.0),
    "y.numpy()": lambda y: y.numpy().fill(5.0),
    "np.array(y, copy=False)": lambda y: np.asarray(y, copy=False).fill(5.0),
}


def _in_place_add(y):
    d = y.data
    d += 1


def _no_grad_in_place(y):
    with cg.no_grad():
        y += 1


def _engine_out(y):
    with cg.no_grad():
        cg.cbrt(cg.Tensor(np.ones(2)), out=y)


#: Writes the view sees: they happen, and backward raises.
SEEN_WRITES = {
    "item": lambda y: y.data.__setitem__(0, 5.0),
    "slice item": lambda y: y.data[1:].__setitem__(0, 5.0),
    "+=": _in_place_add,
    "operator under no_grad": _no_grad_in_place,
    "np.add.at": lambda y: np.add.at(y.data, [0], 1.0),
    "ufunc out=": lambda y: np.add(y.data, 1, out=y.data),
    "reduce out=": lambda y: np.add.reduce(np.ones((2, 2)), axis=0, out=y.data),
    "cbrt(out=tensor)": _engine_out,
    "cbrtgrad.cbrt(out=y.data)": lambda y: cg.cbrt(np.ones(2), out=y.data),
    "np.cbrt(out=y.data)": lambda y: np.cbrt(np.ones(2), out=y.data),
}


def _graph():
    x = cg.Tensor(np.array([8.0, 27.0]), requires_grad=True)
    y = cg.cbrt(x)
    return x, y, (y * 1.0).sum()


@pytest.mark.parametrize("write", UNSEEN_WRITES)
def test_writes_the_view_cannot_see_are_refused(write):
    x, y, loss = _graph()
    with pytest.raises(ValueError, match="read-only"):
        UNSEEN_WRITES[write](y)
    loss.backward()
    np.testing.assert_allclose(x.grad, [1 / 12, 1 / 27])


@pytest.mark.parametrize("write", SEEN_WRITES)
def test_writes_the_view_sees_make_backward_raise(write):
    x, y, loss = _graph()
    before = y.version
    SEEN_WRITES[write](y)
    assert y.version > before
    with pytest.raises(RuntimeError, match="modified in place"):
        loss.backward()


def test_a_leaf_is_still_written_through_its_data():
    t = cg.Tensor(np.zeros(3))
    t.data[...] = 2.0
    t.data[0] += 1.0
    np.testing.assert_array_equal(t.numpy(), [3.0, 2.0, 2.0])
    assert t.version == 2
    assert not t.data.flags.writeable  # but numpy's unseen writers are refused


def test_truth_value_is_numpy_s():
    assert not cg.Tensor(np.array([0.0]))
    assert cg.Tensor(np.array(2.0))
    with pytest.raises(ValueError, match="truth value of a Tensor of 2 elements is ambiguous"):
        bool(cg.Tensor(np.array([1.0, 2.0])))
    with pytest.raises(ValueError, match="ambiguous"):
        bool(cg.Tensor(np.zeros(0)))


def test_comparisons_are_element_wise_and_tensors_stay_hashable():
    a = cg.Tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    b = cg.Tensor(np.array([1.0, 0.0, 3.0]))
    np.testing.assert_array_equal(a == b, [True, False, True])
    np.testing.assert_array_equal(a != 2.0, [True, False, True])
    np.testing.assert_array_equal(a < 2.5, [True, True, False])
    np.testing.assert_array_equal(a >= b, [True, True, True])
    assert type(a == b) is np.ndarray
    assert len({a, b, a}) == 2  # identity hash: the backward keys leaves by it
    (a * b).sum().backward()
    np.testing.assert_array_equal(a.grad, [1.0, 0.0, 3.0])


def test_leaves_pickle_and_copy_with_their_own_data():
    t = cg.Tensor(np.array([8.0, 27.0]), requires_grad=True)
    cg.cbrt(t).sum().backward()
    for clone in (pickle.loads(pickle.dumps(t)), copy.copy(t), copy.deepcopy(t)):
        assert clone.requires_grad and clone.is_leaf
        np.testing.assert_array_equal(clone.numpy(), t.numpy())
        np.testing.assert_array_equal(clone.grad, t.grad)
        assert not np.shares_memory(clone.numpy(), t.numpy())
        clone.data[0] = 1.0
        assert t.numpy()[0] == 8.0


def test_non_leaves_refuse_pickling_and_copying():
    t = cg.Tensor(np.array([8.0]), requires_grad=True)
    y = cg.cbrt(t)
    for action in (pickle.dumps, copy.copy, copy.deepcopy):
        with pytest.raises(RuntimeError, match="only leaf tensors support"):
            action(y)
    detached = pickle.loads(pickle.dumps(y.detach()))
    np.testing.assert_array_equal(detached.numpy(), [2.0])


def test_array_protocol_never_aliases_writably():
    t = cg.Tensor(np.array([1.0, 2.0]))
    assert not np.asarray(t).flags.writeable
    assert not np.asarray(t, dtype=np.float64).flags.writeable
    other = np.asarray(t, dtype=np.float32)
    assert other.flags.writeable and not np.shares_memory(other, t.numpy())
    copied = np.array(t, copy=True)
    assert copied.flags.writeable and not np.shares_memory(copied, t.numpy())
    with pytest.raises(ValueError, match="without a copy"):
        t.__array__(np.float32, copy=False)
