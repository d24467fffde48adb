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

import threading
from heapq import heappop, heappush
from typing import Any

import numpy as np

from ..arrays.kinds import is_dask_array
from . import grad_mode
from .array_api import StandardArray, is_standard_array, raw, wrap
from .data import refuse_masked
from .node import Node
from .op_table import routes
from .recording import edge_of
from .tensor import Tensor

#: Serialises writes of leaves' ``.grad`` (see :func:`backward`).
_ACCUMULATE_LOCK = threading.Lock()
_acquire = _ACCUMULATE_LOCK.acquire
_release = _ACCUMULATE_LOCK.release
_anomaly_enabled = grad_mode.anomaly_enabled


def _all_finite(value: Any) -> bool:
    # Only materialised arrays are checked: checking a dask array would compute it.
    array = value._data if isinstance(value, Tensor) else value
    if isinstance(array, (np.ndarray, np.generic)) and array.dtype.kind in "fc":
        return bool(np.isfinite(array).all())
    if type(array) is StandardArray:
        return array.all_finite()  # one flag copied (anomaly mode only)
    return True


def _check_anomaly(node: Node, g: Any, grads: tuple[Any, ...]) -> None:
    if not _all_finite(g) or not all(_all_finite(v) for v in node.saved_values()):
        return  # non-finite in, non-finite out: not the node's fault
    for i, gi in enumerate(grads):
        if gi is None or _all_finite(gi):
            continue
        array = gi._data if isinstance(gi, Tensor) else gi
        array = array.to_host() if type(array) is StandardArray else np.asarray(array)
        index = tuple(int(k) for k in np.argwhere(~np.isfinite(array))[0])
        raise FloatingPointError(
            f"cbrtgrad: {type(node).__name__} returned a non-finite gradient ({array[index]}) "
            f"for input {i} at index {index}, from a finite incoming gradient and finite "
            "saved values (detect_anomaly is on)"
        )


#: ``stop`` when no ``inputs=`` are given: empty, and falsy for the loop's check.
_NO_STOP: frozenset[Any] = frozenset()
#: The walk's heap and node gradients until a node has several inputs (see propagate).
_NO_HEAP: Any = ()
_NO_GRADS: Any = None


def _send(
    edges: tuple[Any, ...], grads_in: Any, leaves: dict[Any, Any], grads: dict[Node, Any], heap: Any
) -> None:
    """Add each gradient to its edge's: a leaf's total, or a node's (pushed when first seen)."""
    for edge, gi in zip(edges, grads_in):  # noqa: B905 (one gradient per input)
        if edge is None or gi is None:
            continue
        if type(edge) is Tensor:  # a leaf (see recording.edge_of: exactly Tensor)
            prev = leaves.get(edge)
            leaves[edge] = gi if prev is None else prev + gi
            continue
        prev = grads.get(edge)
        if prev is None:
            grads[edge] = gi
            heappush(heap, (-edge.sequence_nr, edge))
        else:
            grads[edge] = prev + gi


def run_backward(
    roots: list[Tensor], seeds: list[Any], retain_graph: bool, inputs: list[Tensor] | None = None
) -> dict[Any, Any]:
    """Propagate ``seeds`` from ``roots`` to the leaves (or to ``inputs``).

    Each node's ``vjp`` gets ndarrays, or Tensors when the seeds are Tensors
    (``create_graph``). Returns a dict from each leaf reached (or, with
    ``inputs``, from each input's leaf tensor or node) to its gradient.
    """
    stop: Any = _NO_STOP
    # Whether the walk must go on below an input's node: when other inputs
    # (a leaf, or a node not yet reached) may lie further down.
    beyond = 0
    if inputs is not None:
        stop = {t.grad_fn for t in inputs if t.grad_fn is not None}
        beyond = len(stop) + any(t.grad_fn is None for t in inputs)
    if len(roots) == 1 == len(seeds) and roots[0].grad_fn is not None:
        return propagate(roots[0].grad_fn, seeds[0], retain_graph, stop, beyond)
    if len(roots) != len(seeds):
        raise ValueError(f"cbrtgrad: {len(roots)} roots need as many seeds, got {len(seeds)}")
    leaves: dict[Any, Any] = {}
    grads: dict[Node, Any] = {}
    heap: list[tuple[int, Node]] = []
    _send(tuple([edge_of(root) for root in roots]), seeds, leaves, grads, heap)
    return propagate(None, None, retain_graph, stop, beyond, (leaves, grads, heap))


def propagate(
    node: Node | None,
    g: Any,
    retain_graph: bool,
    stop: Any = _NO_STOP,
    beyond: int = 0,
    sent: tuple[dict[Any, Any], dict[Node, Any], list[tuple[int, Node]]] | None = None,
) -> dict[Any, Any]:
    """:func:`run_backward`'s walk, from ``node`` with gradient ``g`` (``Tensor.backward``'s start).

    ``sent`` is ``(leaves, grads, heap)`` as :func:`run_backward` filled them
    from several roots (``node`` is then None); ``stop`` and ``beyond`` are
    its ``inputs``' nodes and how many to reach.
    """
    # ``grads`` holds exactly the nodes on the heap: a max-heap by sequence_nr
    # (heapq's min-heap on the negated numbers; they are unique, so the nodes
    # themselves are never compared). ``node``, when not None, is the next
    # one, known without the heap (``g`` its gradient).
    leaves: dict[Any, Any]
    grads: dict[Node, Any]
    heap: list[tuple[int, Node]]
    if sent is None:
        # NOTE: hot path: a chain needs no heap nor node gradients; they are
        # made when a node first has two inputs (the shared empty tuple is
        # falsy as the empty heap is, and nothing is added to it).
        leaves, grads, heap = {}, _NO_GRADS, _NO_HEAP
    else:
        leaves, grads, heap = sent
    anomaly = _anomaly_enabled()
    while node is not None or heap:
        # NOTE: hot path: one pass per node, everything it needs read once.
        if node is None:
            node = heappop(heap)[1]
            g = grads.pop(node)
        if stop and node in stop:
            # Its gradient is complete: every consumer has a higher sequence_nr.
            leaves[node] = g
            beyond -= 1
            if not beyond:
                node = None
                continue
        checks = node._checks
        if checks:  # NOTE: hot path: no loop for a node that saved no tensor
            for version, expected in checks:
                if version.value != expected:
                    node.check_versions()  # raises, naming the node and the versions
        elif checks is None:  # Node.released
            raise RuntimeError(
                f"cbrtgrad: trying to backward through the graph a second time: the values "
                f"saved by {type(node).__name__} were freed by the first backward; pass "
                "retain_graph=True to that backward to keep them"
            )
        out = node.vjp(g)
        if anomaly:
            _check_anomaly(node, g, out)
        if not retain_graph:
            # This walk will not come back to it: Node.release, inlined (hot path).
            node.saved = ()
            node._checks = None
        edges = node.next_functions
        if len(edges) == 1 and not heap:
            # NOTE: hot path: a chain. With the heap empty no other node holds a
            # gradient, so a lone input's node is the next one, without heap or
            # dict, and a lone leaf the last.
            node = edges[0]
            g = out[0]
            if g is None:
                node = None
            elif type(node) is Tensor:  # a leaf (see recording.edge_of: exactly Tensor)
                prev = leaves.get(node)
                leaves[node] = g if prev is None else prev + g
                node = None
            continue
        node = None
        if heap is _NO_HEAP:
            grads, heap = {}, []
        _send(edges, out, leaves, grads, heap)
    return leaves


def _seed(root: Tensor, gradient: Any, create_graph: bool) -> Any:
    """The gradient to start from: ``gradient`` checked, or 1 for one element."""
    data = root._data
    if gradient is None:
        if data.size != 1:
            raise RuntimeError(
                f"cbrtgrad: backward() without gradient= needs a tensor of one element; this "
                f"one has shape {data.shape}: pass gradient= (an array of that shape)"
            )
        if type(data) is StandardArray:
            seed: Any = data.full_like(1.0)
        else:
            seed = np.array(1.0, data.dtype)  # NOTE: cheaper than np.ones
            if data.ndim:
                seed = seed.reshape(data.shape)
    else:
        refuse_masked(gradient, "gradient")
        lazy = isinstance(gradient, Tensor) or is_dask_array(gradient)
        seed = gradient if lazy else wrap(gradient)
        if type(seed) is not StandardArray and not lazy:
            seed = np.asarray(seed)
        seed_data = seed._data if isinstance(seed, Tensor) else seed
        if (type(seed_data) is StandardArray) != (type(data) is StandardArray):
            sides = ("the tensor", "gradient")
            other, numpy = sides if type(data) is StandardArray else sides[::-1]
            library = (data if type(data) is StandardArray else seed_data).library
            raise TypeError(
                f"cbrtgrad: {other} is a {library} array and {numpy} a numpy array: pass a "
                "gradient of the tensor's library"
            )
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


def _walk(
    root: Tensor, seed: Any, retain: bool, create_graph: bool, inputs: list[Tensor] | None
) -> dict[Any, Any]:
    if create_graph:  # the backward is recorded, also inside no_grad
        with grad_mode.enable_grad():
            return run_backward([root], [seed], retain, inputs)
    return run_backward([root], [seed], retain, inputs)


def _as_grad(g: Any, t: Tensor, fresh: bool) -> Any:
    """``g`` as the gradient of ``t``: its shape and dtype, aliasing nothing unless ``fresh``."""
    data = t._data
    if isinstance(g, Tensor):
        return g if g.dtype == data.dtype else g.astype(data.dtype)
    if type(g) is StandardArray:
        if g.shape != data.shape:
            return g.broadcast_to(data.shape).astype(data.dtype, copy=False).raw
        if g.dtype != data.dtype:
            return g.astype(data.dtype).raw
        # The library's array for .grad; a copy unless fresh (it may be the
        # user's gradient, or shared with another leaf).
        return (g if fresh else g.copy()).raw
    lazy = type(g) is not np.ndarray and is_dask_array(g)
    if not lazy:
        g = np.asarray(g)
    if g.shape != data.shape:
        g = np.broadcast_to(g, data.shape)
    if g.dtype != data.dtype:
        return g.astype(data.dtype)
    if not lazy and (not fresh or g.base is not None or not g.flags.writeable):
        # Never hand out an array that aliases another gradient or a view (a
        # dask graph cannot alias anything).
        return g.copy()
    return g


@routes(method="backward")
def backward(
    root: Tensor,
    gradient: Any = None,
    *,
    retain_graph: bool | None = None,
    create_graph: bool = False,
) -> None:
    """``Tensor.backward``: accumulate into the leaves' ``.grad`` (docstring: methods.Methods)."""
    if not root._requires_grad:
        raise RuntimeError(
            "cbrtgrad: backward() on a tensor that does not require grad (no input of its "
            "graph has requires_grad=True, or it was made under no_grad)"
        )
    data = root._data
    if gradient is None and not create_graph and type(data) is np.ndarray and data.size == 1:
        # NOTE: hot path: _seed's plain one-element case (1.0: a float
        # converts for less than an int).
        seed = np.array(1.0, data.dtype)
        if data.ndim:
            seed = seed.reshape(data.shape)
    else:
        seed = _seed(root, gradient, create_graph)
    retain = create_graph if retain_graph is None else retain_graph
    if create_graph:
        leaves = _walk(root, seed, retain, create_graph, None)
    elif root.grad_fn is not None:
        leaves = propagate(root.grad_fn, seed, retain)  # NOTE: hot path: _walk's plain case
    else:
        leaves = run_backward([root], [seed], retain)
    # ``leaf.grad = leaf.grad + g`` is a read-modify-write: backward calls from
    # several threads into one leaf would lose updates without the lock.
    # NOTE: hot path: the lock's bound methods, not ``with`` (docs/engine.md).
    _acquire()
    try:
        if len(leaves) == 1 and gradient is None:
            # NOTE: hot path: one leaf, no .grad yet, and a gradient the walk
            # made itself, of the leaf's shape and dtype and aliasing nothing
            # (what _as_grad keeps as it is): stored without a call. (The
            # dtypes compared by identity: an equal dtype that is another
            # object takes the general route.)
            [(leaf, g)] = leaves.items()
            data = leaf._data
            if (
                leaf.grad is None
                and type(g) is np.ndarray
                and g.base is None
                and g.dtype is data.dtype
                and g.shape == data.shape
                and g.flags.writeable
            ):
                leaf.grad = g
                return
        assigned: set[int] = set()
        for leaf, g in leaves.items():
            g = _as_grad(g, leaf, raw(g) is not raw(gradient) and id(g) not in assigned)
            assigned.add(id(g))
            prev = leaf.grad
            if prev is None:
                leaf.grad = g
            elif isinstance(g, Tensor):
                leaf.grad = (prev if isinstance(prev, Tensor) else Tensor(prev)) + g
            elif is_standard_array(g):  # the library's arrays, added by the library
                before = raw(prev._data if isinstance(prev, Tensor) else prev)
                leaf.grad = raw(wrap(before) + wrap(g))
            else:
                total = (prev._data if isinstance(prev, Tensor) else prev) + g
                # numpy adds 0-d arrays into a scalar: .grad stays an array of the leaf's shape.
                leaf.grad = np.asarray(total) if isinstance(total, np.generic) else total
    finally:
        _release()


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
    if not isinstance(output, Tensor):
        raise TypeError(f"cbrtgrad: can only differentiate a Tensor, got {type(output).__name__}")
    leaves: dict[Any, Any] = {}
    if output._requires_grad:
        seed = _seed(output, grad_output, create_graph)
        retain = create_graph if retain_graph is None else retain_graph
        leaves = _walk(output, seed, retain, create_graph, inputs)
    result: list[Any] = []
    for t in inputs:
        g = leaves.get(t if t.grad_fn is None else t.grad_fn)
        if g is not None:
            result.append(_as_grad(g, t, raw(g) is not raw(grad_output)))
            continue
        if is_dask_array(t._data):
            import dask.array as da

            zeros = da.zeros_like(t._data)
        elif type(t._data) is StandardArray:
            zeros = t._data.full_like(0.0)
            zeros = zeros if create_graph else zeros.raw
        else:
            zeros = np.zeros(t.shape, t.dtype)
        result.append(Tensor._make(zeros, None) if create_graph else zeros)
    return result
