"""The measuring code: ``cbrtgrad bench`` and what the docs' tables and figures come from.

Nothing in the core (kernels, backends, api, engine, verification) imports
this package, and ``import cbrtgrad`` loads none of it: the ``bench`` command
(:mod:`cbrtgrad.cli`), asv (``asv_benches/``), ``tools/`` and
``docs/make_plots.py`` import the module they need.

- :mod:`~cbrtgrad.bench.timing`: the timer, :func:`~cbrtgrad.bench.timing.best_time`
  and :func:`~cbrtgrad.bench.timing.best_times` (several functions in turns).
- :mod:`~cbrtgrad.bench.inputs`: the inputs and sizes of every speed measurement.
- :mod:`~cbrtgrad.bench.anchors`: ``cbrtgrad bench``, each kernel against
  ``np.cbrt``, ``scipy.special.cbrt``, the numpy gradient and a copy.
- :mod:`~cbrtgrad.bench.peers` and :mod:`~cbrtgrad.bench.peer_table`:
  ``bench --peers``, the vectorised peers (libmvec, SLEEF, jax, numpy's SVML).
- :mod:`~cbrtgrad.bench.curves` and :mod:`~cbrtgrad.bench.plotting`:
  ``bench --plot``, ns per element against array size, and its figure.
- :mod:`~cbrtgrad.bench.dask_table`: ``bench --dask``, a dask cluster against numpy.
- :mod:`~cbrtgrad.bench.startup`: ``bench --startup``, import and first call
  in fresh interpreters.
- :mod:`~cbrtgrad.bench.engine`: ``bench --engine``, the graph engine's overhead.
- :mod:`~cbrtgrad.bench.jax_rows`: ``bench --engine``'s rows for the JAX bridge
  against ``jnp.cbrt`` (where jax is installed).
- :mod:`~cbrtgrad.bench.numba_loops`: ``bench --numba``, :mod:`cbrtgrad.numba`
  in a user's own ``@njit`` loops against numba's ``np.cbrt`` and ``pow``.
- :mod:`~cbrtgrad.bench.gpu`: the cuda backend on a GPU (``bench --backends
  cuda``, ``tools/gpu_check.py``).
"""
