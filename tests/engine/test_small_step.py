"""The engine's one-element step (issue 33): its hot paths give what the general routes give."""

import numpy as np
import pytest

import cbrtgrad as cg
from cbrtgrad import _config
from cbrtgrad.backends import use_backend
from cbrtgrad.engine import no_grad

FLOATS = (np.float32, np.float64)


def _specials(dtype):
    bits = np.uint32 if dtype == np.float32 else np.uint64
    quiet_payload = np.array([0x7FC00123 if dtype == np.float32 else 0x7FF8000000000123], bits)
    values = np.array([-0.0, 0.0, np.inf, -np.inf, -3.5, 1e-40], dtype)
    return [*values, quiet_payload.view(dtype)[0]]


def _bits(a):
    a = np.asarray(a)
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(1,), (1, 1), ()])
def test_one_element_sum_has_numpy_s_bits(dtype, shape):
    # numpy's reduction adds the element to 0.0: -0.0 sums to 0.0, the hot path must too.
    for value in _specials(dtype):
        a = np.full(shape, value, dtype)
        for keepdims in (False, True):
            total = cg.Tensor(a, requires_grad=True).sum(keepdims=keepdims)
            expected = np.add.reduce(a, axis=None, keepdims=keepdims)
            assert total.dtype == dtype and total.shape == np.shape(expected)
            assert _bits(total.numpy()) == _bits(expected), (value, keepdims)


def test_one_element_sum_quiets_a_signalling_nan_as_numpy_does():
    a = np.array([0x7FF0000000000001], np.uint64).view(np.float64)
    with np.errstate(invalid="ignore"):
        expected = np.add.reduce(a, axis=None)
        total = cg.Tensor(a).sum()
    assert _bits(total.numpy()) == _bits(expected)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(1,), (1, 1), ()])
def test_one_element_step_gives_the_general_route_s_gradient(dtype, shape):
    a = np.full(shape, -27.0, dtype)
    x = cg.Tensor(a, requires_grad=True)
    y = cg.cbrt(x)
    assert y.grad_fn.backend.name == "cpu"
    y.sum().backward()
    expected = cg.cbrt_grad(np.ones(shape, dtype), cg.cbrt(a))
    assert x.grad.dtype == dtype and x.grad.shape == shape
    assert _bits(x.grad).tolist() == _bits(expected).tolist()
    assert x.grad.flags.writeable and x.grad.base is None
    # A second step accumulates (the .grad is no longer None: the general route).
    cg.cbrt(x).sum().backward()
    assert _bits(x.grad).tolist() == _bits(expected + expected).tolist()


def test_a_two_element_sum_still_reduces():
    x = cg.Tensor(np.array([1.0, -0.0]), requires_grad=True)
    total = x.sum()
    assert total.numpy() == 1.0
    total.backward()
    assert x.grad.tolist() == [1.0, 1.0]


def test_small_cbrt_follows_use_backend_and_the_environment(monkeypatch):
    one = np.ones(1)
    with use_backend("numpy"):
        assert cg.cbrt(cg.Tensor(one, requires_grad=True)).grad_fn.backend.name == "numpy"
    monkeypatch.setenv("CBRTGRAD_BACKEND", "numpy")
    _config.settings.cache_clear()
    try:
        assert cg.cbrt(cg.Tensor(one, requires_grad=True)).grad_fn.backend.name == "numpy"
    finally:
        monkeypatch.delenv("CBRTGRAD_BACKEND")
        _config.settings.cache_clear()
    assert cg.cbrt(cg.Tensor(one, requires_grad=True)).grad_fn.backend.name == "cpu"


def test_small_cbrt_records_nothing_without_grad():
    x = cg.Tensor(np.array([8.0]), requires_grad=True)
    with no_grad():
        y = cg.cbrt(x)
    assert y.grad_fn is None and not y.requires_grad and y.numpy().tolist() == [2.0]
    assert cg.cbrt(cg.Tensor(np.array([8.0]))).grad_fn is None


def test_tensor_of_an_owning_float_array_checks_requires_grad():
    a = np.ones(1)
    assert cg.Tensor(a, requires_grad=np.True_).requires_grad is True
    with pytest.raises(TypeError, match="requires_grad must be a bool, got int"):
        cg.Tensor(a, requires_grad=1)
    with pytest.raises(TypeError, match="only floating-point tensors can require grad"):
        cg.Tensor(np.ones(1, np.int64), requires_grad=True)
    t = cg.Tensor(a, requires_grad=True)
    assert t.data.base is not None and t.version == 0 and t.grad is None and t.grad_fn is None
