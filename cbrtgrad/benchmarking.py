"""``cbrtgrad bench``: throughput against anchors measured in the same run.

Every figure is the best of ``repeat`` calls (the least disturbed by other
work on a shared machine) in ns per element, and every claim is a ratio
against an anchor timed in the same process a moment before: ``np.cbrt``,
``scipy.special.cbrt``, the numpy gradient expression and a memory copy
moving the same bytes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import scipy.special

from . import api
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
