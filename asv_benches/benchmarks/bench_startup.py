"""asv benchmarks of start-up, each in a fresh interpreter (asv's ``timeraw_``).

The goals (issue 23, on 2 cores): ``import cbrtgrad`` within 0.25 s; with a
warm kernel cache, the first float64 ``cbrt`` within 1.0 s of the import;
with a cold one, within 0.3x of the time before the cache and the per-dtype
compilation (28 s on a 2-core AMD EPYC, AVX2); a 4-worker dask LocalCluster's
first ``cbrt`` within 2 s of its workers' start. The caches are temporary
folders (never the user's): the warm ones at fixed names under the system's
temporary folder, reused by later runs (their key sub-folders keep them
apart), the cold ones made per run and removed at its exit. ``python
tools/measure.py startup`` measures the same scripts (tools/measuring/startup.py).

NOTE: asv's timeraw_ runs the returned code under ``timeit`` in a new
interpreter, after the returned setup code (untimed).
"""

import importlib.util
import os
import tempfile

import cbrtgrad
from tools.measuring import startup

#: The folder that holds the cbrtgrad this suite imported. NOTE: asv puts
#: ASV_PYTHONPATH on sys.path of its benchmark processes, but the fresh
#: interpreters of timeraw_ do not inherit it: without this they would time
#: whichever cbrtgrad is installed.
_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(cbrtgrad.__file__)))
_PATH = (
    f"import os, sys; sys.path.insert(0, {_PACKAGE_PARENT!r}); "
    f"os.environ['PYTHONPATH'] = {_PACKAGE_PARENT!r}\n"
)
_ENV = _PATH + ("os.environ['CBRTGRAD_CACHE_DIR'] = {folder!r}; os.environ['CBRTGRAD_CACHE'] = '1'")


def _warm_cache():
    # One warm kernel cache for every startup benchmark, filled by a fresh process.
    warm = os.path.join(tempfile.gettempdir(), "cbrtgrad-asv-warm")
    startup.run_fresh(startup.STARTUP_SCRIPT, warm)
    return warm


class Startup:
    # Fresh interpreters: a run compiles (cold) or loads (warm), so one each.
    number = 1
    repeat = 3
    timeout = 600

    def setup_cache(self):
        return _warm_cache()

    def timeraw_import(self, warm):
        return "import cbrtgrad", _PATH + "import numpy"

    def timeraw_first_cbrt_warm_cache(self, warm):
        setup = _ENV.format(folder=warm) + "\nimport numpy as np\nimport cbrtgrad"
        return "cbrtgrad.cbrt(np.ones(10))", setup

    def timeraw_first_cbrt_cold_cache(self, warm):
        # An empty folder of its own every run, removed when the run exits.
        setup = _PATH + (
            "import atexit, os, shutil, tempfile\n"
            "cold = tempfile.mkdtemp(prefix='cbrtgrad-asv-cold-')\n"
            "atexit.register(shutil.rmtree, cold, True)\n"
            "os.environ['CBRTGRAD_CACHE_DIR'] = cold\n"
            "os.environ['CBRTGRAD_CACHE'] = '1'\n"
            "import numpy as np\nimport cbrtgrad"
        )
        return "cbrtgrad.cbrt(np.ones(10))", setup


class DaskClusterStartup:
    number = 1
    repeat = 2
    timeout = 600

    def setup_cache(self):
        return _warm_cache()

    def setup(self, warm):
        if importlib.util.find_spec("distributed") is None:
            raise NotImplementedError("needs distributed")

    def timeraw_first_result_after_workers_start(self, warm):
        # The cluster is started (and all four workers connected) in the
        # untimed setup; the timed code is the first cbrt of a dask array.
        setup = (
            _ENV.format(folder=warm)
            + """
import numpy as np
import dask.array as da
from distributed import Client, LocalCluster
import cbrtgrad
from cbrtgrad.backends.dask_cluster import default_numba_threads, worker_env
cluster = LocalCluster(n_workers=4, threads_per_worker=1, processes=True, host="127.0.0.1",
                       dashboard_address=None, env=worker_env(default_numba_threads(4)))
client = Client(cluster)
client.wait_for_workers(4)
"""
        )
        return "cbrtgrad.cbrt(da.ones(4000, chunks=1000)).compute()", setup

    def timeraw_kernels_plugin_then_first_result(self, warm):
        # The same, with the kernel loaded by the workers' plugin (timed too).
        code, setup = self.timeraw_first_result_after_workers_start(warm)
        plugin = "from cbrtgrad.backends.dask_cluster import kernels_plugin\n"
        return "client.register_plugin(kernels_plugin())\n" + code, setup + plugin
