"""``python tools/measure.py dask``: a large float32 array, chunk by chunk, on dask vs numpy."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from cbrtgrad import api
from cbrtgrad.cli.bench.timing import best_time
from cbrtgrad.verification import text as _text


@dataclass
class DaskBenchRow:
    """One measured case of ``python tools/measure.py dask``: throughput over the input's bytes."""

    case: str
    where: str
    gigabytes: float
    seconds: float
    gb_per_s: float


def _dask_row(case: str, where: str, nbytes: int, seconds: float) -> DaskBenchRow:
    return DaskBenchRow(case, where, nbytes / 1e9, seconds, nbytes / 1e9 / seconds)


def _still_known(keys: list[Any], dask_scheduler: Any = None) -> bool:
    return any(k in dask_scheduler.tasks for k in keys)


def _warm_worker() -> None:
    # Compile (or load) the float32 chunk kernels once per worker, outside the timings.
    from cbrtgrad.kernels.cpu import catalog as cpu

    cpu.ufunc("cube_root", np.float32)
    cpu.ufunc("cube_root_grad", np.float32)


def _measure_on_cluster(
    client: Any, rows: list[DaskBenchRow], n: int, nbytes: int, chunk: int, repeat: int
) -> np.ndarray:
    """Append the cluster rows; return the input, fetched into this process."""
    import dask.array as da
    from distributed import futures_of, wait

    # A worker that its nanny is restarting (numba_threads_plugin does; so does
    # a worker past its memory limit) has not registered again yet: without
    # the wait, the row could say "0 workers" (seen once in the tests, under load).
    client.wait_for_workers(1)
    n_workers = len(client.scheduler_info()["workers"])
    client.run(_warm_worker)
    x = da.random.default_rng(1).standard_normal(n, chunks=chunk, dtype=np.float32) * 1e3
    # NOTE: float32 normal samples are exactly 0 about once in 2^23 draws; the
    # gradient there is inf, with a divide-by-zero warning from every worker.
    x = da.where(x == 0, np.float32(1.0), x)
    x = client.persist(x)
    wait(x)

    def on_cluster(make: Callable[[], Any]) -> float:
        # The same graph has the same keys every time: before the next run,
        # the previous result must be gone from the scheduler (else persist
        # finds it there). That wait is the timer's untimed setup.
        held: list[Any] = []

        def run() -> None:
            result = client.persist(make())
            wait(result)
            held.append(result)

        def release() -> None:
            if held:
                # The client releases the keys once no future holds them.
                keys = [f.key for f in futures_of(held.pop())]
                while client.run_on_scheduler(_still_known, keys):
                    time.sleep(0.01)

        seconds = best_time(run, repeat, number=1, setup=release)
        release()
        return seconds

    where = f"dask, {n_workers} workers"
    rows.append(
        _dask_row(
            "np.cbrt per chunk",
            where,
            nbytes,
            on_cluster(lambda: da.map_blocks(np.cbrt, x, dtype=np.float32)),
        )
    )
    rows.append(_dask_row("cbrt", where, nbytes, on_cluster(lambda: api.cbrt(x))))
    rows.append(
        _dask_row(
            "cbrt_and_grad",
            where,
            nbytes,
            on_cluster(lambda: list(api.cbrt_and_grad(x, np.float32(1.0)))),
        )
    )
    host: np.ndarray = client.compute(x).result()
    return host


def dask_rows(
    gigabytes: float = 2.0,
    n_workers: int = 2,
    chunk_mib: int = 64,
    repeat: int = 3,
    client: Any = None,
) -> list[DaskBenchRow]:
    """A float32 array of ``gigabytes`` chunk by chunk on a local cluster, against numpy.

    The data are made on the workers and kept there (``persist``); each
    timing persists the result and waits for it, so it measures the
    kernels and the scheduler, not the transfer back. The same data, fetched
    into this process, are then timed with ``np.cbrt`` and cbrtgrad's own
    numpy path, allocating their results as the workers do. Workers run one
    task thread each, with numba threads capped
    (:func:`cbrtgrad.backends.dask_cluster.worker_env`).

    Parameters
    ----------
    gigabytes : float
        Size of the input (10^9 bytes).
    n_workers : int
        Worker processes of the ``distributed.LocalCluster``.
    chunk_mib : int
        Chunk size in MiB.
    repeat : int
        Timings per case; the best is kept.
    client : distributed.Client, optional
        Measure on this client's cluster instead of starting a local one
        (``n_workers`` is then ignored).

    Returns
    -------
    list of DaskBenchRow
    """
    from distributed import Client, LocalCluster

    from cbrtgrad.backends.dask_cluster import default_numba_threads, worker_env

    if not gigabytes > 0:
        raise ValueError(f"cbrtgrad: gigabytes must be > 0, got {gigabytes}")
    n = int(gigabytes * 1e9) // 4
    nbytes = n * 4
    chunk = max(1, chunk_mib * 2**20 // 4)
    rows: list[DaskBenchRow] = []
    if client is None:
        cluster = LocalCluster(
            n_workers=n_workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            env=worker_env(default_numba_threads(n_workers)),
        )
        with cluster, Client(cluster) as own:
            host = _measure_on_cluster(own, rows, n, nbytes, chunk, repeat)
    else:
        host = _measure_on_cluster(client, rows, n, nbytes, chunk, repeat)
    # Fresh outputs in every call, as the workers allocate fresh chunks: the
    # page faults of new memory are part of both sides.
    one = np.float32(1.0)
    single: list[tuple[str, Callable[[], Any]]] = [
        ("np.cbrt", lambda: np.cbrt(host)),
        ("cbrt (cpu backend)", lambda: api.cbrt(host, backend="cpu")),
        ("cbrt (parallel backend)", lambda: api.cbrt(host, backend="parallel")),
        ("cbrt_and_grad (cpu backend)", lambda: api.cbrt_and_grad(host, one, backend="cpu")),
        (
            "cbrt_and_grad (parallel backend)",
            lambda: api.cbrt_and_grad(host, one, backend="parallel"),
        ),
    ]
    for case, func in single:
        rows.append(_dask_row(case, "one process", nbytes, best_time(func, repeat)))
    return rows


def format_dask_rows(rows: list[DaskBenchRow]) -> str:
    """The ``--dask`` table as text.

    Examples
    --------
    >>> print(format_dask_rows([DaskBenchRow("cbrt", "one process", 2.0, 1.0, 2.0)]))
    case  where          GB  seconds  GB/s
    --------------------------------------
    cbrt  one process  2.00    1.000  2.00
    """
    cells = [(r.case, r.where, r.gigabytes, r.seconds, r.gb_per_s) for r in rows]
    header = ("case", "where", "GB", "seconds", "GB/s")
    return _text.table(header, cells, ("", "", ".2f", ".3f", ".2f"))
