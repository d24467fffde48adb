"""``python tools/measure.py numba``: :mod:`cbrtgrad.numba` in a user's own loops.

Each row is a loop a user might write in ``@numba.njit`` code (compiled with
numba's defaults, as a user's would be), timed against the cbrtgrad ufunc on
one thread (the ``cpu`` backend: the automatic choice would spread 10^6
elements over every core), with its largest error in ulp against the exact
result. The anchors are what such a loop would use without cbrtgrad: numba's
own ``np.cbrt`` (a call of the C library's ``cbrt`` per element) and the
power expression ``np.sign(v) * np.abs(v) ** (1/3)``.

NOTE: the user's loops are compiled by numba as a user's are, at numba's
default SIMD width for the CPU (the kernels pick theirs: :mod:`cbrtgrad.build.compile`),
so on some CPUs the float32 scalar loop may differ from the ufunc by that
alone; docs/numba.md has the measured figures and the CPU they are from.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numba
import numpy as np

from cbrtgrad import api
from cbrtgrad.cli.bench.inputs import bench_inputs
from cbrtgrad.cli.bench.timing import best_times
from cbrtgrad.numba import cbrt, cbrt_grad, cbrt_grad_into, cbrt_into
from cbrtgrad.verification import text as _text
from cbrtgrad.verification.reference import ulp_errors

#: Elements of every row's arrays.
LARGE = 1_000_000


# The user's loops: module-level, so each is compiled once per process and dtype.
@numba.njit
def scalar_loop(x, y):  # type: ignore[no-untyped-def]
    """``y[i] = cbrtgrad.numba.cbrt(x[i])``."""
    for i in range(x.size):
        y[i] = cbrt(x[i])


@numba.njit
def block_call(x, y):  # type: ignore[no-untyped-def]
    """``cbrtgrad.numba.cbrt_into(x, y)``."""
    cbrt_into(x, y)


@numba.njit
def np_cbrt_loop(x, y):  # type: ignore[no-untyped-def]
    """``y[i] = np.cbrt(x[i])``, numba's own."""
    for i in range(x.size):
        y[i] = np.cbrt(x[i])


@numba.njit
def power_loop(x, y):  # type: ignore[no-untyped-def]
    """``y[i] = np.sign(v) * np.abs(v) ** (1/3)``."""
    for i in range(x.size):
        v = x[i]
        y[i] = np.sign(v) * np.abs(v) ** (1 / 3)


@numba.njit
def grad_scalar_loop(g, y, dx):  # type: ignore[no-untyped-def]
    """``dx[i] = cbrtgrad.numba.cbrt_grad(g[i], y[i])``."""
    for i in range(y.size):
        dx[i] = cbrt_grad(g[i], y[i])


@numba.njit
def grad_block_call(g, y, dx):  # type: ignore[no-untyped-def]
    """``cbrtgrad.numba.cbrt_grad_into(g, y, dx)``."""
    cbrt_grad_into(g, y, dx)


@numba.njit
def grad_expression_loop(g, y, dx):  # type: ignore[no-untyped-def]
    """``dx[i] = g[i] / (3 * y[i] * y[i])``."""
    for i in range(y.size):
        dx[i] = g[i] / (3 * y[i] * y[i])


FORWARD_LOOPS = {
    "@njit: cbrt_into(x, y)": block_call,
    "@njit loop: cbrt(x[i])": scalar_loop,
    "@njit loop: np.cbrt(x[i])": np_cbrt_loop,
    "@njit loop: np.sign(v)*np.abs(v)**(1/3)": power_loop,
}
GRAD_LOOPS = {
    "@njit: cbrt_grad_into(g, y, dx)": grad_block_call,
    "@njit loop: cbrt_grad(g[i], y[i])": grad_scalar_loop,
    "@njit loop: g[i] / (3*y[i]*y[i])": grad_expression_loop,
}


def _max_ulp(x: np.ndarray, y: np.ndarray, kind: str, g: Any = 1.0) -> float:
    return float(np.max(ulp_errors(x, y, kind, g)))


def numba_rows(
    repeat: int = 20,
    n: int = LARGE,
    dtypes: tuple[str, ...] = ("float32", "float64"),
    kernels: tuple[str, ...] = ("forward", "grad"),
) -> list[dict[str, Any]]:
    """Time the user loops against the cbrtgrad ufunc on one thread.

    Parameters
    ----------
    repeat : int, default 20
        Rounds of measurements (:func:`cbrtgrad.cli.bench.timing.best_times`:
        every loop of a table in turns, so their ratios share the same
        stretches of time).
    n : int, default 10^6
        Elements (the benchmark inputs, :func:`cbrtgrad.cli.bench.inputs.bench_inputs`).
    dtypes : tuple of str
        float32 and/or float64.
    kernels : tuple of str
        ``forward`` and/or ``grad`` (each loop is compiled on its first call,
        about a second each on a small machine).

    Returns
    -------
    list of dict
        ``{"dtype", "kernel", "case", "seconds", "ratio", "max_ulp"}`` per
        row: ``kernel`` is ``forward`` or ``grad``; ``ratio`` is the time
        over the ufunc's (``cbrtgrad.cbrt(..., backend="cpu")``), whose own
        row has 1.0; ``max_ulp`` is the largest error against the exact
        result (of the given ``y`` for the gradient).

    Examples
    --------
    >>> rows = numba_rows(repeat=1, n=1000, dtypes=("float32",), kernels=("grad",))
    >>> [row["case"] for row in rows][:2]
    ['cbrtgrad.cbrt_grad(g, y, out=dx) [cpu]', '@njit: cbrt_grad_into(g, y, dx)']
    >>> {row["max_ulp"] <= 0.5 for row in rows[:3]}
    {True}
    """
    if not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"cbrtgrad: repeat must be an int >= 1, got {repeat!r}")
    rows = []
    for name in dtypes:
        dtype = np.dtype(name)
        x = bench_inputs(dtype, n, seed=1)
        y = api.cbrt(x, backend="cpu")
        g = bench_inputs(dtype, n, seed=2)
        out = np.empty_like(x)
        forward: dict[str, Callable[[], Any]] = {
            "cbrtgrad.cbrt(x, out=y) [cpu]": partial(api.cbrt, x, out=out, backend="cpu"),
            **{case: partial(loop, x, out) for case, loop in FORWARD_LOOPS.items()},
        }
        grad: dict[str, Callable[[], Any]] = {
            "cbrtgrad.cbrt_grad(g, y, out=dx) [cpu]": partial(
                api.cbrt_grad, g, y, out=out, backend="cpu"
            ),
            **{case: partial(loop, g, y, out) for case, loop in GRAD_LOOPS.items()},
        }
        for kernel, cases in (("forward", forward), ("grad", grad)):
            if kernel not in kernels:
                continue
            times = best_times(list(cases.values()), repeat)
            for (case, run), seconds in zip(cases.items(), times, strict=True):
                run()
                if kernel == "forward":
                    error = _max_ulp(x, out, "cbrt")
                else:
                    error = _max_ulp(y, out, "grad_given_y", g)
                rows.append(
                    {
                        "dtype": name,
                        "kernel": kernel,
                        "case": case,
                        "seconds": seconds,
                        "ratio": seconds / times[0],
                        "max_ulp": error,
                    }
                )
    return rows


def format_numba_rows(rows: list[dict[str, Any]]) -> str:
    """The rows as a text table (what ``python tools/measure.py numba`` prints).

    Examples
    --------
    >>> row = {"dtype": "float32", "kernel": "forward", "case": "c", "seconds": 2e-3,
    ...        "ratio": 1.5, "max_ulp": 0.5}
    >>> print(format_numba_rows([row]))
    dtype    kernel   case  time (us)  vs ufunc  max ulp
    ----------------------------------------------------
    float32  forward  c        2000.0     1.50x     0.50
    """
    cells = [
        (
            r["dtype"],
            r["kernel"],
            r["case"],
            r["seconds"] * 1e6,
            f"{r['ratio']:.2f}x",
            r["max_ulp"],
        )
        for r in rows
    ]
    header = ("dtype", "kernel", "case", "time (us)", "vs ufunc", "max ulp")
    return _text.table(header, cells, ("", "", "", ".1f", "", ".2f"))
