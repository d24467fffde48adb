"""cbrtgrad on a real ``dask.distributed`` cluster: two worker processes on loopback.

One cluster serves the module (starting worker processes and compiling the
kernels in each is the expensive part). Its workers get little memory
(``MEMORY_LIMIT``) so that the out-of-core test must spill to disk; the
other tests use small arrays.
"""

from __future__ import annotations

import dask
import dask.array as da
import numba
import numpy as np
import pytest
from distributed import Client, LocalCluster, wait

import cbrtgrad as cg
from cbrtgrad.backends.dask_cluster import (
    default_numba_threads,
    kernels_plugin,
    numba_threads_plugin,
    worker_env,
)
from cbrtgrad.build import cache as _cache
from cbrtgrad.kernels.cpu.catalog import cached_kernels
from tools.measuring import dask_table

from .backends._cases import cases, same_bits

pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")


MEMORY_LIMIT = 100 * 2**20
#: Spill by managed memory only, above half the limit. The process-memory
#: thresholds are off: a worker with numba and the compiled kernels loaded
#: already uses more than MEMORY_LIMIT, and would be paused or killed.
MEMORY_CONFIG = {
    "distributed.worker.memory.target": 0.5,
    "distributed.worker.memory.spill": False,
    "distributed.worker.memory.pause": False,
    "distributed.worker.memory.terminate": False,
}


@pytest.fixture(scope="module")
def client():
    with (
        dask.config.set(MEMORY_CONFIG),
        LocalCluster(
            n_workers=2,
            processes=True,
            threads_per_worker=1,
            host="127.0.0.1",
            dashboard_address=None,
            memory_limit=MEMORY_LIMIT,
            env=worker_env(1),
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c


def _numba_threads():
    return numba.config.NUMBA_NUM_THREADS, numba.get_num_threads()


def test_worker_numba_threads_are_capped(client):
    per_worker = client.run(_numba_threads)
    assert len(per_worker) == 2
    assert set(per_worker.values()) == {(1, 1)}
    # In a task thread too (numba.set_num_threads would not reach those).
    assert client.submit(_numba_threads, pure=False).result() == (1, 1)


def test_kernels_on_workers_equal_single_machine_bits(client):
    x = np.concatenate([cases(np.float32, 2000), -cases(np.float32, 2000)])
    g = np.linspace(-3.0, 3.0, x.size).astype(np.float32)
    xd = da.from_array(x, chunks=x.size // 4)
    with np.errstate(all="ignore"):
        y_ref = cg.cbrt(x)
        dx_ref = cg.cbrt_grad(g, y_ref)
        yf_ref, dxf_ref = cg.cbrt_and_grad(x, g)
    y = cg.cbrt(xd)
    dx = cg.cbrt_grad(da.from_array(g, chunks=1000), y)
    yf, dxf = cg.cbrt_and_grad(xd, g)
    futures = client.compute([y, dx, yf, dxf])
    y_c, dx_c, yf_c, dxf_c = client.gather(futures)
    where = client.who_has(futures)
    assert any(where.values())  # the results were made on the workers
    assert same_bits(y_c, y_ref) and same_bits(dx_c, dx_ref)
    assert same_bits(yf_c, yf_ref) and same_bits(dxf_c, dxf_ref)


def test_engine_backward_on_the_cluster(client):
    x = np.linspace(-50.0, 50.0, 4001)
    t = cg.Tensor(da.from_array(x, chunks=1000), requires_grad=True)
    loss = (cg.cbrt(t) * cg.cbrt(t)).mean()
    loss.backward()
    value, grad = dask.compute(loss.data, t.grad)
    t_host = cg.Tensor(x, requires_grad=True)
    host_loss = (cg.cbrt(t_host) * cg.cbrt(t_host)).mean()
    host_loss.backward()
    with np.errstate(all="ignore"):
        assert np.array_equal(grad, t_host.grad, equal_nan=True)
    assert value == pytest.approx(float(host_loss.data), rel=1e-13)


def test_thread_settings_validate_their_arguments():
    with pytest.raises(TypeError, match="threads must be an int, got float"):
        worker_env(1.5)
    with pytest.raises(ValueError, match="threads must be >= 1, got 0"):
        numba_threads_plugin(0)
    with pytest.raises(TypeError, match="threads must be an int, got bool"):
        default_numba_threads(True)
    assert default_numba_threads(1, 1) >= 1


def _built_kernels():  # type: ignore[no-untyped-def]
    from cbrtgrad.build import compile as _compile

    return _compile.built_kernels()


def test_kernels_plugin_loads_the_kernels_when_workers_start(client):
    # The workers share this run's cache folder (they inherit its variable).
    client.register_plugin(kernels_plugin(["cube_root_grad"], ["float32"]))
    for built in client.run(_built_kernels).values():
        assert "ufunc cube_root_grad float32" in built
    with pytest.raises(ValueError, match="ops must be"):
        kernels_plugin(["cbrt"])
    with pytest.raises(ValueError, match="dtypes must be"):
        kernels_plugin(dtypes=["float16"])


def test_warm_runs_on_a_worker_into_the_shared_cache(client):
    # A dask worker is a daemonic process: warm's workers are plain
    # subprocesses, which it may start (multiprocessing's may not).
    report = client.submit(cg.warm, "ufunc cube_root_grad float32", jobs=1).result()
    assert [k.name for k in report.kernels] == ["ufunc cube_root_grad float32"]
    assert report.folder == str(_cache.directory())
    assert _cache.status({"g": cached_kernels()["ufunc cube_root_grad float32"]}).missing == ()


def _spill_metrics(dask_worker):  # type: ignore[no-untyped-def]
    return (
        dask_worker.data.spilled_total.disk,
        dask_worker.data.cumulative_metrics.get(("disk-write", "bytes"), 0.0),
    )


def _check_block(x, y, dx):  # type: ignore[no-untyped-def]
    # The single-machine computation of this chunk, in numpy on the worker,
    # and the independent oracle np.cbrt (float32 within 1.93 ulp with SVML, 0.89 with glibc, so a
    # relative 3 * 2^-23).
    y_ref = cg.cbrt(x, backend="cpu")
    dx_ref = cg.cbrt_grad(np.float32(1.0), y_ref, backend="cpu")
    ok = same_bits(y, y_ref) and same_bits(dx, dx_ref)
    return np.array([ok and bool(np.allclose(y, np.cbrt(x), rtol=3 * 2.0**-23, atol=0))])


def test_out_of_core_forward_and_gradient_spill_to_disk(client):
    n = 32 * 2**20  # float32: x is 128 MiB, y and dx 256 MiB together
    total_memory = 2 * MEMORY_LIMIT
    x = da.random.default_rng(7).standard_normal(n, chunks=2**21, dtype=np.float32) * 100
    t = cg.Tensor(x, requires_grad=True)
    y = cg.cbrt(t)
    y.sum().backward()
    y_kept, dx_kept = client.persist([y.data, t.grad])
    wait([y_kept, dx_kept])
    kept_bytes = y_kept.nbytes + dx_kept.nbytes
    assert kept_bytes > total_memory
    metrics = client.run(_spill_metrics)
    on_disk = sum(disk for disk, _ in metrics.values())
    written = sum(w for _, w in metrics.values())
    # What does not fit under the workers' spill threshold is on disk.
    assert on_disk >= kept_bytes - total_memory * MEMORY_CONFIG["distributed.worker.memory.target"]
    assert written >= on_disk
    checks = da.map_blocks(_check_block, x, y_kept, dx_kept, dtype=bool, chunks=(1,))
    result = checks.compute()
    assert result.shape == (16,) and result.all()


def test_bench_rows_on_the_cluster(client):
    # The out-of-core test runs the workers near their memory limit: a nanny may
    # be restarting one (once, under load, the row said "0 workers").
    client.wait_for_workers(2)
    rows = dask_table.dask_rows(gigabytes=0.004, chunk_mib=1, repeat=1, client=client)
    cases_measured = {(r.case, r.where) for r in rows}
    assert ("cbrt", "dask, 2 workers") in cases_measured
    assert ("np.cbrt", "one process") in cases_measured
    assert all(r.gb_per_s > 0 and r.gigabytes == pytest.approx(0.004) for r in rows)
    with pytest.raises(ValueError, match="gigabytes must be > 0"):
        dask_table.dask_rows(gigabytes=0, client=client)
