"""``cbrtgrad bench``: what a user measures the package on their own machine with.

Nothing in the core (kernels, backends, api, engine, verification) imports
this package, and ``import cbrtgrad`` loads none of it: the ``bench`` command
(:mod:`cbrtgrad.cli.main`), asv (``asv_benches/``) and ``tools/`` import the
module they need. The measuring code behind the docs' tables and figures
(peers, curves, dask, startup, the bridges, the GPU) is not shipped: it is
``tools/measuring/``, run by ``python tools/measure.py``.

- :mod:`~cbrtgrad.cli.bench.timing`: the timer, :func:`~cbrtgrad.cli.bench.timing.best_time`
  and :func:`~cbrtgrad.cli.bench.timing.best_times` (several functions in turns).
- :mod:`~cbrtgrad.cli.bench.inputs`: the inputs and sizes of every speed measurement.
- :mod:`~cbrtgrad.cli.bench.anchors`: ``cbrtgrad bench``, each kernel against
  ``np.cbrt``, ``scipy.special.cbrt``, the numpy gradient and a copy.
- :mod:`~cbrtgrad.cli.bench.engine`: ``bench --engine``, the graph engine's overhead.
- :mod:`~cbrtgrad.cli.bench.calls`: ``bench --calls``, what a small call costs.
"""
