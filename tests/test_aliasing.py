"""Outputs that overlap inputs give numpy's answer on every host backend (issue 24).

numpy's ufuncs behave as if every input were read before any output is
written, whatever the overlap. Each case here builds the arrays as views of
one buffer, runs the call, and compares the whole buffer, bit for bit, with
the same backend run on copies and the results written out afterwards (``y``
before ``dx`` for ``cbrt_and_grad``, so ``out=(a, a)`` holds ``dx``): bit for
bit on cbrtgrad's backends, within numpy's bound on the ``numpy`` backend,
whose bits depend on the layout (tests/_agreement.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import cbrtgrad as cg

from ._agreement import agree

HOST = ("cpu", "numpy", "parallel")
ROOT = Path(__file__).resolve().parents[1]
N = 12


def _buffer(dtype):
    rng = np.random.default_rng(24)
    return (rng.standard_normal(3 * N) * 30).astype(dtype)


#: Views of a buffer ``b`` (name -> function): the inputs and outputs are drawn from these.
VIEWS = {
    "a": lambda b: b[:N],
    "a+1": lambda b: b[1 : N + 1],
    "a-reversed": lambda b: b[:N][::-1],
    "b": lambda b: b[N : 2 * N],
    "b+2": lambda b: b[N + 2 : 2 * N + 2],
    "c": lambda b: b[2 * N :],
    "a-strided": lambda b: b[: 2 * N : 2],
}


def _single_cases():
    for arity in (1, 2):
        for out in VIEWS:
            for first in VIEWS:
                for second in VIEWS if arity == 2 else [None]:
                    yield arity, out, first, second


SINGLE = list(_single_cases())
FUSED = [(x, g, y, dx) for x in VIEWS for g in ("b", "a", "c") for y in VIEWS for dx in VIEWS]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("backend", HOST)
def test_single_output_overlapping_inputs(backend, dtype):
    failures = []
    for arity, out_name, first, second in SINGLE:
        buf = _buffer(dtype)
        ref_buf = buf.copy()
        if arity == 1:
            args = (VIEWS[first](buf),)
            ref_args = (VIEWS[first](ref_buf).copy(),)
            func = cg.cbrt
        else:
            args = (VIEWS[first](buf), VIEWS[second](buf))
            ref_args = (VIEWS[first](ref_buf).copy(), VIEWS[second](ref_buf).copy())
            func = cg.cbrt_grad
        with np.errstate(all="ignore"):
            expected = func(*ref_args, backend=backend)
            VIEWS[out_name](ref_buf)[...] = expected
            got = func(*args, out=VIEWS[out_name](buf), backend=backend)
        if not agree(buf, ref_buf, backend) or not np.shares_memory(got, buf):
            failures.append((func.__name__, out_name, first, second))
    assert not failures, failures


# None: the automatic choice, whose small same-shape calls take the api's
# hot path (two ufunc calls into the out pair where y does not overlap g).
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("backend", (*HOST, None))
def test_fused_outputs_overlapping_inputs_or_each_other(backend, dtype):
    failures = []
    for x_name, g_name, y_name, dx_name in FUSED:
        buf = _buffer(dtype)
        ref_buf = buf.copy()
        x, g = VIEWS[x_name](ref_buf).copy(), VIEWS[g_name](ref_buf).copy()
        with np.errstate(all="ignore"):
            y_ref, dx_ref = cg.cbrt_and_grad(x, g, backend=backend)
            VIEWS[y_name](ref_buf)[...] = y_ref
            VIEWS[dx_name](ref_buf)[...] = dx_ref
            out = (VIEWS[y_name](buf), VIEWS[dx_name](buf))
            y, dx = cg.cbrt_and_grad(
                VIEWS[x_name](buf), VIEWS[g_name](buf), out=out, backend=backend
            )
        if not agree(buf, ref_buf, backend) or y is not out[0] and not np.shares_memory(y, buf):
            failures.append((x_name, g_name, y_name, dx_name))
    assert not failures, failures


@pytest.mark.parametrize("backend", HOST)
def test_a_host_backend_called_directly_takes_any_out_pair(backend):
    # The backends' protocol is public (docs/backends.md): called without the
    # api, which makes temporaries for overlapping out pairs before it calls
    # one, each host backend still gives numpy's answer. NOTE: the cpu and
    # numpy backends wrote y over g before they read it (out=(g, dx)).
    from cbrtgrad.backends import get_backend

    failures = []
    for x_name, g_name, y_name, dx_name in FUSED:
        buf = _buffer(np.float64)
        ref_buf = buf.copy()
        x, g = VIEWS[x_name](ref_buf).copy(), VIEWS[g_name](ref_buf).copy()
        with np.errstate(all="ignore"):
            y_ref, dx_ref = get_backend(backend).cube_root_and_grad(x, g)
            VIEWS[y_name](ref_buf)[...] = y_ref
            VIEWS[dx_name](ref_buf)[...] = dx_ref
            out = (VIEWS[y_name](buf), VIEWS[dx_name](buf))
            y, dx = get_backend(backend).cube_root_and_grad(
                VIEWS[x_name](buf), VIEWS[g_name](buf), out=out
            )
        if not agree(buf, ref_buf, backend) or y is not out[0] or dx is not out[1]:
            failures.append((x_name, g_name, y_name, dx_name))
    assert not failures, failures


def test_the_issue_example_on_every_host_backend():
    for backend in HOST:
        x = np.array([8.0, 27.0, -1.0])
        g = np.array([12.0, 27.0, 3.0])
        y_ref, dx_ref = cg.cbrt_and_grad(x, g.copy(), backend=backend)
        buf = np.empty(3)
        y, dx = cg.cbrt_and_grad(x, g, out=(g, buf), backend=backend)
        assert y is g and dx is buf
        np.testing.assert_array_equal(g, y_ref)
        np.testing.assert_array_equal(buf, dx_ref)
        np.testing.assert_allclose(buf, [1.0, 1.0, 1.0])


def test_broadcast_input_that_is_also_the_output():
    # x is one element of out, broadcast over all of it: numpy reads it first.
    for backend in HOST:
        buf = np.array([8.0, 1.0, 1.0])
        cg.cbrt(buf[:1], out=buf, backend=backend)
        np.testing.assert_array_equal(buf, cg.cbrt(np.full(3, 8.0), backend=backend))
        buf = np.array([8.0, 1.0, 1.0])
        y = np.array([1.0, 2.0, 4.0])
        cg.cbrt_grad(buf[:1], y, out=buf, backend=backend)
        np.testing.assert_array_equal(buf, cg.cbrt_grad(np.full(3, 8.0), y, backend=backend))


def test_engine_out_tensor_overlapping_its_input():
    x = cg.Tensor(np.array([8.0, 27.0, 64.0, 125.0]))
    with cg.no_grad():
        cg.cbrt(cg.Tensor(x.data[::-1]), out=x)
    np.testing.assert_array_equal(x.data, [5.0, 4.0, 3.0, 2.0])


def test_dask_out_is_rebound_never_written():
    da = pytest.importorskip("dask.array")
    x = da.from_array(np.array([8.0, 27.0, 64.0, 125.0]), chunks=2)
    g = da.from_array(np.array([12.0, 27.0, 48.0, 75.0]), chunks=2)
    y = cg.cbrt(x, out=x)
    np.testing.assert_array_equal(y.compute(), [2.0, 3.0, 4.0, 5.0])
    dx = cg.cbrt_grad(g, y, out=g)
    np.testing.assert_array_equal(dx.compute(), [1.0, 1.0, 1.0, 1.0])


def _hard_inputs() -> np.ndarray:
    # float64 inputs whose roots need the exact second pass (tests/data).
    lines = (ROOT / "tests" / "data" / "cbrt_f64_hard.txt").read_text().splitlines()
    values = [float.fromhex(line.split()[0]) for line in lines if line and line[0] != "#"]
    return np.array(values[:300])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_cpu_ufuncs_themselves_take_out_before_their_input(dtype):
    # numpy copies nothing for out=a[:-1] with input a[1:] (its in-order
    # loops could take it), and the block loops read a block's inputs again
    # after writing it: the inner loops take such a call themselves
    # (kernels/cpu/ufunc_loops.py). Hard lanes (the exact pass rereads x) and
    # 0 / 0 (the nan pass rereads g and y) show it; before, 56 of 117 hard
    # float64 roots were wrong here.
    from cbrtgrad.kernels.cpu import catalog as cpu

    forward = cpu.ufunc("cube_root", dtype)
    gradient = cpu.ufunc("cube_root_grad", dtype)
    with np.errstate(over="ignore"):  # float32: the large hard inputs are inf
        a = np.concatenate([_hard_inputs(), [0.0, -0.0, 1.0, np.nan]]).astype(dtype)
    expected = forward(a[1:].copy())
    assert forward(a[1:], out=a[:-1]) is not None
    assert np.array_equal(a[:-1].view(np.uint8), expected.view(np.uint8))
    for shift in (0, 1):  # g and y both a[1:], or g = a[1:] and y = a[2:]
        b = np.concatenate([np.zeros(8), np.ones(4), [np.inf, -0.0]]).astype(dtype)
        g, y = b[1 : b.size - 1], b[1 + shift : b.size - 1 + shift]
        with np.errstate(all="ignore"):
            expected = gradient(g.copy(), y.copy())
            gradient(g, y, out=b[: g.size])
        assert np.array_equal(b[: g.size].view(np.uint8), expected.view(np.uint8))


def _layout(values: np.ndarray, kind: str) -> np.ndarray:
    """``values`` as a contiguous array, a stride-2 view, or a reversed view (a copy each)."""
    if kind == "contiguous":
        return values.copy()
    room = np.full(2 * values.size, 7, values.dtype)
    if kind == "strided":
        room[::2] = values
        return room[::2]
    room[values.size :] = values[::-1]
    return room[values.size :][::-1]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_cpu_ufuncs_take_every_mix_of_strided_and_contiguous_operands(dtype):
    # The inner loops copy only their strided operands into buffers, block by
    # block (kernels/cpu/ufunc_loops.py): every mix, over several blocks, with
    # hard lanes and specials, gives the bits of contiguous operands.
    from cbrtgrad.kernels.cpu import catalog as cpu
    from cbrtgrad.kernels.cpu.ufunc_loops import BUFFER

    forward = cpu.ufunc("cube_root", dtype)
    gradient = cpu.ufunc("cube_root_grad", dtype)
    rng = np.random.default_rng(33)
    n = 3 * BUFFER + 17
    with np.errstate(over="ignore"):
        special = np.concatenate([_hard_inputs(), [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324]])
        x = np.concatenate([special, rng.standard_normal(n - special.size) * 1e3]).astype(dtype)
    g = rng.standard_normal(n).astype(dtype)
    y = forward(x)
    bits = np.uint32 if dtype == np.float32 else np.uint64
    kinds = ("contiguous", "strided", "reversed")
    for x_kind in kinds:
        for out_kind in kinds[:2]:
            out = _layout(np.zeros(n, dtype), out_kind)
            forward(_layout(x, x_kind), out=out)
            assert np.array_equal(out.view(bits), y.view(bits)), (x_kind, out_kind)
    with np.errstate(all="ignore"):
        expected = gradient(g, y)
        for g_kind in (*kinds, "broadcast"):
            for y_kind in kinds[:2]:
                for out_kind in kinds[:2]:
                    gs = (
                        np.broadcast_to(g[:1], (n,))
                        if g_kind == "broadcast"
                        else _layout(g, g_kind)
                    )
                    want = (
                        gradient(np.ascontiguousarray(gs), y) if g_kind == "broadcast" else expected
                    )
                    out = _layout(np.zeros(n, dtype), out_kind)
                    gradient(gs, _layout(y, y_kind), out=out)
                    assert np.array_equal(out.view(bits), want.view(bits)), (
                        g_kind,
                        y_kind,
                        out_kind,
                    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_out_before_its_input_beside_a_strided_operand_over_several_blocks(dtype):
    # out=a[:-1] for the input a[1:], uncopied by numpy, taken through the
    # buffer while the other operand is strided: every block's inputs are read
    # before the block is written, over several blocks.
    from cbrtgrad.kernels.cpu import catalog as cpu
    from cbrtgrad.kernels.cpu.ufunc_loops import BUFFER

    gradient = cpu.ufunc("cube_root_grad", dtype)
    n = 3 * BUFFER + 5
    rng = np.random.default_rng(34)
    a = (rng.standard_normal(n + 1) * 10).astype(dtype)
    ys = np.abs(rng.standard_normal(n)).astype(dtype) + 1
    # 0 / 0 in every block: the nan pass reads the block's g again after writing it.
    ys[3::BUFFER] = 0
    a[4::BUFFER] = 0
    y = _layout(ys, "strided")
    with np.errstate(all="ignore"):
        expected = gradient(a[1:].copy(), y.copy())
        gradient(a[1:], y, out=a[:-1])
    assert np.isnan(expected[3::BUFFER]).all()
    assert np.array_equal(a[:-1].view(np.uint8), expected.view(np.uint8))
