"""The measuring code behind the docs' tables and figures (issue 34: out of the package).

``cbrtgrad bench`` keeps what a user measures their own machine with
(:mod:`cbrtgrad.cli.bench`: the anchor table, ``--engine`` and ``--calls``, and
the timer and inputs every measurement shares); the rest lives here, run by
``python tools/measure.py`` (its subcommands name the modules), by
``docs/make_plots.py``, by ``tools/gpu_check.py`` and by asv. Not shipped:
nothing in ``cbrtgrad`` imports it.

- :mod:`~tools.measuring.peers` and :mod:`~tools.measuring.peer_table`:
  ``peers``, the vectorised peers (libmvec, SLEEF, jax, numpy's SVML);
  :mod:`~tools.measuring.vector_abi` calls libmvec's and SLEEF's functions.
- :mod:`~tools.measuring.curves` and :mod:`~tools.measuring.plotting`:
  ``plot``, ns per element against array size, and its figure.
- :mod:`~tools.measuring.dask_table`: ``dask``, a dask cluster against numpy.
- :mod:`~tools.measuring.startup`: ``startup``, import and first call in
  fresh interpreters.
- :mod:`~tools.measuring.jax_rows`: ``jax``, the JAX bridge against ``jnp.cbrt``.
- :mod:`~tools.measuring.mlx_rows`: ``mlx``, the MLX bridge against MLX's ops
  and ``cbrtgrad.cbrt``; :mod:`~tools.measuring.mlx_threads`: ``mlx-threads``,
  its loops on one thread and on numba's threads, per call, on busy cores.
- :mod:`~tools.measuring.pytorch`: ``torch``, the PyTorch bridge against PyTorch.
- :mod:`~tools.measuring.numba_loops`: ``numba``, :mod:`cbrtgrad.numba` in
  a user's own ``@njit`` loops against numba's ``np.cbrt`` and ``pow``.
- :mod:`~tools.measuring.gpu`: the cuda backend on a GPU (``cuda``,
  ``tools/gpu_check.py``).
"""
