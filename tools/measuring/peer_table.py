"""``python tools/measure.py peers``: the forward against every vectorised peer, with its ulp error.

The peers themselves (found, loaded and called) are in :mod:`tools.measuring.peers`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from cbrtgrad import __version__, api
from cbrtgrad.build.isa import host_isa
from cbrtgrad.cli.bench.inputs import BENCH_SIZES, bench_inputs
from cbrtgrad.cli.bench.timing import best_time
from cbrtgrad.verification import text as _text
from cbrtgrad.verification import ulp
from cbrtgrad.verification.cases import DTYPES

#: Inputs per case whose error is measured against mpmath (an even stride).
PEER_ULP_SAMPLE = 2000

#: What the rows of cbrtgrad itself are called in the peer table.
OURS = "cbrtgrad.cbrt (cpu backend)"


@dataclass
class PeerRow:
    """One implementation of the forward cube root on one case of the peer table.

    ``ratio`` is the peer's time over cbrtgrad's on the same inputs in the same
    run (> 1 means cbrtgrad is faster); ``max_ulp`` is the largest error on
    :data:`PEER_ULP_SAMPLE` of those inputs against mpmath at 200 bits. An
    absent peer has no figures and says why in ``absent``.
    """

    implementation: str
    library: str
    dtype: str
    n: int
    threads: int | None
    ns_per_element: float | None
    ratio: float | None
    max_ulp: float | None
    absent: str = ""


def max_ulp_error(x: np.ndarray, y: np.ndarray, sample: int = PEER_ULP_SAMPLE) -> float:
    """Largest error in ulp of ``y = cbrt(x)`` over ``sample`` evenly spaced elements.

    The reference is the exact cube root (mpmath at 200 bits,
    :mod:`cbrtgrad.verification.ulp`); ``x`` and ``y`` must be finite there.

    Examples
    --------
    >>> x = np.array([8.0, 2.0]); y = np.array([2.0, 1.2599210498948732])
    >>> max_ulp_error(x, y) < 0.5
    True
    """
    picks = np.unique(np.linspace(0, x.size - 1, min(sample, x.size)).astype(np.intp))
    return float(ulp.mpmath_ulp_errors(x.ravel()[picks], y.ravel()[picks], ulp.cbrt_exact).max())


@dataclass
class _PeerCase:
    """One dtype and size of the peer table while it is measured."""

    dtype: np.dtype
    n: int
    reps: int
    x: np.ndarray
    out: np.ndarray
    found: list[Any]  # every peer of the dtype, available or not
    calls: list[tuple[str, Callable[[], Any]]]  # (label, call): cbrtgrad's, then each peer's
    times: dict[str, list[float]]  # label -> one best time per round


def peer_rows(
    sizes: tuple[int, ...] = BENCH_SIZES,
    dtypes: tuple[np.dtype, ...] = DTYPES,
    repeat: int = 20,
    sample: int = PEER_ULP_SAMPLE,
    rounds: int = 5,
) -> list[PeerRow]:
    """cbrtgrad's forward (``cpu`` backend, one thread) against every vectorised peer.

    For each dtype and size the same inputs
    (:func:`cbrtgrad.cli.bench.inputs.bench_inputs`) go through ``cbrtgrad.cbrt``
    and then each peer of :func:`tools.measuring.peers.find_peers`, in turn;
    ``rounds`` times over every case, so that each case's measurements are
    spread over the whole run.
    Each time is the best over the rounds of the best of ``repeat``
    measurements (a quarter, at least 3, above 10^6 elements), each error the
    largest over ``sample`` of the results. Absent peers get a row with the
    reason and no figures.

    Parameters
    ----------
    sizes : tuple of int
        Array sizes.
    dtypes : tuple of numpy.dtype
        float32 and/or float64.
    repeat : int
        Calls per measurement.
    sample : int
        Results per case checked against mpmath.
    rounds : int
        Turns over every case of cbrtgrad and every peer (>= 1).

    Returns
    -------
    list of PeerRow
        Per dtype and size: cbrtgrad's row, then one per peer.

    Examples
    --------
    >>> rows = peer_rows(sizes=(100,), dtypes=(np.dtype(np.float64),), repeat=1, sample=10,
    ...                  rounds=1)
    >>> rows[0].implementation, rows[0].ratio
    ('cbrtgrad.cbrt (cpu backend)', 1.0)
    >>> all((r.ns_per_element is None) == bool(r.absent) for r in rows)
    True
    """
    from . import peers

    if not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be an integer >= 1, got {rounds!r}")

    all_cases = []
    for dtype in dtypes:
        found = peers.find_peers(dtype)
        for n in sizes:
            x = bench_inputs(dtype, n, seed=1)
            out = np.empty_like(x)
            calls: list[tuple[str, Callable[[], Any]]] = [
                (OURS, functools.partial(api.cbrt, x, out=out, backend="cpu"))
            ]
            calls += [(p.label, p.timed_call(x, out)) for p in found if p.available]
            for _, call in calls:
                call()  # compiled, loaded and with its pages touched before any timing
            reps = repeat if n <= 1_000_000 else max(3, repeat // 4)
            all_cases.append(
                _PeerCase(dtype, n, reps, x, out, found, calls, {key: [] for key, _ in calls})
            )
    # NOTE: every case's turns are spread over the whole run, each a turn of
    # cbrtgrad and then of every peer: on a shared machine the speed of the
    # same call moves by 20 % within a minute, for seconds at a time (seen:
    # 2.4 to 3.0 ns per element), and the best of measurements taken in one
    # stretch would give ratios of whatever happened to run beside it.
    for _ in range(rounds):
        for case in all_cases:
            for key, call in case.calls:
                case.times[key].append(best_time(call, case.reps))
    rows: list[PeerRow] = []
    for case in all_cases:
        dtype, n, x, out = case.dtype, case.n, case.x, case.out
        api.cbrt(x, out=out, backend="cpu")
        ours = min(case.times[OURS])
        name = f"cbrtgrad {__version__}"
        ours_ulp = max_ulp_error(x, out, sample)
        rows.append(PeerRow(OURS, name, str(dtype), n, 1, ours / n * 1e9, 1.0, ours_ulp))
        for peer in case.found:
            start = (peer.label, peer.library, str(dtype), n)
            if not peer.available:
                rows.append(PeerRow(*start, None, None, None, None, peer.reason))
                continue
            theirs = min(case.times[peer.label])
            out.fill(np.nan)
            peer.f(x, out)
            figures = (theirs / n * 1e9, theirs / ours, max_ulp_error(x, out, sample))
            rows.append(PeerRow(*start, peer.threads_on(x), *figures))
    return rows


def format_peer_rows(rows: list[PeerRow], host: str | None = None) -> str:
    """The peer table as text, under a line naming the CPU and its vector ISA.

    ``peer/ours`` > 1 means cbrtgrad is faster than that peer.

    Examples
    --------
    >>> rows = [PeerRow(OURS, "cbrtgrad", "float64", 10, 1, 2.0, 1.0, 0.5),
    ...         PeerRow("jax", "jax", "float64", 10, None, None, None, None, "no jax")]
    >>> print(format_peer_rows(rows, host="AMD EPYC (znver3); AVX2, FMA, 256-bit vectors"))
    CPU: AMD EPYC (znver3); AVX2, FMA, 256-bit vectors
    dtype     n  implementation               threads  ns/elem  peer/ours  max ulp
    ------------------------------------------------------------------------------
    float64  10  cbrtgrad.cbrt (cpu backend)        1    2.000       1.00    0.500
    float64  10  jax                                -        -          -        -  absent: no jax
    """
    header = ("dtype", "n", "implementation", "threads", "ns/elem", "peer/ours", "max ulp", "")
    cells: list[tuple[object, ...]] = []
    for r in rows:
        start = (r.dtype, r.n, r.implementation)
        if r.ns_per_element is None or r.ratio is None or r.max_ulp is None:
            cells.append((*start, "-", "-", "-", "-", f"absent: {r.absent}"))
        else:
            cells.append((*start, r.threads, r.ns_per_element, r.ratio, r.max_ulp, ""))
    cpu = host if host is not None else host_isa().describe()
    formats = ("", "d", "", "d", ".3f", ".2f", ".3f", "")
    return f"CPU: {cpu}\n" + _text.table(header, cells, formats)


def peer_rows_as_dict(rows: list[PeerRow]) -> dict[str, Any]:
    """The peer table as a JSON-ready dict: the CPU line and the rows."""
    return {"cpu": host_isa().describe(), "rows": [asdict(r) for r in rows]}
