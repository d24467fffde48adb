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


@pytest.mark.parametrize("dtype", FLOATS)
def test_one_element_sum_quiets_a_signalling_nan_as_numpy_does(dtype):
    bits = (0x7F800001, np.uint32) if dtype == np.float32 else (0x7FF0000000000001, np.uint64)
    a = np.array([bits[0]], bits[1]).view(dtype)
    with np.errstate(invalid="ignore"):
        expected = np.add.reduce(a, axis=None)
        total = cg.Tensor(a).sum()
    assert _bits(total.numpy()) == _bits(expected)
    # The hot path leaves a nan to numpy's add: its invalid flag is raised as the reduction's is.
    with pytest.warns(RuntimeWarning, match="invalid value"):
        np.add.reduce(a, axis=None)
    with pytest.warns(RuntimeWarning, match="invalid value"):
        cg.Tensor(a).sum()


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


def test_tensor_methods_are_the_op_functions_with_the_declared_signatures():
    # methods.bind: one call per method, documented as methods.Methods declares it.
    import inspect

    from cbrtgrad.engine.methods import Methods
    from cbrtgrad.engine.op_table import METHODS

    assert set(METHODS) == {"sum", "mean", "reshape", "astype", "backward"}
    for name, function in METHODS.items():
        method = getattr(cg.Tensor, name)
        declared = getattr(Methods, name)
        # A copy of the op function's code, ``self`` first (numpydoc and help()
        # read it as a method), with the declared docstring.
        assert method.__code__.co_code == function.__code__.co_code
        assert method.__doc__ == declared.__doc__ and method.__qualname__ == f"Tensor.{name}"
        assert next(iter(inspect.signature(method).parameters)) == "self"
        got = list(inspect.signature(method).parameters.values())[1:]
        expected = list(inspect.signature(declared).parameters.values())[1:]
        assert [(p.name, p.kind, p.default) for p in got] == [
            (p.name, p.kind, p.default) for p in expected
        ]


def test_bind_refuses_an_op_function_that_takes_other_parameters(monkeypatch):
    from cbrtgrad.engine import methods
    from cbrtgrad.engine.op_table import METHODS

    def wrong(a, axis=None, keepdims=False):
        return a

    class Target(methods.Methods):
        pass

    monkeypatch.setitem(METHODS, "sum", wrong)
    with pytest.raises(TypeError, match=r"op function for Tensor\.sum takes .*expected"):
        methods.bind(Target)


def test_the_methods_forward_to_the_op_table_before_bind():
    # What runs when bind has not replaced them (the declarations' own bodies).
    from cbrtgrad.engine.methods import Methods

    x = cg.Tensor(np.arange(6.0), requires_grad=True)
    assert Methods.reshape(x, 2, 3).shape == (2, 3)
    assert Methods.reshape(x, (3, 2)).shape == (3, 2)
    total = Methods.sum(Methods.mean(x, keepdims=True), axis=0)
    assert total.numpy() == 2.5 and Methods.astype(x, np.float32).dtype == np.float32
    Methods.backward(total)
    assert x.grad.tolist() == [1 / 6] * 6


@pytest.mark.parametrize("shape", [(1,), (2, 3), ()])
def test_the_full_sum_s_node_keeps_what_its_save_keeps(shape):
    # _sum_method sets SumBackward's fields itself (record_node(save=False)).
    from cbrtgrad.engine.recording import apply
    from cbrtgrad.engine.shape_ops import SumBackward

    t = cg.Tensor(np.ones(shape), requires_grad=True)
    fast = t.sum().grad_fn
    general = apply(SumBackward, (t,), axis=None, keepdims=False).grad_fn
    for field in ("in_shape", "kept_shape", "chunks"):
        assert getattr(fast, field) == getattr(general, field), field


def test_a_type_s_function_table_is_called_without_its_hook_for_a_plain_cbrt():
    calls = []

    class Tabled:
        __cbrtgrad_functions__ = {cg.cbrt: lambda x: ("table", x)}

        def __cbrtgrad_function__(self, func, args, kwargs):
            calls.append(kwargs)
            return ("hook", func.__name__)

    class Untabled(Tabled):
        __cbrtgrad_functions__ = {}  # no entry for cbrt: the hook decides

    x = Tabled()
    assert cg.cbrt(x) == ("table", x) and calls == []
    # With a keyword the hook decides, as for every other call.
    assert cg.cbrt(x, backend="cpu") == ("hook", "cbrt")
    assert calls[-1]["backend"] == "cpu"
    assert cg.cbrt(Untabled()) == ("hook", "cbrt") and calls[-1] == {}


def test_a_tensor_s_counter_is_made_once_when_threads_read_it_first():
    # versions.tensor_counter: the counter is made on its first read, under a lock.
    import sys
    import threading

    tensors = [cg.Tensor(np.ones(1)) for _ in range(2000)]
    assert all(t._counter is None for t in tensors)
    seen = [[] for _ in range(4)]
    barrier = threading.Barrier(len(seen))

    def read(into):
        barrier.wait()
        into.extend(t._version for t in tensors)

    threads = [threading.Thread(target=read, args=(s,)) for s in seen]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    for i, t in enumerate(tensors):
        assert all(s[i] is t._version for s in seen)


def test_a_counter_made_late_still_sees_writes_through_data():
    # A leaf's counter is first read by the node saving it, then by the write.
    x = cg.Tensor(np.array([2.0, 3.0]), requires_grad=True)
    assert x._counter is None
    y = x * x
    assert x._counter is not None and x.version == 0
    with no_grad():
        x.data[0] = 5.0
    assert x.version == 1
    with pytest.raises(RuntimeError, match="modified in place"):
        y.sum().backward()


def test_binding_leaves_the_op_functions_as_they_are():
    # The op functions keep their own parameters and docstrings.
    import inspect

    from cbrtgrad.engine import recording, shape_ops
    from cbrtgrad.engine.methods import Methods

    assert shape_ops.sum.__doc__ != Methods.sum.__doc__
    assert recording.cast.__doc__ != Methods.astype.__doc__
    assert next(iter(inspect.signature(shape_ops.sum).parameters)) == "a"
    x = cg.Tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    assert x.sum(axis=0, keepdims=True).shape == (1, 3)
