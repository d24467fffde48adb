"""The backward pass: accumulation, fan-out, deep chains, memory, freed graphs, version checks."""

import gc
import sys
import tracemalloc

import numpy as np
import pytest

import cbrtgrad as cg


def test_gradients_accumulate_across_backward_calls():
    x = cg.Tensor(np.array([8.0]), requires_grad=True)
    cg.cbrt(x).sum().backward()
    cg.cbrt(x).sum().backward()
    np.testing.assert_allclose(x.grad, [2 / 12])
    x.grad = None
    (x * 3.0).sum().backward()
    np.testing.assert_allclose(x.grad, [3.0])


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("shape", [(), (1,), (2, 1)])
def test_grad_keeps_the_leaf_s_shape_and_type_across_backward_calls(shape, dtype):
    # numpy adds 0-d arrays into a scalar: .grad must stay an array (issue 38, item 4).
    x = cg.Tensor(np.full(shape, 8.0, dtype), requires_grad=True)
    for calls in (1, 2, 3):
        (cg.cbrt(x) + x * x).sum().backward()  # x reached twice per backward
        assert type(x.grad) is np.ndarray
        assert x.grad.shape == shape and x.grad.dtype == dtype
        np.testing.assert_allclose(x.grad, np.full(shape, calls * (1 / 12 + 16)), rtol=1e-3)
    x.grad[...] = 0  # an array, written in place as numpy arrays are
    np.testing.assert_array_equal(x.grad, np.zeros(shape))


def test_grad_of_a_0d_leaf_stays_0d_with_create_graph():
    x = cg.Tensor(np.array(8.0), requires_grad=True)
    cg.cbrt(x).backward()
    cg.cbrt(x).backward(create_graph=True)
    assert isinstance(x.grad, cg.Tensor)
    assert type(x.grad.numpy()) is np.ndarray and x.grad.shape == ()
    np.testing.assert_allclose(x.grad.numpy(), 2 / 12)


def test_fan_out_accumulates_per_node():
    # y is used three times; its node must wait for all three contributions.
    x = cg.Tensor(np.array([8.0, -1.0]), requires_grad=True)
    y = cg.cbrt(x)
    loss = (y * y + y + y * 2.0).sum()
    loss.backward()
    yv = np.array([2.0, -1.0])  # the exact roots
    np.testing.assert_allclose(x.grad, (2 * yv + 3) / (3 * yv**2), rtol=1e-14)


def test_a_shared_node_waits_for_branches_of_unequal_length():
    # The walk takes nodes by recording order (sequence_nr), not by counted
    # dependencies: y's node must still see both branches before it runs.
    x = cg.Tensor(np.array([8.0, 27.0]), requires_grad=True)
    y = cg.cbrt(x)
    long = y
    for _ in range(5):
        long = long * 2.0
    assert long.grad_fn.sequence_nr > y.grad_fn.sequence_nr
    (long + y * 3.0).sum().backward()
    np.testing.assert_allclose(x.grad, 35.0 / (3.0 * np.array([2.0, 3.0]) ** 2), rtol=1e-14)


def test_consumers_outside_the_backward_are_not_waited_for():
    x = cg.Tensor(np.array([8.0]), requires_grad=True)
    y = cg.cbrt(x)
    unused = (y * 5.0).sum()  # consumes y's node, but is not differentiated
    y.sum().backward()
    np.testing.assert_allclose(x.grad, [1 / 12])
    assert unused.grad_fn is not None


def test_several_roots_where_one_root_feeds_another():
    from cbrtgrad.engine import graph

    x = cg.Tensor(np.array([8.0]), requires_grad=True)
    a = cg.cbrt(x).sum()
    b = a * 2.0  # b's node consumes a's node, itself a root
    leaves = graph.run_backward([b, a], [np.array(1.0), np.array(1.0)], False)
    np.testing.assert_allclose(leaves[x], [3 / 12])
    with pytest.raises(ValueError):
        graph.run_backward([a, b], [np.array(1.0)], False)


def test_gradient_with_respect_to_an_intermediate_tensor():
    from cbrtgrad.engine import graph

    x = cg.Tensor(np.array([8.0, 27.0]), requires_grad=True)
    y = cg.cbrt(x)
    loss = (y * y).sum() + y.sum()
    (gy,) = graph.grad_of(loss, [y], retain_graph=True)
    yv = np.array([2.0, 3.0])  # the exact roots
    np.testing.assert_allclose(gy, 2 * yv + 1)
    (gx,) = graph.grad_of(loss, [x])
    np.testing.assert_allclose(gx, (2 * yv + 1) / (3 * yv**2), rtol=1e-14)


def test_leaf_used_twice_and_grad_not_aliased():
    x = cg.Tensor(np.array([1.0, 2.0]), requires_grad=True)
    w = cg.Tensor(np.array([3.0, 4.0]), requires_grad=True)
    (x + w).sum().backward()
    np.testing.assert_array_equal(x.grad, [1.0, 1.0])
    x.grad[0] = 5.0  # .grad is an owned, writable array
    np.testing.assert_array_equal(w.grad, [1.0, 1.0])


def test_backward_with_explicit_gradient():
    x = cg.Tensor(np.array([8.0, 27.0]), requires_grad=True)
    cg.cbrt(x).backward(np.array([12.0, 27.0]))
    np.testing.assert_allclose(x.grad, [1.0, 1.0])


def test_deep_chain_has_no_recursion_limit():
    depth = 100_000
    assert depth > sys.getrecursionlimit()
    x = cg.Tensor(np.array([1.0]), requires_grad=True)
    y = x
    for _ in range(depth):
        y = y * 1.0
    y = cg.cbrt(y + 7.0)
    y.sum().backward()
    np.testing.assert_allclose(x.grad, [1 / 12])
    del y
    gc.collect()


def test_no_memory_growth_over_build_and_backward_cycles():
    x = cg.Tensor(np.linspace(1.0, 2.0, 16), requires_grad=True)

    def cycles(n):
        for _ in range(n):
            x.grad = None
            (cg.cbrt(x) * 2.0 + x).sum().backward()

    cycles(200)
    gc.collect()
    tracemalloc.start()
    try:
        # collect() so that the interpreter's own pending garbage is not
        # counted; the graph itself holds no reference cycles.
        cycles(1_000)
        gc.collect()
        before, _ = tracemalloc.get_traced_memory()
        cycles(10_000)
        gc.collect()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert after - before < 4_096, f"memory grew by {after - before} bytes over 10^4 cycles"


def test_saved_values_are_freed_after_backward():
    x = cg.Tensor(np.array([8.0]), requires_grad=True)
    y = cg.cbrt(x)
    node = y.grad_fn
    y.sum().backward()
    assert node.result is None and node.released


def test_second_backward_through_freed_graph_raises():
    x = cg.Tensor(np.array([8.0]), requires_grad=True)
    loss = cg.cbrt(x).sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


def test_retain_graph_allows_a_second_backward():
    x = cg.Tensor(np.array([8.0]), requires_grad=True)
    loss = cg.cbrt(x).sum()
    loss.backward(retain_graph=True)
    loss.backward()
    np.testing.assert_allclose(x.grad, [2 / 12])


def test_non_scalar_backward_without_gradient_raises():
    x = cg.Tensor(np.array([8.0, 1.0]), requires_grad=True)
    with pytest.raises(RuntimeError, match="gradient="):
        cg.cbrt(x).backward()


def test_gradient_of_wrong_shape_or_dtype():
    x = cg.Tensor(np.array([8.0, 1.0]), requires_grad=True)
    y = cg.cbrt(x)
    with pytest.raises(ValueError, match=r"gradient has shape \(3,\); expected \(2,\)"):
        y.backward(np.ones(3))
    with pytest.raises(TypeError, match="gradient must have a float dtype"):
        y.backward(np.ones(2, dtype=np.int64))


def test_backward_on_tensor_without_grad_raises():
    with pytest.raises(RuntimeError, match="does not require grad"):
        cg.cbrt(cg.Tensor(np.array([8.0]))).sum().backward()


def test_version_check_on_saved_output_after_data_write():
    x = cg.Tensor(np.array([8.0, 27.0]), requires_grad=True)
    y = cg.cbrt(x)
    y.data[0] = 100.0
    with pytest.raises(RuntimeError, match=r"CubeRootBackward.*at version 1; expected version 0"):
        y.sum().backward()


def test_version_check_after_in_place_operator():
    x = cg.Tensor(np.array([8.0, 27.0]), requires_grad=True)
    y = cg.cbrt(x)
    y += 1.0
    assert y.version == 1 and type(y.grad_fn).__name__ == "AddBackward"
    with pytest.raises(RuntimeError, match="CubeRootBackward"):
        y.sum().backward()


def test_version_check_after_out_and_ufunc_writes():
    x = cg.Tensor(np.array([8.0, 27.0]), requires_grad=True)
    y = cg.cbrt(x)
    np.multiply(y.data, 2.0, out=y.data)
    assert y.version == 1
    y.data += 1.0
    assert y.version == 2
    with cg.no_grad():
        cg.cbrt(cg.Tensor(np.array([1.0, 1.0])), out=y)
    assert y.version == 3
    with pytest.raises(RuntimeError, match="at version 3; expected version 0"):
        y.sum().backward()


def test_version_check_on_saved_input():
    a = cg.Tensor(np.array([2.0]), requires_grad=True)
    b = cg.Tensor(np.array([3.0]), requires_grad=True)
    out = a * b
    with cg.no_grad():
        b += 1.0
    with pytest.raises(RuntimeError, match="MultiplyBackward"):
        out.sum().backward()


def test_unmodified_reads_do_not_bump_the_version():
    y = cg.cbrt(cg.Tensor(np.array([8.0]), requires_grad=True))
    _ = y.data + 1.0, y.data.copy(), y.numpy(), np.asarray(y)
    c = y.data.copy()
    c[0] = 5.0  # a copy is other memory
    assert y.version == 0


def test_in_place_on_leaf_requiring_grad_raises_but_no_grad_allows_it():
    x = cg.Tensor(np.array([1.0]), requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Tensor that requires grad"):
        x += 1.0
    with cg.no_grad():
        x -= 0.5
    np.testing.assert_array_equal(x.data, [0.5])
    assert x.is_leaf and x.requires_grad


def test_out_and_where_with_grad_raise():
    x = cg.Tensor(np.array([8.0]), requires_grad=True)
    with pytest.raises(RuntimeError, match="not differentiable"):
        cg.cbrt(x, out=cg.Tensor(np.zeros(1)))
    with pytest.raises(RuntimeError, match="not differentiable"):
        cg.cbrt(x, where=np.array([True]))
    with cg.no_grad(), pytest.raises(TypeError, match="out must be a Tensor"):
        cg.cbrt(x, out=np.zeros(1))


def test_grad_of_an_intermediate_and_the_leaf_below_it():
    # The walk goes on below an input's node while other inputs lie further
    # down (it used to stop there and give the leaf zeros).
    from cbrtgrad.engine.graph import grad_of

    x = cg.Tensor(np.array([8.0, 27.0]), requires_grad=True)
    y = cg.cbrt(x)
    z = (y * 2.0).sum()
    want_x = 2.0 / (3.0 * np.array([2.0, 3.0]) ** 2)  # cbrt(8), cbrt(27) exactly
    gy, gx = grad_of(z, [y, x], retain_graph=True)
    np.testing.assert_allclose(gy, [2.0, 2.0])
    np.testing.assert_allclose(gx, want_x, rtol=1e-15)
    gx, gy = grad_of(z, [x, y])
    np.testing.assert_allclose(gx, want_x, rtol=1e-15)
    np.testing.assert_allclose(gy, [2.0, 2.0])
