"""Test-session set-up shared by every test module.

NOTE: CUDA kernels are tested under numba's CUDA simulator on machines without
a GPU. The variable must be set before anything imports ``numba.cuda``; a
machine with a GPU can run the real thing with ``NUMBA_ENABLE_CUDASIM=0``.

Hypothesis profiles: ``ci`` (chosen when ``CI`` is set) is derandomized, so a
CI failure replays on any machine; ``dev`` draws fresh examples each run.
Neither has a deadline: the machines are shared and the first call of a
kernel compiles it. ``HYPOTHESIS_PROFILE`` picks one explicitly.

Tests marked ``slow`` (minutes: the exhaustive float32 sweep, the bounded
fuzz run, the 10^5-cycle memory loops, the whole asv suite) are skipped by
default, so that ``python -m pytest`` stays within a few minutes on 2 cores.
``python -m pytest -m slow`` runs only them (the nightly run), ``--run-slow``
everything; any ``-m`` expression decides by itself. They are skipped rather
than deselected, so a file of slow tests alone still collects (no exit 5).

Tests that touch numpy's cube root (a ``numpy`` backend parameter, or numpy
in the name) are marked ``numpy_cbrt``: on an AVX-512 CPU ``.ci/run`` runs them
once more with numpy dispatching as on AVX2, where ``np.cbrt`` is libm, not SVML.
Tests marked ``built_docs`` read the site ``.ci/run`` builds and are skipped
without it.

The kernel cache of a test run is set up in the repository's root
``conftest.py`` (which also covers the doctests in ``cbrtgrad/``).
"""

import os

import pytest
from hypothesis import HealthCheck, settings

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

_QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large]
settings.register_profile("ci", derandomize=True, deadline=None, suppress_health_check=_QUIET)
settings.register_profile("dev", deadline=None, suppress_health_check=_QUIET)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--run-slow",
        action="store_true",
        default=False,
        help="also run the tests marked slow (skipped by default; -m slow runs only them)",
    )


def _touches_numpy_cbrt(item: pytest.Item) -> bool:
    # A test of the ``numpy`` backend (a parameter), or one named for numpy's cube root.
    params = getattr(getattr(item, "callspec", None), "params", {})
    name = item.name.lower()
    backend = any(isinstance(v, str) and v == "numpy" for v in params.values())
    return backend or "numpy" in name or "np_cbrt" in name


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    numpy_cbrt = pytest.mark.numpy_cbrt
    no_site = pytest.mark.skip(
        reason="needs the site .ci/run's docs step builds (CBRTGRAD_DOCS_HTML)"
    )
    for item in items:
        if _touches_numpy_cbrt(item):
            item.add_marker(numpy_cbrt)
        if item.get_closest_marker("built_docs") and not os.environ.get("CBRTGRAD_DOCS_HTML"):
            item.add_marker(no_site)
    if config.getoption("--run-slow") or config.getoption("markexpr"):
        return
    skip = pytest.mark.skip(reason="slow: run with `python -m pytest -m slow` or --run-slow")
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(skip)
