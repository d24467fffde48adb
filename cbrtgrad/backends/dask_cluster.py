"""Settings for running cbrtgrad on a ``dask.distributed`` cluster.

Each dask worker runs tasks in its own threads (``threads_per_worker``). The
default chunk kernel (``cpu``) is single-threaded, so a worker uses as many
cores as it has task threads. The ``parallel`` backend's loops start numba's
own threads inside every task: without a cap, ``n_workers x
threads_per_worker x NUMBA_NUM_THREADS`` threads compete for the cores. Cap
numba's threads with the environment of the worker processes, set before
numba starts in them:

* new local clusters: ``LocalCluster(..., env=worker_env(1))``;
* running clusters: ``client.register_plugin(numba_threads_plugin(1))``
  (a nanny plugin: it sets the variable and restarts the workers).

NOTE: ``numba.set_num_threads`` cannot do this from a worker plugin: its value
is per thread, and dask's task threads do not inherit it.

A worker loads each kernel from the on-disk cache (docs/cache.md) on its
first task that needs it: with four workers on two cores, each importing
numba and loading at once, that first task takes seconds.
``client.register_plugin(kernels_plugin())`` loads them while the workers
start instead (and on workers that join later).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ..kernels.kernel_ops import DTYPES, elementary_op

try:  # distributed is optional: only the plugins need it
    from distributed.diagnostics.plugin import WorkerPlugin as _WorkerPlugin
except ImportError:  # pragma: no cover - without distributed
    _WorkerPlugin = object  # type: ignore[assignment,misc]

#: The variable numba reads once, when its threading layer starts.
NUMBA_THREADS_VARIABLE = "NUMBA_NUM_THREADS"


def _check_threads(threads: Any) -> int:
    if isinstance(threads, bool) or not isinstance(threads, int):
        raise TypeError(f"cbrtgrad: threads must be an int, got {type(threads).__name__}")
    if threads < 1:
        raise ValueError(f"cbrtgrad: threads must be >= 1, got {threads}")
    return threads


def default_numba_threads(n_workers: int, threads_per_worker: int = 1) -> int:
    """Return the numba threads per task that keep the workers within this machine's cores.

    Parameters
    ----------
    n_workers : int
        Worker processes on this machine.
    threads_per_worker : int, default 1
        dask threads in each worker.

    Returns
    -------
    int
        ``cpu_count // (n_workers * threads_per_worker)``, at least 1.

    Examples
    --------
    >>> default_numba_threads(10**6) >= 1
    True
    """
    _check_threads(n_workers)
    _check_threads(threads_per_worker)
    cores = os.cpu_count() or 1
    return max(1, cores // (n_workers * threads_per_worker))


def worker_env(threads: int = 1) -> dict[str, str]:
    """The environment that caps numba's threads in new worker processes.

    Parameters
    ----------
    threads : int, default 1
        numba threads per task of the ``parallel`` backend.

    Returns
    -------
    dict
        For ``LocalCluster(env=...)`` (or a nanny's ``env``).

    Raises
    ------
    TypeError, ValueError
        When ``threads`` is not an int >= 1.

    Examples
    --------
    >>> worker_env(2)
    {'NUMBA_NUM_THREADS': '2'}
    """
    return {NUMBA_THREADS_VARIABLE: str(_check_threads(threads))}


def numba_threads_plugin(threads: int = 1) -> Any:
    """A nanny plugin that caps numba's threads on every worker of a running cluster.

    Register it with ``client.register_plugin(...)``; the nannies set
    ``NUMBA_NUM_THREADS`` and restart their workers (data on them is lost), and
    workers that join later get it too.

    Parameters
    ----------
    threads : int, default 1

    Returns
    -------
    distributed.diagnostics.plugin.Environ

    Examples
    --------
    >>> numba_threads_plugin(1).environ
    {'NUMBA_NUM_THREADS': '1'}
    """
    from distributed.diagnostics.plugin import Environ

    return Environ(worker_env(threads))


class KernelsPlugin(_WorkerPlugin):  # type: ignore[misc,valid-type]
    """A worker plugin that loads (or compiles) cbrtgrad's kernels when a worker starts.

    Made by :func:`kernels_plugin`.

    Attributes
    ----------
    ops : tuple of str
    dtypes : tuple of str
    """

    name = "cbrtgrad-kernels"

    def __init__(self, ops: tuple[str, ...], dtypes: tuple[str, ...]) -> None:
        self.ops = ops
        self.dtypes = dtypes

    def setup(self, worker: Any) -> None:
        """Load the kernels in the worker (from the cache when it is warm)."""
        from ..kernels.cpu import catalog as cpu

        for op in self.ops:
            for dtype in self.dtypes:
                cpu.ufunc(op, dtype)


def kernels_plugin(
    ops: Sequence[str] = ("cube_root",), dtypes: Sequence[str] = ("float64",)
) -> KernelsPlugin:
    """A worker plugin that loads the cpu kernels a cluster will run when each worker starts.

    Register it with ``client.register_plugin(...)`` (or pass it to
    ``LocalCluster(plugins=...)``): each worker, and each that joins later,
    loads the single-thread ufuncs of ``ops`` and ``dtypes`` from the on-disk
    cache (compiling them where the cache is cold), so that the cluster's
    first task does not wait for them.

    Parameters
    ----------
    ops : sequence of {"cube_root", "cube_root_grad"}
    dtypes : sequence of {"float32", "float64"}

    Returns
    -------
    KernelsPlugin

    Raises
    ------
    ValueError
        For an unknown op or dtype.

    Examples
    --------
    >>> kernels_plugin(["cube_root", "cube_root_grad"], ["float32"]).ops
    ('cube_root', 'cube_root_grad')
    """
    ops = tuple(ops)
    dtypes = tuple(dtypes)
    for op in ops:
        elementary_op(op, "ops")  # the ops with a ufunc of their own
    for dtype in dtypes:
        if dtype not in DTYPES:
            raise ValueError(f"cbrtgrad: dtypes must be 'float32' or 'float64', got {dtype!r}")
    return KernelsPlugin(ops, dtypes)
