"""no_grad, detect_anomaly, autocast, double backward, the y = 0 behaviour."""

import dataclasses
import threading

import numpy as np
import pytest

import cbrtgrad as cg
from cbrtgrad.engine import graph

X = np.array([-8.0, -0.5, 0.7, 2.0, 27.0])


def test_no_grad_records_nothing_and_restores():
    x = cg.Tensor(X, requires_grad=True)
    with cg.no_grad():
        y = cg.cbrt(x) * 2.0
    assert y.grad_fn is None and not y.requires_grad
    assert cg.cbrt(x).requires_grad


def test_no_grad_as_decorator_and_per_thread():
    x = cg.Tensor(X, requires_grad=True)

    @cg.no_grad()
    def f():
        return cg.cbrt(x)

    assert f().grad_fn is None
    seen = []
    with cg.no_grad():
        t = threading.Thread(target=lambda: seen.append(cg.cbrt(x).requires_grad))
        t.start()
        t.join()
    assert seen == [True]  # a context variable, not global state


def test_y_zero_gives_ieee_values_outside_anomaly_mode():
    x = cg.Tensor(np.array([0.0, -0.0, 8.0]), requires_grad=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        cg.cbrt(x).backward(np.array([1.0, 1.0, 12.0]))
    np.testing.assert_array_equal(x.grad, [np.inf, np.inf, 1.0])
    x.grad = None
    with np.errstate(divide="ignore", invalid="ignore"):
        cg.cbrt(x).backward(np.array([-1.0, 0.0, 0.0]))
    assert x.grad[0] == -np.inf and np.isnan(x.grad[1]) and x.grad[2] == 0.0


def test_detect_anomaly_names_the_node_and_index():
    x = cg.Tensor(np.array([[8.0, 1.0], [0.0, 2.0]]), requires_grad=True)
    with (
        cg.detect_anomaly(),
        np.errstate(divide="ignore"),
        pytest.raises(FloatingPointError, match=r"CubeRootBackward.*index \(1, 0\)"),
    ):
        cg.cbrt(x).sum().backward()


def test_detect_anomaly_ignores_non_finite_inputs():
    x = cg.Tensor(np.array([np.nan, 8.0]), requires_grad=True)
    with cg.detect_anomaly():
        cg.cbrt(x).sum().backward()
    assert np.isnan(x.grad[0]) and x.grad[1] == pytest.approx(1 / 12)


def test_autocast_force_fp32_from_schema():
    x16 = cg.Tensor(np.array([8.0, 27.0], dtype=np.float16), requires_grad=True)
    y = cg.cbrt(x16)
    # The cube root's half-precision rule holds outside autocast too (one rule with the api).
    assert y.dtype == np.float32
    assert type(y.grad_fn.next_functions[0]).__name__ == "CastBackward"
    assert (x16**2).dtype == np.float16  # outside autocast power keeps the dtype
    with cg.autocast():
        y32 = cg.cbrt(x16)
        s = x16 + x16  # PROMOTE op: untouched
    assert y32.dtype == np.float32 and s.dtype == np.float16
    assert type(y32.grad_fn.next_functions[0]).__name__ == "CastBackward"
    y32.sum().backward()
    assert x16.grad.dtype == np.float16
    np.testing.assert_allclose(x16.grad.astype(np.float64), [1 / 12, 1 / 27], rtol=1e-3)


def test_autocast_policy_is_read_from_schema(monkeypatch):
    from cbrtgrad.engine.cube_root import CubeRootBackward

    x16 = cg.Tensor(np.array([8.0], dtype=np.float16), requires_grad=True)
    # The same schema with the other policy (what it saves, its ufunc kept).
    promote = dataclasses.replace(CubeRootBackward.schema, amp_policy=cg.AmpPolicy.PROMOTE)
    monkeypatch.setattr(CubeRootBackward, "schema", promote)
    with cg.autocast():
        y = cg.cbrt(x16)
        assert y.grad_fn.next_functions[0] is x16  # no cast recorded
    y.sum().backward()
    np.testing.assert_allclose(x16.grad.astype(np.float64), [1 / 12], rtol=1e-3)


def test_double_backward_closed_form():
    x = cg.Tensor(X, requires_grad=True)
    y = cg.cbrt(x)
    (g,) = [graph.grad_of(y.sum(), [x], create_graph=True)[0]]
    assert isinstance(g, cg.Tensor) and g.requires_grad
    np.testing.assert_allclose(g.data, 1 / (3 * np.cbrt(X) ** 2), rtol=1e-14)
    g.sum().backward()
    np.testing.assert_allclose(x.grad, -2 / (9 * np.cbrt(X) ** 5), rtol=1e-13)


def test_backward_create_graph_gives_a_differentiable_grad():
    x = cg.Tensor(X, requires_grad=True)
    cg.cbrt(x).sum().backward(create_graph=True)
    first = x.grad
    assert isinstance(first, cg.Tensor)
    x.grad = None
    first.sum().backward()
    np.testing.assert_allclose(x.grad, -2 / (9 * np.cbrt(X) ** 5), rtol=1e-13)


def test_double_backward_uses_saved_output_not_a_new_cube_root(monkeypatch):
    x = cg.Tensor(X, requires_grad=True)
    y = cg.cbrt(x)
    calls = []
    original = cg.CubeRootBackward.forward
    monkeypatch.setattr(
        cg.CubeRootBackward,
        "forward",
        staticmethod(lambda *a, **k: calls.append(1) or original(*a, **k)),
    )
    graph.grad_of(y.sum(), [x], create_graph=True)[0].sum().backward()
    assert calls == []


def test_gradgradcheck_every_op():
    rng = np.random.default_rng(3)
    a = rng.uniform(0.5, 2.0, 3)
    b = rng.uniform(0.5, 2.0, 3)
    for f in (
        lambda a, b: cg.cbrt(a * b),
        lambda a, b: a / b - a**3,
        lambda a, b: (cg.cbrt(a) * b).mean() + (a - b).sum(),
    ):
        assert cg.gradgradcheck(f, (a, b))
