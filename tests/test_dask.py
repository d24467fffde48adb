"""cbrtgrad on dask arrays (local threaded scheduler): lazy, same dtypes and bits as numpy."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
from dask.callbacks import Callback

import cbrtgrad
import cbrtgrad as cg
from cbrtgrad.backends import resolve
from cbrtgrad.backends.dask_blocks import DaskBlocks

from .backends._cases import cases, same_bits

CHUNKS = 150


class TaskCounter(Callback):
    """Counts the tasks dask runs, by the name part of their keys."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def _pretask(self, key, dsk, state):  # type: ignore[no-untyped-def]
        self.names.append(key[0] if isinstance(key, tuple) else str(key))

    def count(self, prefix: str) -> int:
        return sum(1 for name in self.names if name.startswith(prefix + "-"))


def lazy(a: np.ndarray, chunks: int = CHUNKS) -> da.Array:
    return da.from_array(a, chunks=chunks)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int16, np.bool_])
def test_cbrt_same_dtype_and_bits_as_numpy_input(dtype):
    x = cases(np.float64, 400)
    x = x[np.isfinite(x) & (np.abs(x) < 6e4)].astype(dtype)  # representable in every dtype
    y = cbrtgrad.cbrt(lazy(x))
    assert isinstance(y, da.Array)
    expected = cbrtgrad.cbrt(x)
    assert y.dtype == expected.dtype
    assert same_bits(y.compute(), expected)


@pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")
@pytest.mark.parametrize(
    ("g", "ydtype"),
    [
        (np.float32, np.float32),
        (np.float16, np.float32),
        (np.float32, np.float64),
        (1.0, np.float32),  # a Python scalar stays weak: float32
        (np.int32, np.float32),  # integers make it float64, as numpy input does
    ],
)
def test_cbrt_grad_dtype_rules_and_bits(g, ydtype):
    y = cbrtgrad.cbrt(cases(np.float64, 300)[:300]).astype(ydtype)
    g_host = g if isinstance(g, float) else np.arange(-150, 150).astype(g)
    g_lazy = g if isinstance(g, float) else lazy(g_host)
    with np.errstate(all="ignore"):
        expected = cbrtgrad.cbrt_grad(g_host, y)
        result = cbrtgrad.cbrt_grad(g_lazy, lazy(y))
        assert isinstance(result, da.Array) and result.dtype == expected.dtype
        assert same_bits(result.compute(), expected)
        # A dask g with a numpy y is dask too.
        assert same_bits(
            cbrtgrad.cbrt_grad(lazy(np.asarray(g_host) * np.ones(300)), y).compute(),
            cbrtgrad.cbrt_grad(np.asarray(g_host) * np.ones(300), y),
        )


@pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")
def test_cbrt_grad_broadcasts_numpy_and_dask_operands():
    y = cbrtgrad.cbrt(np.linspace(-5.0, 5.0, 24).reshape(4, 6))
    g = np.arange(1.0, 7.0)  # shape (6,), broadcast over the rows
    result = cbrtgrad.cbrt_grad(g, lazy(y, chunks=(2, 3)))
    assert result.shape == (4, 6) and result.chunks == ((2, 2), (3, 3))
    with np.errstate(all="ignore"):
        assert same_bits(result.compute(), cbrtgrad.cbrt_grad(g, y))


@pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")
def test_fused_two_lazy_arrays_one_task_per_chunk():
    x = cases(np.float32, 600)[:600]
    g = np.linspace(-2, 2, 600).astype(np.float32)
    y, dx = cbrtgrad.cbrt_and_grad(lazy(x), lazy(g, chunks=200))  # chunks unified
    assert isinstance(y, da.Array) and isinstance(dx, da.Array)
    assert y.dtype == dx.dtype == np.float32
    counter = TaskCounter()
    with counter, np.errstate(all="ignore"):
        yc, dxc = dask.compute(y, dx, scheduler="sync")
        y_ref, dx_ref = cbrtgrad.cbrt_and_grad(x, g)
    assert counter.count("cbrt_and_grad") == y.numblocks[0] == 4
    assert same_bits(yc, y_ref) and same_bits(dxc, dx_ref)
    # Scalars on either side take the other operand's chunks.
    y2, dx2 = cbrtgrad.cbrt_and_grad(lazy(x), 1.0)
    with np.errstate(all="ignore"):
        assert same_bits(dx2.compute(), cbrtgrad.cbrt_and_grad(x, 1.0)[1])
        y3, _ = cbrtgrad.cbrt_and_grad(8.0, lazy(g))
        assert y3.shape == g.shape and np.all(y3.compute() == 2.0)


def test_backend_names_the_chunk_kernel():
    x = cases(np.float64, 300)
    assert resolve(None, lazy(x)) == DaskBlocks("cpu")
    numpy_bits = cbrtgrad.cbrt(lazy(x), backend="numpy").compute()
    assert same_bits(numpy_bits, np.cbrt(x))
    parallel = cbrtgrad.cbrt(lazy(x), backend="parallel")
    assert same_bits(parallel.compute(), cbrtgrad.cbrt(x, backend="cpu"))
    with cbrtgrad.backends.use_backend("numpy"):
        assert resolve(None, lazy(x)) == DaskBlocks("numpy")
    with pytest.raises(ValueError, match="chunks of this dask array are numpy.ndarray"):
        cbrtgrad.cbrt(lazy(x), backend="cuda")


def test_where_and_out_follow_numpy():
    x = np.linspace(-27.0, 27.0, 300)
    mask = x > 0
    old = np.full(300, 7.0)
    out = lazy(old)
    result = cbrtgrad.cbrt(lazy(x), out=out, where=lazy(mask))
    assert result is out  # rebound to the result's graph, as dask's own ufuncs do
    expected = old.copy()
    cbrtgrad.cbrt(x, out=expected, where=mask)
    assert same_bits(out.compute(), expected)
    kept = cbrtgrad.cbrt(lazy(x), out=lazy(old), where=False)  # a scalar mask
    assert same_bits(kept.compute(), old)
    g = np.ones(300)
    dx = cbrtgrad.cbrt_grad(lazy(g), lazy(x), out=lazy(old), where=mask).compute()
    assert same_bits(dx, cbrtgrad.cbrt_grad(g, x, out=old.copy(), where=mask))


def test_bad_input_errors():
    x = lazy(np.ones(300))
    with pytest.raises(TypeError, match="out must be a dask array"):
        cbrtgrad.cbrt(x, out=np.empty(300))
    with pytest.raises(ValueError, match=r"out has shape \(3,\)"):
        cbrtgrad.cbrt(x, out=lazy(np.ones(3)))
    with pytest.raises(TypeError, match="where must be a bool array"):
        cbrtgrad.cbrt(x, where=lazy(np.ones(300)))
    with pytest.raises(TypeError, match="x has dtype complex128"):
        cbrtgrad.cbrt(x.astype(np.complex128))
    with pytest.raises(ValueError, match="could not be broadcast"):
        cbrtgrad.cbrt_grad(lazy(np.ones(4)), x)
    with pytest.raises(TypeError, match="g has dtype object"):
        cbrtgrad.cbrt_grad(object(), x)
    from numba import cuda  # the simulator's device arrays (tests/conftest.py)

    with pytest.raises(TypeError, match="g must be a dask array, a numpy array or a scalar"):
        cbrtgrad.cbrt_grad(cuda.to_device(np.ones(300)), x)
    with pytest.raises(TypeError, match="does not take out="):
        cbrtgrad.cbrt_and_grad(x, 1.0, out=(x, x))


# -- the graph engine ---------------------------------------------------------------


def _engine_pair(x_host):
    lazy_leaf = cg.Tensor(lazy(x_host), requires_grad=True)
    host_leaf = cg.Tensor(x_host, requires_grad=True)
    return lazy_leaf, host_leaf


def test_engine_backward_is_lazy_and_computes_nothing_twice():
    x = np.linspace(0.5, 30.0, 600)
    t, t_host = _engine_pair(x)
    y = cg.cbrt(t)
    assert isinstance(y.grad_fn.result, da.Array)  # the saved output is lazy too
    loss = (y * 2.0 + t).sum()
    loss.backward()
    assert isinstance(loss.data, da.Array) and isinstance(t.grad, da.Array)
    assert t.grad.dtype == np.float64 and t.grad.chunks == t.data.chunks
    counter = TaskCounter()
    with counter:
        value, grad = dask.compute(loss.data, t.grad)
    chunks = t.data.numblocks[0]
    # The forward chunks are shared by the loss and the gradient: each ran once.
    assert counter.count("cbrt") == chunks == 4
    # Unoptimised (no task fusion renaming keys), the same holds, and computed
    # one after the other the forward runs again: the counter can tell.
    with TaskCounter() as unfused:
        dask.compute(loss.data, t.grad, optimize_graph=False)
    assert unfused.count("cbrt") == chunks and unfused.count("cbrt_grad") == chunks
    with TaskCounter() as separate:
        loss.data.compute(optimize_graph=False)
        t.grad.compute(optimize_graph=False)
    assert separate.count("cbrt") == 2 * chunks

    host_loss = (cg.cbrt(t_host) * 2.0 + t_host).sum()
    host_loss.backward()
    assert same_bits(grad, t_host.grad)
    assert value == pytest.approx(float(host_loss.data), rel=1e-13)  # chunked summation


def test_engine_mean_broadcast_and_float16():
    x = np.linspace(-8.0, 8.0, 24).reshape(4, 6)
    w_host = np.linspace(1.0, 2.0, 6)
    t, t_host = _engine_pair(x)
    w, w_host_t = cg.Tensor(w_host, requires_grad=True), cg.Tensor(w_host, requires_grad=True)
    (cg.cbrt(t * w) + 1.0).mean().backward()
    (cg.cbrt(t_host * w_host_t) + 1.0).mean().backward()
    assert isinstance(t.grad, da.Array) and isinstance(w.grad, da.Array)
    with np.errstate(all="ignore"):
        assert np.allclose(t.grad.compute(), t_host.grad, equal_nan=True)
        assert np.allclose(w.grad.compute(), w_host_t.grad, equal_nan=True)
    h = np.array([8.0, -27.0, 0.5, 64.0], np.float16)
    th, th_host = _engine_pair(h)
    yh = cg.cbrt(th)
    assert yh.dtype == np.float32  # half precision: computed and returned in float32 (_dtypes)
    yh.sum().backward()
    cg.cbrt(th_host).sum().backward()
    assert th.grad.dtype == np.float16 and same_bits(th.grad.compute(), th_host.grad)


def test_functional_grad_of_a_dask_argument():
    x = np.array([8.0, 27.0, 64.0, 125.0])
    value, g = cg.value_and_grad(lambda a: cg.cbrt(a).sum())(lazy(x, chunks=2))
    assert isinstance(g, da.Array)
    assert same_bits(g.compute(), cg.grad(lambda a: cg.cbrt(a).sum())(x))
    assert float(value.compute()) == 14.0


def test_engine_version_checks_and_display_of_dask_data():
    t = cg.Tensor(lazy(np.linspace(1.0, 8.0, 300)), requires_grad=True)
    y = cg.cbrt(t)
    assert "dask.array" in repr(y)  # shown, not computed
    y.data[0] = 5.0  # dask rebinds y's array to a new graph
    with pytest.raises(RuntimeError, match="modified in place"):
        y.sum().backward()
    z = cg.cbrt(t)
    w = z * 1.0
    z += 1.0  # an in-place op on a saved dask tensor
    with pytest.raises(RuntimeError, match="modified in place"):
        (w * z).sum().backward()
    assert z.numpy().flags.writeable is False and z.numpy().shape == (300,)
    assert cg.Tensor(lazy(np.array([27.0]))).item() == 27.0


def test_a_dask_out_for_numpy_inputs_is_a_type_error():
    # The api checks out= once for every backend: a dask out= goes only with
    # dask inputs (whose backend writes it lazily).
    with pytest.raises(TypeError, match="out must be a numpy.ndarray, got Array"):
        cbrtgrad.cbrt(np.ones(3), out=da.zeros(3))
    with pytest.raises(TypeError, match="out must be a numpy.ndarray, got Array"):
        cbrtgrad.cbrt_grad(np.ones(3), np.ones(3), out=da.zeros(3))
    lazy = cbrtgrad.cbrt(da.full(3, 8.0, chunks=2), out=da.zeros(3, chunks=2))
    np.testing.assert_array_equal(lazy.compute(), [2.0, 2.0, 2.0])


# -- chunk sizes dask does not know (nan in chunks) -------------------------------


def _unknown(a: np.ndarray, chunks: int | tuple[int, ...] = 7) -> da.Array:
    # Boolean indexing is the usual way to them: every chunk's length is nan.
    lazy_a = lazy(a, chunks=chunks)
    keep = lazy_a[(slice(None),) + (0,) * (a.ndim - 1)] > -np.inf  # everything, lazily
    unknown = lazy_a[keep]
    assert all(np.isnan(n) for n in unknown.chunks[0])
    return unknown


def _known(a: da.Array) -> da.Array:
    return a.copy().compute_chunk_sizes()


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_unknown_chunk_sizes_give_the_known_chunks_bits(dtype):
    # Every function, with every kind of second operand dask can line up with
    # an axis of unknown length: one of the same unknown chunks (another
    # graph), a Python scalar, a length-1 numpy array, and in 2-D a row
    # (numpy, and dask with other chunks). Known chunks are the reference.
    rng = np.random.default_rng(9)
    x_host = (rng.uniform(0.5, 2e3, 50) * rng.choice([-1, 1], 50)).astype(dtype)
    g_host = rng.uniform(-3, 3, 50).astype(dtype)
    x, g = _unknown(x_host), _unknown(g_host)
    xk, gk = _known(x), _known(g)

    def same(lazy_result, reference):
        assert np.isnan(lazy_result.shape[0])
        return same_bits(lazy_result.compute(), reference.compute())

    assert same(cbrtgrad.cbrt(x), cbrtgrad.cbrt(xk))
    assert same_bits(cbrtgrad.cbrt(x).compute(), cbrtgrad.cbrt(x_host))
    y, yk = cbrtgrad.cbrt(x), cbrtgrad.cbrt(xk)
    for second in (g, 1.5, np.array([2.0], dtype)):
        second_k = gk if second is g else second
        assert same(cbrtgrad.cbrt_grad(second, y), cbrtgrad.cbrt_grad(second_k, yk))
        pair, pair_k = cbrtgrad.cbrt_and_grad(x, second), cbrtgrad.cbrt_and_grad(xk, second_k)
        assert same(pair[0], pair_k[0]) and same(pair[1], pair_k[1])
    pair, pair_k = cbrtgrad.cbrt_and_grad(2.0, g), cbrtgrad.cbrt_and_grad(2.0, gk)
    assert same(pair[0], pair_k[0]) and same(pair[1], pair_k[1])
    rows = _unknown(x_host.reshape(25, 2), chunks=(4, 1))
    rows_k = _known(rows)
    for row in (np.array([1.0, -2.0], dtype), lazy(np.array([1.0, -2.0], dtype), chunks=2)):
        got = cbrtgrad.cbrt_grad(row, cbrtgrad.cbrt(rows))
        assert same(got, cbrtgrad.cbrt_grad(row, cbrtgrad.cbrt(rows_k)))


def test_unknown_chunk_sizes_where_out_and_shapes():
    x_host = np.linspace(-27.0, 27.0, 40)
    x = _unknown(x_host)
    mask = x > 0
    selected = mask.compute()
    got = cbrtgrad.cbrt(x, where=mask).compute()
    assert same_bits(got[selected], cbrtgrad.cbrt(x_host)[selected])
    # out= is rebound to the result's graph once its shape is checked, which
    # nan does not allow (dask's own ufuncs refuse it too): a clear error.
    with pytest.raises(ValueError, match=r"out= cannot be checked .*compute_chunk_sizes"):
        cbrtgrad.cbrt(x, out=_unknown(x_host))
    with pytest.raises(ValueError, match=r"out= cannot be checked"):
        cbrtgrad.cbrt_grad(x, x, out=lazy(x_host))
    # An axis of unknown length lines up with nothing but its own chunks and length 1.
    with pytest.raises(ValueError, match=r"could not be broadcast .*\(40,\), \(nan,\)"):
        cbrtgrad.cbrt_grad(np.ones(40), x)
    with pytest.raises(ValueError, match=r"could not be broadcast"):
        cbrtgrad.cbrt_and_grad(x, lazy(x_host))


def test_unknown_chunks_that_do_not_line_up_are_an_error_not_a_broadcast():
    # Two arrays with as many unknown chunks but other lengths: a block of
    # length 1 would be broadcast by numpy against a longer one without a word.
    d = lazy(np.arange(1.0, 10.0), chunks=3)
    short_first = d[d >= 3]  # blocks of 1, 3, 3 elements
    full = d[d > 0]  # blocks of 3, 3, 3
    for result in (
        cbrtgrad.cbrt_grad(short_first, full),
        cbrtgrad.cbrt_and_grad(full, short_first)[1],
    ):
        with pytest.raises(ValueError, match="unknown chunk sizes .* do not line up"):
            result.compute(scheduler="sync")
