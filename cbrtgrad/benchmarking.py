"""``cbrtgrad bench``: throughput against anchors measured in the same run.

Every figure comes from :func:`best_time` or :func:`best_times`, the
package's timers (``timeit``'s autorange and repeat): the best of ``repeat``
measurements (the least disturbed by other work on a shared machine), per
call, in ns per element; and every claim is a ratio against an anchor timed
in the same process, its measurements in turns with cbrtgrad's
(:func:`best_times`): ``np.cbrt``, ``scipy.special.cbrt``, the numpy
gradient expression and a memory copy moving the same bytes.
"""

from __future__ import annotations

import functools
import gc
import time
import timeit
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TextIO

import numpy as np
import scipy.special

from . import __version__, _progress, _text, api
from ._isa import host_isa
from .backends import _registry
from .verification import cases, ulp


@dataclass
class BenchRow:
    """One measured case: cbrtgrad against one anchor."""

    kernel: str
    backend: str
    dtype: str
    n: int
    ns_per_element: float
    anchor: str
    anchor_ns_per_element: float
    speedup: float  # anchor time / cbrtgrad time: > 1 means cbrtgrad is faster


#: The shortest measurement: calls are repeated in a row (timeit's autorange
#: counts 1, 2, 5, 10, 20, ...) until one measurement lasts this long, so that
#: the clock's resolution and the loop's overhead vanish beside it.
MEASUREMENT_SECONDS = 1e-3


class _Enough(Exception):
    """Stops :meth:`timeit.Timer.autorange` at :data:`MEASUREMENT_SECONDS` (its own: 0.2 s)."""


def _stop_at_measurement_seconds(number: int, seconds: float) -> None:
    if seconds >= MEASUREMENT_SECONDS:
        raise _Enough(number)


def best_time(
    func: Callable[[], Any],
    repeat: int,
    *,
    number: int | None = None,
    setup: Callable[[], Any] | None = None,
) -> float:
    """Seconds per call of ``func``: the best of ``repeat`` measurements (``timeit``).

    The package's timer (:func:`best_times` takes several functions' in
    turns). ``number`` calls make one measurement; by
    default :meth:`timeit.Timer.autorange` picks it, the fewest of 1, 2, 5,
    10, 20, ... that last :data:`MEASUREMENT_SECONDS`, and its first call is
    the warm-up (compilation, caches); with ``number`` given, one
    measurement is made and dropped as the warm-up instead.

    Parameters
    ----------
    func : callable
        Called with no arguments.
    repeat : int
        Measurements (>= 1); the fastest is kept.
    number : int, optional
        Calls per measurement (default: autorange's).
    setup : callable, optional
        Called before each measurement, untimed (``timeit``'s ``setup``).
        The garbage collector stays on during the measurements.

    Returns
    -------
    float
        The best measurement divided by ``number``.

    Examples
    --------
    >>> best_time(lambda: None, 3) >= 0.0
    True
    >>> best_time(lambda: sum(range(100)), 2, number=10) > 0.0
    True
    """

    def before_each() -> None:
        # timeit turns the garbage collector off while it measures; real
        # callers run with it on (and the dask timing's setup waits for
        # futures to be freed), so it goes back on, as timeit's docs suggest.
        gc.enable()
        if setup is not None:
            setup()

    timer = timeit.Timer(func, setup=before_each)
    if number is None:
        try:
            number = timer.autorange(_stop_at_measurement_seconds)[0]
        except _Enough as enough:
            number = int(enough.args[0])
    else:
        timer.timeit(number)
    return min(timer.repeat(repeat=repeat, number=number)) / number


def best_times(functions: Sequence[Callable[[], Any]], repeat: int) -> list[float]:
    """Seconds per call of each function, their measurements taken in turns.

    :func:`best_time` for several functions at once: each function's
    ``number`` of calls per measurement is found as there (autorange, which
    is also its warm-up), then ``repeat`` rounds each make one measurement
    of every function, in order, and each function keeps its best. A ratio
    of two results is thereby taken from the same stretches of time: on a
    shared machine a slow spell during the measurements of one function
    alone would bias it (measured: ``cbrtgrad bench``'s float64 forward
    against ``np.cbrt`` moved between 0.92x and 1.16x from run to run when
    each was timed in one stretch).

    Parameters
    ----------
    functions : sequence of callables
        Each called with no arguments; at least one.
    repeat : int
        Rounds (>= 1).

    Returns
    -------
    list of float
        Per function, in order, its best measurement divided by its number
        of calls.

    Examples
    --------
    >>> fast, slow = best_times([lambda: None, lambda: sum(range(1000))], 3)
    >>> 0.0 <= fast < slow
    True
    """
    functions = list(functions)
    if not functions:
        raise ValueError("functions: expected at least one callable, got none")
    for index, func in enumerate(functions):
        if not callable(func):
            raise TypeError(f"functions[{index}]: expected a callable, got {type(func).__name__}")
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"repeat: expected an integer >= 1, got {repeat!r}")
    timers = []
    numbers = []
    for func in functions:
        # NOTE: timeit.Timer.timeit turns the garbage collector off for its
        # measurement; the setup turns it back on, as in best_time.
        timer = timeit.Timer(func, setup=gc.enable)
        try:
            number = timer.autorange(_stop_at_measurement_seconds)[0]
        except _Enough as enough:
            number = int(enough.args[0])
        timers.append(timer)
        numbers.append(number)
    best = [float("inf")] * len(functions)
    for _ in range(repeat):
        for index, (timer, number) in enumerate(zip(timers, numbers, strict=True)):
            best[index] = min(best[index], timer.timeit(number) / number)
    return best


def _row(
    kernel: str, backend: str, x: np.ndarray, ours: float, anchor: str, theirs: float
) -> BenchRow:
    n = x.size
    return BenchRow(
        kernel, backend, str(x.dtype), n, ours / n * 1e9, anchor, theirs / n * 1e9, theirs / ours
    )


def forward_rows(dtype: np.dtype, n: int, repeat: int, backend: str = "cpu") -> list[BenchRow]:
    """Forward cube root against ``np.cbrt``, ``scipy.special.cbrt`` and a copy."""
    x = cases.bench_inputs(dtype, n, seed=1)
    out = np.empty_like(x)
    ours, numpy_cbrt, copy = best_times(
        [
            lambda: api.cbrt(x, out=out, backend=backend),
            lambda: np.cbrt(x, out=out),
            lambda: np.copyto(out, x),
        ],
        repeat,
    )
    # scipy's loop is about 25x slower than the others: timed on its own,
    # with fewer measurements, a slow spell moves its ratio little.
    scipy_cbrt = best_time(lambda: scipy.special.cbrt(x, out=out), max(3, repeat // 4))
    return [
        _row("cbrt", backend, x, ours, "np.cbrt", numpy_cbrt),
        _row("cbrt", backend, x, ours, "scipy.special.cbrt", scipy_cbrt),
        _row("cbrt", backend, x, ours, "copy", copy),
    ]


def grad_rows(dtype: np.dtype, n: int, repeat: int, backend: str = "cpu") -> list[BenchRow]:
    """Backward against the numpy expression ``g / (3 * y * y)`` and a copy.

    The copy anchor moves the same bytes as the kernel (two arrays read, one
    written: a copy of 1.5 n elements), so its ratio is the share of copy
    bandwidth.
    """
    y = np.cbrt(cases.bench_inputs(dtype, n, seed=2)).astype(dtype)
    g = np.ones_like(y)
    out = np.empty_like(y)
    src = np.empty(n + n // 2, dtype)
    dst = np.empty_like(src)
    with np.errstate(all="ignore"):
        ours, numpy_expr, copy = best_times(
            [
                lambda: api.cbrt_grad(g, y, out=out, backend=backend),
                lambda: np.divide(g, 3 * y * y, out=out),
                lambda: np.copyto(dst, src),
            ],
            repeat,
        )
    return [
        _row("cbrt_grad", backend, y, ours, "g/(3*y*y)", numpy_expr),
        _row("cbrt_grad", backend, y, ours, "copy same bytes", copy),
    ]


def fused_rows(dtype: np.dtype, n: int, repeat: int, backend: str = "cpu") -> list[BenchRow]:
    """The fused kernel against ``cbrt`` then ``cbrt_grad`` (two calls)."""
    x = cases.bench_inputs(dtype, n, seed=3)
    g = np.ones_like(x)
    y = np.empty_like(x)
    dx = np.empty_like(x)

    def separate() -> None:
        api.cbrt(x, out=y, backend=backend)
        api.cbrt_grad(g, y, out=dx, backend=backend)

    with np.errstate(all="ignore"):
        ours, two = best_times(
            [lambda: api.cbrt_and_grad(x, g, out=(y, dx), backend=backend), separate], repeat
        )
    return [_row("cbrt_and_grad", backend, x, ours, "cbrt + cbrt_grad", two)]


def run(
    sizes: tuple[int, ...] = cases.BENCH_SIZES,
    dtypes: tuple[np.dtype, ...] = cases.DTYPES,
    repeat: int = 20,
    backends: tuple[str, ...] = ("cpu",),
) -> list[BenchRow]:
    """Measure every kernel for every size, dtype and backend.

    Parameters
    ----------
    sizes : tuple of int
        Array sizes.
    dtypes : tuple of numpy.dtype
        float32 and/or float64.
    repeat : int
        Calls per measurement (a quarter of them, at least 3, above 10^6
        elements).
    backends : tuple of str
        Backend names.

    Returns
    -------
    list of BenchRow
        The forward, gradient and fused rows, each against its anchors.

    Examples
    --------
    >>> rows = run(sizes=(1000,), repeat=2)
    >>> sorted({r.anchor for r in rows})[:2]
    ['cbrt + cbrt_grad', 'copy']
    """
    rows: list[BenchRow] = []
    for backend in backends:
        for n in sizes:
            for dtype in dtypes:
                reps = repeat if n <= 1_000_000 else max(3, repeat // 4)
                rows += forward_rows(dtype, n, reps, backend)
                rows += grad_rows(dtype, n, reps, backend)
                rows += fused_rows(dtype, n, reps, backend)
    return rows


HEADER = ("kernel", "backend", "dtype", "n", "ns/elem", "anchor", "ns/elem", "speedup")


def format_rows(rows: list[BenchRow]) -> str:
    """The table as text; ``speedup`` > 1 means cbrtgrad is faster than the anchor.

    Examples
    --------
    >>> row = BenchRow("cbrt", "cpu", "float64", 1000, 1.0, "np.cbrt", 2.0, 2.0)
    >>> print(format_rows([row]))
    kernel  backend  dtype       n  ns/elem  anchor   ns/elem  speedup
    ------------------------------------------------------------------
    cbrt    cpu      float64  1000    1.000  np.cbrt    2.000     2.00
    """
    cells = [
        (r.kernel, r.backend, r.dtype, r.n, r.ns_per_element, r.anchor)
        + (r.anchor_ns_per_element, r.speedup)
        for r in rows
    ]
    return _text.table(HEADER, cells, ("", "", "", "d", ".3f", "", ".3f", ".2f"))


def rows_as_dicts(rows: list[BenchRow]) -> list[dict[str, Any]]:
    """The rows as JSON-ready dicts."""
    return [asdict(r) for r in rows]


# -- vectorised peers (``cbrtgrad bench --peers``) --------------------------------

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
    sizes: tuple[int, ...] = cases.BENCH_SIZES,
    dtypes: tuple[np.dtype, ...] = cases.DTYPES,
    repeat: int = 20,
    sample: int = PEER_ULP_SAMPLE,
    rounds: int = 5,
) -> list[PeerRow]:
    """cbrtgrad's forward (``cpu`` backend, one thread) against every vectorised peer.

    For each dtype and size the same inputs (:func:`cases.bench_inputs`) go
    through ``cbrtgrad.cbrt`` and then each peer of
    :func:`cbrtgrad.peers.find_peers`, in turn; ``rounds`` times over every
    case, so that each case's measurements are spread over the whole run.
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
            x = cases.bench_inputs(dtype, n, seed=1)
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


# -- ns per element against array size (``cbrtgrad bench --plot``) -------------

#: Sizes of the curve: 10 to 10^7 elements, two per decade.
CURVE_SIZES = tuple(int(round(10 ** (k / 2))) for k in range(2, 15))

#: The anchors drawn beside the backends, by label.
CURVE_ANCHORS: dict[str, Callable[..., Any]] = {
    "np.cbrt": np.cbrt,
    "scipy.special.cbrt": scipy.special.cbrt,
}


@dataclass
class CurvePoint:
    """One point of the curve: the forward cube root of ``n`` elements by ``series``."""

    series: str  # "cbrtgrad[<backend>]" or an anchor of CURVE_ANCHORS
    dtype: str
    n: int
    ns_per_element: float


def host_backends() -> tuple[str, ...]:
    """The available backends that compute on numpy arrays (``cuda`` takes device arrays).

    Examples
    --------
    >>> "cpu" in host_backends() and "numpy" in host_backends()
    True
    """
    probe = np.zeros(1)
    return tuple(
        name for name in _registry.available() if _registry.get_backend(name).accepts(probe)
    )


def curve(
    sizes: tuple[int, ...] = CURVE_SIZES,
    dtypes: tuple[np.dtype, ...] = cases.DTYPES,
    repeat: int = 20,
    backends: tuple[str, ...] | None = None,
    *,
    progress: bool = True,
    stream: TextIO | None = None,
) -> list[CurvePoint]:
    """Measure ns per element of the forward for every size, dtype and series.

    The series are cbrtgrad on each backend of ``backends`` (default: every
    available host backend, :func:`host_backends`) and the anchors
    ``np.cbrt`` and ``scipy.special.cbrt``, all writing into a preallocated
    ``out``; each point is the best of ``repeat`` measurements (fewer above
    10^6 elements, as in :func:`run`).

    Parameters
    ----------
    sizes : tuple of int
        Array sizes, each >= 1.
    dtypes : tuple of numpy.dtype
        float32 and/or float64.
    repeat : int
        Measurements per point (>= 1).
    backends : tuple of str, optional
        Backend names; each must be available and take numpy arrays.
    progress : bool, default True
        Draw a progress bar on ``stream`` (default stderr) while measuring.
    stream : file-like, optional
        Where the progress bar goes.

    Returns
    -------
    list of CurvePoint

    Raises
    ------
    ValueError
        For an empty or non-positive ``sizes``, ``repeat < 1``, or a backend
        that does not take numpy arrays.

    Examples
    --------
    >>> points = curve(sizes=(100,), dtypes=(np.dtype(np.float64),), repeat=1,
    ...                backends=("cpu",), progress=False)
    >>> [(p.series, p.n) for p in points]
    [('cbrtgrad[cpu]', 100), ('np.cbrt', 100), ('scipy.special.cbrt', 100)]
    """
    if not sizes or any(not isinstance(n, int) or n < 1 for n in sizes):
        raise ValueError(f"cbrtgrad: sizes must be positive ints, got {sizes!r}")
    if not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"cbrtgrad: repeat must be an int >= 1, got {repeat!r}")
    names = host_backends() if backends is None else tuple(backends)
    probe = np.zeros(1)
    for name in names:
        if not _registry.get_backend(name).accepts(probe):
            raise ValueError(
                f"cbrtgrad: backend {name!r} does not take numpy arrays, so it has no place "
                "on this curve (tools/gpu_check.py measures the cuda backend on the device)"
            )
    total = len(sizes) * len(dtypes) * (len(names) + len(CURVE_ANCHORS))
    points: list[CurvePoint] = []
    with _progress.bar(total, enabled=progress, stream=stream) as advance:
        for n in sizes:
            reps = repeat if n <= 1_000_000 else max(1, min(repeat, 5))
            for dtype in dtypes:
                x = cases.bench_inputs(dtype, n, seed=1)
                out = np.empty_like(x)
                timed: list[tuple[str, Callable[[], Any]]] = [
                    (f"cbrtgrad[{name}]", functools.partial(api.cbrt, x, out=out, backend=name))
                    for name in names
                ]
                timed += [
                    (label, functools.partial(f, x, out=out)) for label, f in CURVE_ANCHORS.items()
                ]
                for series, func in timed:
                    seconds = best_time(func, reps)
                    points.append(CurvePoint(series, str(dtype), n, seconds / n * 1e9))
                    advance(1)
    return points


def format_curve(points: list[CurvePoint]) -> str:
    """The curve as a table: one row per dtype and size, one column per series (ns/elem).

    Examples
    --------
    >>> print(format_curve([CurvePoint("np.cbrt", "float64", 10, 1.5)]))
    dtype     n  np.cbrt
    --------------------
    float64  10    1.500
    """
    series = list(dict.fromkeys(p.series for p in points))
    table: dict[tuple[str, int], dict[str, float]] = {}
    for p in points:
        table.setdefault((p.dtype, p.n), {})[p.series] = p.ns_per_element
    cells = [(dtype, n, *(row.get(s, "") for s in series)) for (dtype, n), row in table.items()]
    formats = ("", "d", *(".3f" for _ in series))
    return _text.table(("dtype", "n", *series), cells, formats)


def curve_as_dicts(points: list[CurvePoint]) -> list[dict[str, Any]]:
    """The curve points as JSON-ready dicts."""
    return [asdict(p) for p in points]


# -- dask ---------------------------------------------------------------------------


@dataclass
class DaskBenchRow:
    """One measured case of ``cbrtgrad bench --dask``: throughput over the input's bytes."""

    case: str
    where: str
    gigabytes: float
    seconds: float
    gb_per_s: float


def _dask_row(case: str, where: str, nbytes: int, seconds: float) -> DaskBenchRow:
    return DaskBenchRow(case, where, nbytes / 1e9, seconds, nbytes / 1e9 / seconds)


def _still_known(keys: list[Any], dask_scheduler: Any = None) -> bool:
    return any(k in dask_scheduler.tasks for k in keys)


def _warm_worker() -> None:
    # Compile (or load) the float32 chunk kernels once per worker, outside the timings.
    from .kernels import cpu

    cpu.ufunc("cube_root", np.float32)
    cpu.ufunc("cube_root_grad", np.float32)


def _measure_on_cluster(
    client: Any, rows: list[DaskBenchRow], n: int, nbytes: int, chunk: int, repeat: int
) -> np.ndarray:
    """Append the cluster rows; return the input, fetched into this process."""
    import dask.array as da
    from distributed import futures_of, wait

    n_workers = len(client.scheduler_info()["workers"])
    client.run(_warm_worker)
    x = da.random.default_rng(1).standard_normal(n, chunks=chunk, dtype=np.float32) * 1e3
    # NOTE: float32 normal samples are exactly 0 about once in 2^23 draws; the
    # gradient there is inf, with a divide-by-zero warning from every worker.
    x = da.where(x == 0, np.float32(1.0), x)
    x = client.persist(x)
    wait(x)

    def on_cluster(make: Callable[[], Any]) -> float:
        # The same graph has the same keys every time: before the next run,
        # the previous result must be gone from the scheduler (else persist
        # finds it there). That wait is the timer's untimed setup.
        held: list[Any] = []

        def run() -> None:
            result = client.persist(make())
            wait(result)
            held.append(result)

        def release() -> None:
            if held:
                # The client releases the keys once no future holds them.
                keys = [f.key for f in futures_of(held.pop())]
                while client.run_on_scheduler(_still_known, keys):
                    time.sleep(0.01)

        seconds = best_time(run, repeat, number=1, setup=release)
        release()
        return seconds

    where = f"dask, {n_workers} workers"
    rows.append(
        _dask_row(
            "np.cbrt per chunk",
            where,
            nbytes,
            on_cluster(lambda: da.map_blocks(np.cbrt, x, dtype=np.float32)),
        )
    )
    rows.append(_dask_row("cbrt", where, nbytes, on_cluster(lambda: api.cbrt(x))))
    rows.append(
        _dask_row(
            "cbrt_and_grad",
            where,
            nbytes,
            on_cluster(lambda: list(api.cbrt_and_grad(x, np.float32(1.0)))),
        )
    )
    host: np.ndarray = client.compute(x).result()
    return host


def dask_rows(
    gigabytes: float = 2.0,
    n_workers: int = 2,
    chunk_mib: int = 64,
    repeat: int = 3,
    client: Any = None,
) -> list[DaskBenchRow]:
    """A float32 array of ``gigabytes`` chunk by chunk on a local cluster, against numpy.

    The data are made on the workers and kept there (``persist``); each
    timing persists the result and waits for it, so it measures the
    kernels and the scheduler, not the transfer back. The same data, fetched
    into this process, are then timed with ``np.cbrt`` and cbrtgrad's own
    numpy path, allocating their results as the workers do. Workers run one
    task thread each, with numba threads capped
    (:func:`cbrtgrad.backends.dask_cluster.worker_env`).

    Parameters
    ----------
    gigabytes : float
        Size of the input (10^9 bytes).
    n_workers : int
        Worker processes of the ``distributed.LocalCluster``.
    chunk_mib : int
        Chunk size in MiB.
    repeat : int
        Timings per case; the best is kept.
    client : distributed.Client, optional
        Measure on this client's cluster instead of starting a local one
        (``n_workers`` is then ignored).

    Returns
    -------
    list of DaskBenchRow
    """
    from distributed import Client, LocalCluster

    from .backends.dask_cluster import default_numba_threads, worker_env

    if not gigabytes > 0:
        raise ValueError(f"cbrtgrad: gigabytes must be > 0, got {gigabytes}")
    n = int(gigabytes * 1e9) // 4
    nbytes = n * 4
    chunk = max(1, chunk_mib * 2**20 // 4)
    rows: list[DaskBenchRow] = []
    if client is None:
        cluster = LocalCluster(
            n_workers=n_workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            env=worker_env(default_numba_threads(n_workers)),
        )
        with cluster, Client(cluster) as own:
            host = _measure_on_cluster(own, rows, n, nbytes, chunk, repeat)
    else:
        host = _measure_on_cluster(client, rows, n, nbytes, chunk, repeat)
    # Fresh outputs in every call, as the workers allocate fresh chunks: the
    # page faults of new memory are part of both sides.
    one = np.float32(1.0)
    single: list[tuple[str, Callable[[], Any]]] = [
        ("np.cbrt", lambda: np.cbrt(host)),
        ("cbrt (cpu backend)", lambda: api.cbrt(host, backend="cpu")),
        ("cbrt (parallel backend)", lambda: api.cbrt(host, backend="parallel")),
        ("cbrt_and_grad (cpu backend)", lambda: api.cbrt_and_grad(host, one, backend="cpu")),
        (
            "cbrt_and_grad (parallel backend)",
            lambda: api.cbrt_and_grad(host, one, backend="parallel"),
        ),
    ]
    for case, func in single:
        rows.append(_dask_row(case, "one process", nbytes, best_time(func, repeat)))
    return rows


def format_dask_rows(rows: list[DaskBenchRow]) -> str:
    """The ``--dask`` table as text.

    Examples
    --------
    >>> print(format_dask_rows([DaskBenchRow("cbrt", "one process", 2.0, 1.0, 2.0)]))
    case  where          GB  seconds  GB/s
    --------------------------------------
    cbrt  one process  2.00    1.000  2.00
    """
    cells = [(r.case, r.where, r.gigabytes, r.seconds, r.gb_per_s) for r in rows]
    header = ("case", "where", "GB", "seconds", "GB/s")
    return _text.table(header, cells, ("", "", ".2f", ".3f", ".2f"))


# -- start-up (``cbrtgrad bench --startup``, asv_benches/benchmarks/bench_startup.py) --

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
    # This process's cbrtgrad, also when it is not the installed one.
    package_parent = str(Path(__file__).resolve().parent.parent)
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
