"""``cbrtgrad bench``: what a user measures the package on their own machine with.

Nothing in the core (kernels, backends, api, engine, verification) imports
this package, and ``import cbrtgrad`` loads none of it: the ``bench`` command
(:mod:`cbrtgrad.cli`), asv (``asv_benches/``) and ``tools/`` import the
module they need. The measuring code behind the docs' tables and figures
(peers, curves, dask, startup, the bridges, the GPU) is not shipped: it is
``tools/measuring/``, run by ``python tools/measure.py`` (issue 34).

- :mod:`~cbrtgrad.bench.timing`: the timer, :func:`~cbrtgrad.bench.timing.best_time`
  and :func:`~cbrtgrad.bench.timing.best_times` (several functions in turns).
- :mod:`~cbrtgrad.bench.inputs`: the inputs and sizes of every speed measurement.
- :mod:`~cbrtgrad.bench.anchors`: ``cbrtgrad bench``, each kernel against
  ``np.cbrt``, ``scipy.special.cbrt``, the numpy gradient and a copy.
- :mod:`~cbrtgrad.bench.engine`: ``bench --engine``, the graph engine's overhead.
- :mod:`~cbrtgrad.bench.calls`: ``bench --calls``, what a small call costs.
"""
