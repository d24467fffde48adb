"""``cbrtgrad bench``: throughput against anchors measured in the same run.

Every figure comes from the package's timers
(:mod:`cbrtgrad.cli.bench.timing`), in ns per element, and every claim is a
ratio against an anchor timed in the same process, its measurements in
turns with cbrtgrad's (:func:`cbrtgrad.cli.bench.timing.best_times`):
``np.cbrt``, ``scipy.special.cbrt``, the numpy gradient expression and a
memory copy moving the same bytes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import scipy.special

from ... import api
from ...verification import text as _text
from ...verification.cases import DTYPES
from .inputs import BENCH_SIZES, bench_inputs
from .timing import best_time, best_times


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


def _row(
    kernel: str, backend: str, x: np.ndarray, ours: float, anchor: str, theirs: float
) -> BenchRow:
    n = x.size
    return BenchRow(
        kernel, backend, str(x.dtype), n, ours / n * 1e9, anchor, theirs / n * 1e9, theirs / ours
    )


def forward_rows(dtype: np.dtype, n: int, repeat: int, backend: str = "cpu") -> list[BenchRow]:
    """Forward cube root against ``np.cbrt``, ``scipy.special.cbrt`` and a copy."""
    x = bench_inputs(dtype, n, seed=1)
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
    y = np.cbrt(bench_inputs(dtype, n, seed=2)).astype(dtype)
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
    x = bench_inputs(dtype, n, seed=3)
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
    sizes: tuple[int, ...] = BENCH_SIZES,
    dtypes: tuple[np.dtype, ...] = DTYPES,
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
