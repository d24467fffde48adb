"""``python tools/measure.py plot``: ns per element against array size, per backend and anchor.

The figure is drawn by :mod:`tools.measuring.plotting`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, TextIO

import numpy as np
import scipy.special

from cbrtgrad import api
from cbrtgrad.backends import available, get_backend
from cbrtgrad.cli.bench.inputs import bench_inputs
from cbrtgrad.cli.bench.timing import best_time
from cbrtgrad.verification import progress as _progress
from cbrtgrad.verification import text as _text
from cbrtgrad.verification.cases import DTYPES

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
    return tuple(name for name in available() if get_backend(name).accepts(probe))


def curve(
    sizes: tuple[int, ...] = CURVE_SIZES,
    dtypes: tuple[np.dtype, ...] = DTYPES,
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
    10^6 elements, as in :func:`cbrtgrad.cli.bench.anchors.run`).

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
        if not get_backend(name).accepts(probe):
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
                x = bench_inputs(dtype, n, seed=1)
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
