"""The backward pass: an iterative topological walk over the recorded nodes.

No recursion (a graph 10^5 nodes deep is fine). Nodes are taken from a heap
in decreasing ``sequence_nr`` (recording order, see :class:`Node`): every
consumer of a node was recorded after it, so by the time a node comes off the
heap each of its consumers that the walk reaches has contributed to its
gradient, which is accumulated per node in a dict. No separate pass counts
dependencies first. Saved values are freed as the walk goes unless
``retain_graph``.
"""

from __future__ import annotations

import sys
import threading
from heapq import heapify, heappop, heappush
from typing import Any

import numpy as np

from .._array_kinds import is_dask_array
from . import grad_mode
from . import tensor as _tensor_module
from .node import Node
from .tensor import Tensor

#: Serialises writes of leaves' ``.grad`` (see :func:`backward`).
_ACCUMULATE_LOCK = threading.Lock()
_acquire = _ACCUMULATE_LOCK.acquire
_release = _ACCUMULATE_LOCK.release


def _all_finite(value: Any) -> bool:
    # Only materialised arrays are checked: checking a dask array would compute it.
    array = value._data if isinstance(value, Tensor) else value
    if isinstance(array, (np.ndarray, np.generic)) and array.dtype.kind in "fc":
        return bool(np.isfinite(array).all())
    return True


def _check_anomaly(node: Node, g: Any, grads: tuple[Any, ...]) -> None:
    if not _all_finite(g) or not all(_all_finite(v) for v in node.saved_values()):
        return  # non-finite in, non-finite out: not the node's fault
    for i, gi in enumerate(grads):
        if gi is None or _all_finite(gi):
            continue
        array = np.asarray(gi._data if isinstance(gi, Tensor) else gi)
        index = tuple(int(k) for k in np.argwhere(~np.isfinite(array))[0])
        raise FloatingPointError(
            f"cbrtgrad: {type(node).__name__} returned a non-finite gradient ({array[index]}) "
            f"for input {i} at index {index}, from a finite incoming gradient and finite "
            "saved values (detect_anomaly is on)"
        )


def _add(prev: Any, new: Any) -> Any:
    return new if prev is None else prev + new


#: ``stop`` when no ``inputs=`` are given: empty, and falsy for the loop's check.
_NO_STOP: frozenset[Any] = frozenset()


def run_backward(
    roots: list[Tensor],
    seeds: list[Any],
    retain_graph: bool,
    create_graph: bool,
    inputs: list[Tensor] | None = None,
) -> dict[Any, Any]:
    """Propagate ``seeds`` from ``roots`` to the leaves (or to ``inputs``).

    Returns a dict from each leaf reached (or, with ``inputs``, from each
    input's leaf tensor or node) to its gradient: ndarrays, or Tensors when
    ``create_graph``.
    """
    stop: Any = _NO_STOP
    # Whether the walk must go on below an input's node: when other inputs
    # (a leaf, or a node not yet reached) may lie further down.
    beyond = 0
    if inputs is not None:
        stop = {t.grad_fn for t in inputs if t.grad_fn is not None}
        leaf_inputs = any(t.grad_fn is None for t in inputs)
        beyond = len(stop) + (1 if leaf_inputs else 0)
    grads: dict[Node, Any] = {}
    leaves: dict[Any, Any] = {}
    # A max-heap by sequence_nr (heapq's min-heap on the negated numbers; they
    # are unique, so the nodes themselves are never compared). ``grads`` holds
    # exactly the nodes on the heap.
    heap: list[tuple[int, Node]] = []
    # The node to do next when that is known without the heap (then ``g`` is
    # its gradient): the one root's node, or the next node of a chain.
    node: Node | None = None
    g: Any = None
    if len(roots) == 1:
        # NOTE: hot path: ``backward()`` on one tensor starts at its node.
        (root,) = roots
        (g,) = seeds  # exactly one seed, as zip(strict=True) would insist
        node = root.grad_fn
        if node is None and root._requires_grad:
            leaves[root] = g
    else:
        for root, seed in zip(roots, seeds, strict=True):
            fn = root.grad_fn
            if fn is None:
                if root._requires_grad:
                    leaves[root] = _add(leaves.get(root), seed)
                continue
            if fn in grads:
                grads[fn] = grads[fn] + seed
            else:
                grads[fn] = seed
                heap.append((-fn.sequence_nr, fn))
        heapify(heap)
    anomaly = grad_mode.anomaly_enabled()
    while True:
        # NOTE: hot path: one pass per node, everything it needs read once.
        if node is None:
            if not heap:
                break
            node = heappop(heap)[1]
            g = grads.pop(node)
        if stop and node in stop:
            # Its gradient is complete: every consumer has a higher sequence_nr.
            leaves[node] = g
            beyond -= 1
            if not beyond:
                node = None
                continue
        if node.released:
            raise RuntimeError(
                f"cbrtgrad: trying to backward through the graph a second time: the values "
                f"saved by {type(node).__name__} were freed by the first backward; pass "
                "retain_graph=True to that backward to keep them"
            )
        for version, expected in node._checks:
            if version.value != expected:
                node.check_versions()  # raises, naming the node and the versions
        out = node.grad_graph(g) if create_graph else node.grad_formula(g)
        if anomaly:
            _check_anomaly(node, g, out)
        if not retain_graph:
            node.release()  # this walk will not come back to it
        edges = node.next_functions
        node = None
        if len(edges) == 1 and not heap:
            # NOTE: hot path: a chain. The heap is empty, so no other node holds a
            # gradient: the one input's node, if it is one, is the only node left
            # that can be ready, and it comes next without the heap or the dict.
            edge = edges[0]
            gi = out[0]
            if edge is None or gi is None:
                continue
            if type(edge) is not Tensor:
                node = edge
                g = gi
                continue
            prev = leaves.get(edge)  # a leaf (see ops.apply: exactly Tensor)
            leaves[edge] = gi if prev is None else prev + gi
            continue
        for edge, gi in zip(edges, out):  # noqa: B905 (one gradient per input)
            if edge is None or gi is None:
                continue
            if type(edge) is Tensor:  # a leaf (see ops.apply: exactly Tensor)
                prev = leaves.get(edge)
                leaves[edge] = gi if prev is None else prev + gi
                continue
            prev = grads.get(edge)
            if prev is None:
                grads[edge] = gi
                heappush(heap, (-edge.sequence_nr, edge))
            else:
                grads[edge] = prev + gi
    return leaves


def _seed(root: Tensor, gradient: Any, create_graph: bool) -> Any:
    data = root._data
    if gradient is None:
        if data.size != 1:
            raise RuntimeError(
                f"cbrtgrad: backward() without gradient= needs a tensor of one element; this "
                f"one has shape {data.shape}: pass gradient= (an array of that shape)"
            )
        seed: Any = np.array(1, data.dtype)
        if data.ndim:
            seed = seed.reshape(data.shape)
    else:
        lazy = isinstance(gradient, Tensor) or is_dask_array(gradient)
        seed = gradient if lazy else np.asarray(gradient)
        if seed.dtype.kind != "f":
            raise TypeError(f"cbrtgrad: gradient must have a float dtype, got {seed.dtype}")
        if seed.shape != data.shape:
            raise ValueError(
                f"cbrtgrad: gradient has shape {seed.shape}; expected {data.shape} (the "
                "tensor's shape)"
            )
        if isinstance(seed, Tensor) and not create_graph:
            seed = seed._data
    if create_graph and not isinstance(seed, Tensor):
        seed = Tensor._make(seed, None)
    return seed


def _check_root(root: Any) -> None:
    if not isinstance(root, Tensor):
        raise TypeError(f"cbrtgrad: can only differentiate a Tensor, got {type(root).__name__}")


def backward(root: Tensor, gradient: Any, retain_graph: bool | None, create_graph: bool) -> None:
    """``Tensor.backward``: accumulate into the leaves' ``.grad``."""
    if not root._requires_grad:
        raise RuntimeError(
            "cbrtgrad: backward() on a tensor that does not require grad (no input of its "
            "graph has requires_grad=True, or it was made under no_grad)"
        )
    data = root._data
    if gradient is None and not create_graph and data.size == 1:
        # NOTE: hot path: ``loss.backward()``, _seed's first case inlined.
        seed = np.array(1, data.dtype)
        if data.ndim:
            seed = seed.reshape(data.shape)
    else:
        seed = _seed(root, gradient, create_graph)
    retain = create_graph if retain_graph is None else retain_graph
    if create_graph:
        with grad_mode.enable_grad():
            leaves = run_backward([root], [seed], retain, True)
    else:
        leaves = run_backward([root], [seed], retain, False)
    # ``leaf.grad = leaf.grad + g`` is a read-modify-write: backward calls from
    # several threads into one leaf would lose updates without the lock.
    # NOTE: hot path: the lock's bound methods, not ``with`` (0.09 us less here).
    _acquire()
    try:
        if len(leaves) == 1:
            # NOTE: hot path: one leaf, nothing it could alias but the caller's gradient.
            for leaf, g in leaves.items():
                _accumulate(leaf, g, g is not gradient)
        else:
            assigned: set[int] = set()
            for leaf, g in leaves.items():
                _accumulate(leaf, g, g is not gradient and id(g) not in assigned)
                assigned.add(id(g))
    finally:
        _release()


def _accumulate(leaf: Tensor, g: Any, fresh: bool) -> None:
    data = leaf._data
    if type(g) is np.ndarray and g.shape == data.shape and g.dtype == data.dtype:
        # NOTE: hot path: an ndarray of the leaf's shape and dtype.
        if not fresh or g.base is not None or not g.flags.writeable:
            g = g.copy()  # never hand out an array that aliases another gradient or a view
        prev = leaf.grad
        leaf.grad = g if prev is None else (prev._data if isinstance(prev, Tensor) else prev) + g
        return
    if isinstance(g, Tensor):
        if g.dtype != data.dtype:
            g = g.astype(data.dtype)
        prev = leaf.grad
        leaf.grad = g if prev is None else (prev if isinstance(prev, Tensor) else Tensor(prev)) + g
        return
    if g.shape != data.shape:
        g = np.broadcast_to(g, data.shape)
    if type(g) is not np.ndarray and is_dask_array(g):
        # A dask graph cannot alias anything: no copy, only the cast.
        if g.dtype != data.dtype:
            g = g.astype(data.dtype)
    elif g.dtype != data.dtype:
        g = g.astype(data.dtype)
    elif not fresh or g.base is not None or not g.flags.writeable:
        # Never hand out an array that aliases another gradient or a view.
        g = g.copy()
    prev = leaf.grad
    if prev is None:
        leaf.grad = g
    else:
        leaf.grad = (prev._data if isinstance(prev, Tensor) else prev) + g


def grad_of(
    output: Tensor,
    inputs: list[Tensor],
    grad_output: Any = None,
    *,
    create_graph: bool = False,
    retain_graph: bool | None = None,
) -> list[Any]:
    """Gradients of ``output`` with respect to ``inputs``, without touching ``.grad``.

    Inputs not reached get zeros. With ``create_graph`` the results are
    Tensors with a graph of their own.
    """
    _check_root(output)
    retain = create_graph if retain_graph is None else retain_graph
    result: list[Any] = []
    if not output._requires_grad:
        leaves: dict[Any, Any] = {}
    else:
        seed = _seed(output, grad_output, create_graph)
        if create_graph:
            with grad_mode.enable_grad():
                leaves = run_backward(
                    [output], [seed], retain_graph=retain, create_graph=True, inputs=inputs
                )
        else:
            leaves = run_backward(
                [output], [seed], retain_graph=retain, create_graph=False, inputs=inputs
            )
    for t in inputs:
        key = t.grad_fn if t.grad_fn is not None else t
        g = leaves.get(key)
        if g is None:
            if is_dask_array(t._data):
                import dask.array as da

                zeros = da.zeros_like(t._data)
            else:
                zeros = np.zeros(t.shape, t.dtype)
            g = Tensor._make(zeros, None) if create_graph else zeros
        elif isinstance(g, Tensor):
            if g.dtype != t.dtype:
                g = g.astype(t.dtype)
        elif is_dask_array(g):
            if g.shape != t.shape:
                g = np.broadcast_to(g, t.shape)
            if g.dtype != t.dtype:
                g = g.astype(t.dtype)
        else:
            g = np.asarray(g)
            if g.shape != t.shape:
                g = np.broadcast_to(g, t.shape)
            g = (
                np.array(g, dtype=t.dtype, copy=True)
                if g.base is not None
                else g.astype(t.dtype, copy=False)
            )
        result.append(g)
    return result


# Tensor.backward calls ``backward`` through this binding (no import cycle).
_tensor_module._graph = sys.modules[__name__]
