"""``cbrtgrad bench``: throughput against anchors measured in the same run.

Every figure is the best of ``repeat`` calls (the least disturbed by other
work on a shared machine) in ns per element, and every claim is a ratio
against an anchor timed in the same process a moment before: ``np.cbrt``,
``scipy.special.cbrt``, the numpy gradient expression and a memory copy
moving the same bytes.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, TextIO

import numpy as np
import scipy.special

from . import _progress, api
from .backends import _registry
from .verification import cases


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


def best_time(func: Callable[[], Any], repeat: int) -> float:
    """Best wall time of ``repeat`` calls of ``func`` (after one warm-up call).

    Examples
    --------
    >>> best_time(lambda: None, 3) >= 0.0
    True
    """
    func()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        best = min(best, time.perf_counter() - start)
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
    x = cases.random_inputs(dtype, n, seed=1)
    x = x / np.abs(x).max() * 1e6  # keep the typical magnitudes of real data
    out = np.empty_like(x)
    ours = best_time(lambda: api.cbrt(x, out=out, backend=backend), repeat)
    rows = [
        _row("cbrt", backend, x, ours, "np.cbrt", best_time(lambda: np.cbrt(x, out=out), repeat)),
        _row(
            "cbrt",
            backend,
            x,
            ours,
            "scipy.special.cbrt",
            best_time(lambda: scipy.special.cbrt(x, out=out), max(3, repeat // 4)),
        ),
        _row("cbrt", backend, x, ours, "copy", best_time(lambda: np.copyto(out, x), repeat)),
    ]
    return rows


def grad_rows(dtype: np.dtype, n: int, repeat: int, backend: str = "cpu") -> list[BenchRow]:
    """Backward against the numpy expression ``g / (3 * y * y)`` and a copy.

    The copy anchor moves the same bytes as the kernel (two arrays read, one
    written: a copy of 1.5 n elements), so its ratio is the share of copy
    bandwidth.
    """
    y = np.cbrt(cases.random_inputs(dtype, n, seed=2)).astype(dtype)
    g = np.ones_like(y)
    out = np.empty_like(y)
    with np.errstate(all="ignore"):
        ours = best_time(lambda: api.cbrt_grad(g, y, out=out, backend=backend), repeat)
        numpy_expr = best_time(lambda: np.divide(g, 3 * y * y, out=out), repeat)
    src = np.empty(n + n // 2, dtype)
    dst = np.empty_like(src)
    copy = best_time(lambda: np.copyto(dst, src), repeat)
    return [
        _row("cbrt_grad", backend, y, ours, "g/(3*y*y)", numpy_expr),
        _row("cbrt_grad", backend, y, ours, "copy same bytes", copy),
    ]


def fused_rows(dtype: np.dtype, n: int, repeat: int, backend: str = "cpu") -> list[BenchRow]:
    """The fused kernel against ``cbrt`` then ``cbrt_grad`` (two calls)."""
    x = cases.random_inputs(dtype, n, seed=3)
    x = x / np.abs(x).max() * 1e6
    g = np.ones_like(x)
    y = np.empty_like(x)
    dx = np.empty_like(x)

    def separate() -> None:
        api.cbrt(x, out=y, backend=backend)
        api.cbrt_grad(g, y, out=dx, backend=backend)

    with np.errstate(all="ignore"):
        ours = best_time(lambda: api.cbrt_and_grad(x, g, out=(y, dx), backend=backend), repeat)
        two = best_time(separate, repeat)
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


HEADER = (
    f"{'kernel':<14}{'backend':<10}{'dtype':<9}{'n':>10}{'ns/elem':>10}  "
    f"{'anchor':<20}{'ns/elem':>10}{'speedup':>9}"
)


def format_rows(rows: list[BenchRow]) -> str:
    """The table as text; ``speedup`` > 1 means cbrtgrad is faster than the anchor."""
    lines = [HEADER, "-" * len(HEADER)]
    for r in rows:
        lines.append(
            f"{r.kernel:<14}{r.backend:<10}{r.dtype:<9}{r.n:>10}{r.ns_per_element:>10.3f}  "
            f"{r.anchor:<20}{r.anchor_ns_per_element:>10.3f}{r.speedup:>9.2f}"
        )
    return "\n".join(lines)


def rows_as_dicts(rows: list[BenchRow]) -> list[dict[str, Any]]:
    """The rows as JSON-ready dicts."""
    return [asdict(r) for r in rows]


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


def _per_call(func: Callable[[], Any], repeat: int) -> float:
    # A call on a small array takes about a microsecond, near the clock's
    # resolution: time enough calls in a row that one measurement lasts some
    # 20 us, and fewer measurements where a call is slow (the parallel
    # backend's threads can take milliseconds to wake on a loaded machine), so
    # that no point takes more than about a second.
    func()  # compile and warm up
    start = time.perf_counter()
    func()
    single = max(time.perf_counter() - start, 1e-9)
    number = max(1, min(1000, int(2e-5 / single)))
    repeat = max(1, min(repeat, int(1.0 / (single * number))))
    if number == 1:
        return best_time(func, repeat)

    def many() -> None:
        for _ in range(number):
            func()

    return best_time(many, repeat) / number


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
    out_stream = stream if stream is not None else sys.stderr
    total = len(sizes) * len(dtypes) * (len(names) + len(CURVE_ANCHORS))
    done = 0
    started = time.perf_counter()
    points: list[CurvePoint] = []
    for n in sizes:
        reps = repeat if n <= 1_000_000 else max(1, min(repeat, 5))
        for dtype in dtypes:
            x = cases.random_inputs(dtype, n, seed=1)
            x = x / np.abs(x).max() * 1e6  # the magnitudes of forward_rows
            out = np.empty_like(x)
            timed: list[tuple[str, Callable[[], Any]]] = [
                (f"cbrtgrad[{name}]", functools.partial(api.cbrt, x, out=out, backend=name))
                for name in names
            ]
            timed += [
                (label, functools.partial(f, x, out=out)) for label, f in CURVE_ANCHORS.items()
            ]
            for series, func in timed:
                seconds = _per_call(func, reps)
                points.append(CurvePoint(series, str(dtype), n, seconds / n * 1e9))
                done += 1
                if progress:
                    _progress.draw(done, total, started, out_stream)
    if progress:
        out_stream.write("\n")
    return points


def format_curve(points: list[CurvePoint]) -> str:
    """The curve as a table: one row per dtype and size, one column per series (ns/elem).

    Examples
    --------
    >>> print(format_curve([CurvePoint("np.cbrt", "float64", 10, 1.5)]))
    dtype            n      np.cbrt
    -------------------------------
    float64         10        1.500
    """
    series = list(dict.fromkeys(p.series for p in points))
    width = max([12] + [len(s) + 2 for s in series])
    header = f"{'dtype':<9}{'n':>10}" + "".join(f"{s:>{width}}" for s in series)
    lines = [header, "-" * len(header)]
    table: dict[tuple[str, int], dict[str, float]] = {}
    for p in points:
        table.setdefault((p.dtype, p.n), {})[p.series] = p.ns_per_element
    for (dtype, n), row in table.items():
        cells = "".join(f"{row[s]:>{width}.3f}" if s in row else f"{'':>{width}}" for s in series)
        lines.append(f"{dtype:<9}{n:>10}{cells}")
    return "\n".join(lines)


def curve_as_dicts(points: list[CurvePoint]) -> list[dict[str, Any]]:
    """The curve points as JSON-ready dicts."""
    return [asdict(p) for p in points]
