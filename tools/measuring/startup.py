"""``python tools/measure.py startup``: import and first call, each in fresh interpreters.

The same scripts are timed by asv (``asv_benches/benchmarks/bench_startup.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cbrtgrad.verification import text as _text

#: What a fresh interpreter times: ``import cbrtgrad`` (numpy already
#: imported) and the first float64 ``cbrt`` after it. Prints JSON.
STARTUP_SCRIPT = """
import json, time
import numpy as np
start = time.perf_counter()
import cbrtgrad
imported = time.perf_counter()
cbrtgrad.cbrt(np.ones(10))
done = time.perf_counter()
print(json.dumps({"import": imported - start, "first_cbrt": done - imported}))
"""

#: A 4-worker LocalCluster in a fresh interpreter: the time from its workers'
#: start (all four connected) to the first ``cbrt`` of a dask array; with the
#: argument ``plugin``, the workers first load the kernel through
#: :func:`cbrtgrad.backends.dask_cluster.kernels_plugin` (timed apart). Prints JSON.
DASK_STARTUP_SCRIPT = """
import json, sys, time
import numpy as np
import dask.array as da
from distributed import Client, LocalCluster
import cbrtgrad
from cbrtgrad.backends.dask_cluster import default_numba_threads, kernels_plugin, worker_env
start = time.perf_counter()
with LocalCluster(n_workers=4, threads_per_worker=1, processes=True, host="127.0.0.1",
                  dashboard_address=None, env=worker_env(default_numba_threads(4))) as cluster:
    with Client(cluster) as client:
        client.wait_for_workers(4)
        ready = time.perf_counter()
        if sys.argv[1:] == ["plugin"]:
            client.register_plugin(kernels_plugin())
        loaded = time.perf_counter()
        cbrtgrad.cbrt(da.ones(4000, chunks=1000)).compute()
        done = time.perf_counter()
print(json.dumps({"cluster_start": ready - start, "plugin": loaded - ready,
                  "first_result": done - loaded}))
"""


@dataclass
class StartupRow:
    """One start-up case, measured in fresh interpreters (best and worst of ``runs``)."""

    case: str
    cache: str
    best_s: float
    worst_s: float
    runs: int


def run_fresh(
    script: str, cache_dir: str | None, timeout: float = 600.0, args: Sequence[str] = ()
) -> dict[str, float]:
    """Run ``script`` in a fresh interpreter with this cbrtgrad and return the JSON it prints.

    Parameters
    ----------
    script : str
        Python code that prints one JSON object on its last line.
    cache_dir : str or None
        The kernel cache folder (``CBRTGRAD_CACHE_DIR``), or None for no
        cache (``CBRTGRAD_CACHE=0``).
    timeout : float
        Seconds before the run is abandoned.
    args : sequence of str
        The script's command-line arguments.

    Returns
    -------
    dict
    """
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = dict(os.environ)
    import cbrtgrad

    # This process's cbrtgrad, also when it is not the installed one: the folder
    # that holds the package (found from the package, not from this file: the
    # tools of a checkout may measure a cbrtgrad installed elsewhere).
    package_parent = str(Path(cbrtgrad.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_parent, env.get("PYTHONPATH")]))
    if cache_dir is None:
        env["CBRTGRAD_CACHE"] = "0"
    else:
        env["CBRTGRAD_CACHE"] = "1"
        env["CBRTGRAD_CACHE_DIR"] = cache_dir
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"cbrtgrad: the fresh interpreter failed:\n{done.stderr[-2000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def startup_rows(runs: int = 3, dask: bool = False) -> list[StartupRow]:
    """Import time and first-call time in fresh interpreters, with a cold and a warm cache.

    Each case runs ``runs`` times in new processes, with a kernel cache in a
    temporary folder (never the user's): *cold* is an empty folder every
    run, *warm* one that a first, untimed run filled; *off* is
    ``CBRTGRAD_CACHE=0``. With ``dask``, a 4-worker ``LocalCluster`` with a
    warm cache: the seconds from its workers' start to its first result, and
    with :func:`cbrtgrad.backends.dask_cluster.kernels_plugin` registered
    first (its load timed apart).

    Parameters
    ----------
    runs : int
        Fresh interpreters per case.
    dask : bool
        Also the LocalCluster case (needs distributed).

    Returns
    -------
    list of StartupRow
    """
    import shutil
    import tempfile

    if not isinstance(runs, int) or runs < 1:
        raise ValueError(f"cbrtgrad: runs must be a positive integer, got {runs!r}")
    times: dict[tuple[str, str], list[float]] = {}

    def add(case: str, cache: str, seconds: float) -> None:
        times.setdefault((case, cache), []).append(seconds)

    warm = tempfile.mkdtemp(prefix="cbrtgrad-bench-warm-")
    try:
        run_fresh(STARTUP_SCRIPT, warm)  # fills it, untimed
        for _ in range(runs):
            cold = tempfile.mkdtemp(prefix="cbrtgrad-bench-cold-")
            try:
                for label, folder in (("warm", warm), ("cold", cold)):
                    result = run_fresh(STARTUP_SCRIPT, folder)
                    add("import cbrtgrad", label, result["import"])
                    add("first float64 cbrt after import", label, result["first_cbrt"])
            finally:
                shutil.rmtree(cold, ignore_errors=True)
            result = run_fresh(STARTUP_SCRIPT, None)
            add("first float64 cbrt after import", "off", result["first_cbrt"])
            if dask:
                result = run_fresh(DASK_STARTUP_SCRIPT, warm)
                add("dask LocalCluster (4 workers) start", "warm", result["cluster_start"])
                add("dask first cbrt after workers start", "warm", result["first_result"])
                result = run_fresh(DASK_STARTUP_SCRIPT, warm, args=["plugin"])
                add("dask kernels_plugin load on 4 workers", "warm", result["plugin"])
                add("dask first cbrt after the plugin", "warm", result["first_result"])
    finally:
        shutil.rmtree(warm, ignore_errors=True)
    return [
        StartupRow(case, cache, min(seconds), max(seconds), len(seconds))
        for (case, cache), seconds in times.items()
    ]


def format_startup_rows(rows: list[StartupRow]) -> str:
    """The ``--startup`` table as text.

    Examples
    --------
    >>> print(format_startup_rows([StartupRow("import cbrtgrad", "warm", 0.1, 0.2, 3)]))
    case             cache  best s  worst s  runs
    ---------------------------------------------
    import cbrtgrad  warm    0.100    0.200     3
    """
    cells = [(r.case, r.cache, r.best_s, r.worst_s, r.runs) for r in rows]
    header = ("case", "cache", "best s", "worst s", "runs")
    return _text.table(header, cells, ("", "", ".3f", ".3f", "d"))
