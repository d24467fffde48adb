"""Deprecated: the measuring code moved to :mod:`cbrtgrad.bench` (issue 25).

Every public name of this module still works, as the same object, with a
``DeprecationWarning`` that names its new module: the timers are in
:mod:`cbrtgrad.bench.timing`, ``run`` and the anchor table in
:mod:`cbrtgrad.bench.anchors`, ``peer_rows`` in
:mod:`cbrtgrad.bench.peer_table`, ``curve`` and ``host_backends`` in
:mod:`cbrtgrad.bench.curves`, ``dask_rows`` in :mod:`cbrtgrad.bench.dask_table`
and ``startup_rows`` in :mod:`cbrtgrad.bench.startup`.
"""

from .bench._moved import redirect

__getattr__, __all__ = redirect(
    __name__,
    {
        "cbrtgrad.bench.timing": ["MEASUREMENT_SECONDS", "best_time", "best_times"],
        "cbrtgrad.bench.anchors": [
            "BenchRow",
            "HEADER",
            "format_rows",
            "forward_rows",
            "fused_rows",
            "grad_rows",
            "rows_as_dicts",
            "run",
        ],
        "cbrtgrad.bench.peer_table": [
            "OURS",
            "PEER_ULP_SAMPLE",
            "PeerRow",
            "format_peer_rows",
            "max_ulp_error",
            "peer_rows",
            "peer_rows_as_dict",
        ],
        "cbrtgrad.bench.curves": [
            "CURVE_ANCHORS",
            "CURVE_SIZES",
            "CurvePoint",
            "curve",
            "curve_as_dicts",
            "format_curve",
            "host_backends",
        ],
        "cbrtgrad.bench.dask_table": ["DaskBenchRow", "dask_rows", "format_dask_rows"],
        "cbrtgrad.bench.startup": [
            "DASK_STARTUP_SCRIPT",
            "STARTUP_SCRIPT",
            "StartupRow",
            "format_startup_rows",
            "run_fresh",
            "startup_rows",
        ],
    },
)
