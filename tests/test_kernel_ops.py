"""The kernel-op table is the one description of each op: every layer has what it says.

``cbrtgrad/kernels/kernel_ops.py`` describes each kernel op once; the layers
that derive from it (ufuncs, parallel loops, warm, the engine's schemas) read
it, and those that must implement it by hand (backends, api, bridges, the
per-target kernel tables) are checked here against it, so that an entry
added or changed without its kernels fails with what is missing.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect

import numpy as np
import pytest

import cbrtgrad
from cbrtgrad.backends import _catalog
from cbrtgrad.backends._protocol import Backend
from cbrtgrad.backends.dask_blocks import DaskBlocks
from cbrtgrad.engine.node import Node
from cbrtgrad.engine.schema import AmpPolicy, OpSchema, Saves, schema_of
from cbrtgrad.kernels.kernel_ops import (
    BY_KERNEL,
    DTYPES,
    ELEMENTARY,
    KERNEL_OPS,
    KernelOp,
    elementary_op,
)

OPS = list(KERNEL_OPS.values())


def _backend_classes() -> list[type]:
    classes = []
    for spec in _catalog._BACKENDS.values():
        module, _, name = spec.partition(":")
        classes.append(getattr(importlib.import_module(module), name))
    return [*classes, DaskBlocks]


def _positional(function: object) -> list[str]:
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    names = [p.name for p in inspect.signature(function).parameters.values() if p.kind in kinds]  # type: ignore[arg-type]
    return [n for n in names if n != "self"]


def test_entries_are_consistent() -> None:
    names = [op.name for op in OPS]
    assert len(set(names)) == len(names) == len(KERNEL_OPS)
    assert len({op.kernel for op in OPS}) == len(OPS)
    for op in OPS:
        assert isinstance(op, KernelOp) and op.name.isidentifier()
        assert len(op.inputs) == op.arity >= 1 and op.outputs
        assert op.parallel_loops, f"{op.name} has no parallel loop"
        # The engine's enums take the values, so schema_of cannot fail later.
        assert AmpPolicy(op.amp_policy) and Saves(op.saves)
        if op.elementary:
            assert set(op.variants) == set(DTYPES), f"{op.name}: a variant per dtype"
            assert len(op.outputs) == 1
        else:
            assert all(KERNEL_OPS[part].elementary for part in op.parts)
            # A fused op's inputs are its parts' inputs, less what a part makes.
            made = {out for part in op.parts for out in KERNEL_OPS[part].outputs}
            needed = {i for part in op.parts for i in KERNEL_OPS[part].inputs} - made
            assert needed == set(op.inputs)
    assert BY_KERNEL == {op.kernel: op for op in OPS}


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
@pytest.mark.parametrize("cls", _backend_classes(), ids=lambda cls: cls.__name__)
def test_every_backend_has_every_op(cls: type, op: KernelOp) -> None:
    method = getattr(cls, op.name, None)
    assert callable(method), f"{cls.__name__} lacks {op.name}"
    assert _positional(method)[: op.arity] == list(op.inputs)
    assert "out" in inspect.signature(method).parameters


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_the_protocol_and_the_api_have_every_op(op: KernelOp) -> None:
    assert _positional(getattr(Backend, op.name))[: op.arity] == list(op.inputs)
    function = getattr(cbrtgrad, op.function)
    assert op.function in cbrtgrad.__all__
    assert _positional(function) == [*op.inputs, "out"]
    # The api runs the op: one call on the cpu backend gives the op's outputs.
    operands = [np.array([8.0, -27.0])] + [np.array([12.0, 27.0])] * (op.arity - 1)
    if op.name == "cube_root_grad":
        operands = [np.array([12.0, 27.0]), np.array([2.0, -3.0])]
    result = function(*operands, backend="cpu")
    assert len(result if len(op.outputs) > 1 else (result,)) == len(op.outputs)


@pytest.mark.parametrize("op", ELEMENTARY, ids=lambda op: op.name)
@pytest.mark.parametrize("dtype", DTYPES)
def test_elementary_ops_have_every_kernel(op: KernelOp, dtype: str) -> None:
    from cbrtgrad.kernels.cpu import catalog as cpu
    from cbrtgrad.kernels.cpu import ufuncs as cpu_ufuncs
    from cbrtgrad.kernels.cpu import user_loops
    from cbrtgrad.kernels.cuda import elementwise as cuda_kernels
    from cbrtgrad.kernels.handlers import buffer_loops, xla_ffi

    ufunc = cpu.ufunc(op.name, dtype)
    assert (ufunc.__name__, ufunc.nin, ufunc.nout) == (op.name, op.arity, 1)
    assert ufunc.__doc__.endswith(op.summary)
    assert dtype in cpu_ufuncs.UFUNCS[op.name]
    assert (op.kernel, dtype) in user_loops._BLOCKS
    assert all((op.kernel, dtype, t) in xla_ffi.HANDLERS for t in (False, True))
    assert all((op.kernel, dtype, t) in buffer_loops.LOOPS for t in (False, True))
    assert (op.kernel, dtype) in cuda_kernels.KERNEL_SHAPES


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_every_op_has_its_parallel_and_cuda_kernels(op: KernelOp) -> None:
    from cbrtgrad.kernels.cpu import prange_loops
    from cbrtgrad.kernels.cuda import elementwise as cuda_kernels

    for name in op.parallel_loops:
        signatures, _ = prange_loops.LOOPS[name]
        assert {prange_loops.dtype_of(s) for s in signatures} == set(DTYPES)
    for dtype in DTYPES:
        assert (op.kernel, dtype) in cuda_kernels.KERNEL_SHAPES
    loops = {name for entry in OPS for name in entry.parallel_loops}
    assert loops == set(prange_loops.LOOPS), "a parallel loop no op runs, or one missing"


def _nodes() -> dict[str, type]:
    found: dict[str, type] = {}
    pending = list(Node.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        schema = getattr(cls, "schema", None)
        if isinstance(schema, OpSchema):
            found[schema.name] = cls
    return found


@pytest.mark.parametrize("op", ELEMENTARY, ids=lambda op: op.name)
def test_the_engine_records_every_elementary_op_by_its_entry(op: KernelOp) -> None:
    node = _nodes()[op.name]
    assert node.schema == schema_of(op)
    assert node.__name__ == "".join(p.title() for p in op.name.split("_")) + "Backward"


def test_the_bridges_name_the_ops_by_their_entries() -> None:
    for bridge in ("numba", "torch", "jax"):
        if bridge != "numba" and importlib.util.find_spec(bridge) is None:
            continue
        module = importlib.import_module(f"cbrtgrad.{bridge}")
        for op in ELEMENTARY:
            assert op.function in module.__all__, f"cbrtgrad.{bridge} lacks {op.function}"
    if importlib.util.find_spec("torch") is not None:
        import torch

        from cbrtgrad.torch import _ops

        assert _ops.FUSED == schema_of(KERNEL_OPS["cube_root_and_grad"])
        for op in OPS:
            assert hasattr(torch.ops.cbrtgrad, op.name)


@pytest.mark.parametrize("bad", ["cube_root_and_grad", "cbrt", 3, None])
def test_elementary_op_refuses_other_names(bad: object) -> None:
    with pytest.raises(ValueError, match="^cbrtgrad: op must be 'cube_root' or 'cube_root_grad'"):
        elementary_op(bad)
    with pytest.raises(ValueError, match="op must be"):
        cbrtgrad.kernels.cpu.catalog.ufunc(bad, np.float64)  # type: ignore[arg-type]


def test_a_new_elementary_op_gets_its_backend_method(monkeypatch: pytest.MonkeyPatch) -> None:
    # What adding an entry gives every backend built on ElementwiseOps: a
    # method of the op's name and parameters, calling the backend's run.
    from cbrtgrad.backends import _protocol

    twice = KernelOp(
        name="twice",
        function="twice",
        inputs=("a", "b"),
        outputs=("c",),
        kernel="twice",
        summary="2 a b.",
        saves="inputs",
        amp_policy="promote",
        parallel_loops=("twice",),
    )
    monkeypatch.setattr(_protocol, "ELEMENTARY", (*ELEMENTARY, twice))

    class Recorder(_protocol.ElementwiseOps):
        def run(self, op, inputs, out, where, dtype, **options):  # type: ignore[no-untyped-def]
            return op, inputs, out, where, dtype, options

    assert _positional(Recorder.twice) == ["a", "b", "out"]
    assert Recorder().twice(b=2, a=1, dtype="d", stream=0) == (
        twice,
        (1, 2),
        None,
        True,
        "d",
        {"stream": 0},
    )
    assert Recorder().cube_root(5, "o")[1:3] == ((5,), "o")
    assert "2 a b." in Recorder.twice.__doc__


@pytest.mark.parametrize("name", ["cpu", "parallel", "numpy"])
def test_backend_methods_take_inputs_by_name_and_out_by_position(name: str) -> None:
    backend = cbrtgrad.backends.get_backend(name)
    g, y, out = np.array([12.0, 27.0]), np.array([2.0, -3.0]), np.empty(2)
    assert backend.cube_root_grad(y=y, g=g) is not None
    assert backend.cube_root_grad(g, y, out) is out
    np.testing.assert_allclose(out, [1.0, 1.0], rtol=4e-16)
    y_out = np.empty(1)
    assert backend.cube_root(np.array([8.0]), y_out) is y_out


@pytest.mark.parametrize("name", ["cpu", "parallel", "numpy"])
def test_direct_backend_calls_follow_the_dtype_rule(name: str) -> None:
    # A backend called directly (not through the api) with inputs the api
    # would cast: the same dtype rule, never a ufunc loop's own cast.
    backend = cbrtgrad.backends.get_backend(name)
    y = backend.cube_root([8.0, -27.0])
    assert y.dtype == np.float64
    # np.cbrt (the numpy backend) is libm's or SVML's: not correctly rounded.
    np.testing.assert_allclose(y, [2.0, -3.0], rtol=0 if name != "numpy" else 4e-16)
    assert backend.cube_root(np.array([8], np.int64)).dtype == np.float64
    assert backend.cube_root(np.array([8.0], np.float16)).dtype == np.float32
    # float64 g with a float32 y computes in float64, as cbrtgrad.cbrt_grad does.
    g, y32 = np.array([1.0 + 2.0**-40]), np.array([2.0], np.float32)
    dx = backend.cube_root_grad(g, y32)
    assert dx.dtype == np.float64
    if name != "numpy":  # numpy's expression is not correctly rounded
        assert dx[0] == cbrtgrad.cbrt_grad(g, y32)[0]
    with pytest.raises(TypeError, match="x has dtype <U1"):
        backend.cube_root(np.array(["a"]))
    with pytest.raises(TypeError, match="^cbrtgrad: out must be a numpy.ndarray, got list"):
        backend.cube_root(np.ones(2), out=[0.0, 0.0])
    with pytest.raises(TypeError, match="^cbrtgrad: out must be a numpy.ndarray, got str"):
        backend.cube_root_grad(np.ones(2), np.ones(2), out="dx")
