"""The MLX bridge on one thread and on numba's threads, on free and on busy cores (issue 39).

Whether numba's threads, launched from MLX's stream thread, stall where one
thread does not: per-call times (not the best of many: the stalls are what
is measured) on 10^6 float32 on MLX's CPU of

* the forward, ``mx.eval(cbrtgrad.mlx.cbrt(x))``, its loops on one thread
  (``CBRTGRAD_MLX_PARALLEL_MIN`` above the size) and on numba's threads;
* ``cbrtgrad.cbrt`` on the numpy view of the same memory, ``backend="cpu"``
  (one thread) and ``"parallel"`` (numba's threads launched from the
  caller's thread, the api's automatic choice at 10^6);
* a training-like step, ``mx.value_and_grad`` of ``cbrt(x).sum()``, both ways;

each case in a block of calls of its own (no case runs beside another's
thread team), in rounds that rotate the order, with ``load`` processes
spinning (``while True: pass``) beside them (0: the cores as they are).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cbrtgrad.verification import text as _text

from .mlx_rows import LARGE, bridge_threads_from

#: A call counts as stalled above this (free cores: about 1 ms a forward, 2.5 a step).
STALL_MS = 5.0


def _cases(n: int) -> dict[str, tuple[int | None, Callable[[], Any]]]:
    # name -> (CBRTGRAD_MLX_PARALLEL_MIN for the block, the call).
    import mlx.core as mx

    import cbrtgrad
    import cbrtgrad.mlx as cm

    x = mx.array(np.random.default_rng(0).standard_normal(n).astype(np.float32))
    mx.eval(x)
    view = np.asarray(x)  # the same memory, no copy
    step = mx.value_and_grad(lambda v: cm.cbrt(v).sum())
    one, threads = n + 1, 0
    return {
        "mlx forward, one thread": (one, lambda: mx.eval(cm.cbrt(x))),
        "mlx forward, numba's threads": (threads, lambda: mx.eval(cm.cbrt(x))),
        "api on the view, backend='cpu'": (None, lambda: cbrtgrad.cbrt(view, backend="cpu")),
        "api on the view, backend='parallel'": (
            None,
            lambda: cbrtgrad.cbrt(view, backend="parallel"),
        ),
        "mlx value_and_grad, one thread": (one, lambda: mx.eval(step(x))),
        "mlx value_and_grad, numba's threads": (threads, lambda: mx.eval(step(x))),
    }


def _block(threads_from: int | None, call: Callable[[], Any], calls: int) -> list[float]:
    with bridge_threads_from(threads_from):
        for _ in range(3):  # warm: caches, the allocator, the thread team
            call()
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
    return times


def thread_rows(
    calls: int = 100, rounds: int = 3, loads: Sequence[int] = (0, 1, 2), n: int = LARGE
) -> list[dict[str, Any]]:
    """Per-call times of the bridge and the api, one thread and threads, under load.

    Parameters
    ----------
    calls : int, default 100
        Calls per case and round, each timed.
    rounds : int, default 3
        Rounds per load; each starts one case later than the last.
    loads : sequence of int, default (0, 1, 2)
        Processes spinning beside the measurements, one load after another.
    n : int, default 10^6
        Elements (float32, standard normal).

    Returns
    -------
    list of dict
        ``{"load", "case", "calls", "median_ms", "p90_ms", "max_ms",
        "stalled"}`` per load and case, ``stalled`` the calls over
        :data:`STALL_MS`.

    Raises
    ------
    ValueError
        For ``calls`` or ``rounds`` below 1, or a negative load.

    Examples
    --------
    >>> rows = thread_rows(calls=2, rounds=1, loads=(0,), n=1000)
    >>> len(rows), all(r["calls"] == 2 and r["median_ms"] > 0 for r in rows)
    (6, True)
    """
    for name, value in (("calls", calls), ("rounds", rounds)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"cbrtgrad: {name} must be an int >= 1, got {value!r}")
    if any(isinstance(k, bool) or not isinstance(k, int) or k < 0 for k in loads):
        raise ValueError(f"cbrtgrad: loads must be ints >= 0, got {list(loads)!r}")
    cases = _cases(n)
    names = list(cases)
    for name in names:  # compiled or loaded before any load starts
        _block(*cases[name], calls=1)
    rows = []
    for load in loads:
        spinners = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(load)
        ]
        try:
            times: dict[str, list[float]] = {name: [] for name in names}
            for r in range(rounds):
                for name in names[r % len(names) :] + names[: r % len(names)]:
                    times[name] += _block(*cases[name], calls=calls)
        finally:
            for spinner in spinners:
                spinner.kill()
                spinner.wait()
        for name in names:
            ms = np.array(times[name]) * 1e3
            rows.append(
                {
                    "load": load,
                    "case": name,
                    "calls": ms.size,
                    "median_ms": float(np.median(ms)),
                    "p90_ms": float(np.percentile(ms, 90)),
                    "max_ms": float(ms.max()),
                    "stalled": int((ms > STALL_MS).sum()),
                }
            )
    return rows


def format_thread_rows(rows: list[dict[str, Any]]) -> str:
    """The rows as a plain-text table.

    Examples
    --------
    >>> row = {"load": 1, "case": "c", "calls": 300, "median_ms": 0.9, "p90_ms": 4.5,
    ...        "max_ms": 16.0, "stalled": 12}
    >>> print(format_thread_rows([row]))
    spinning  case  calls  median ms  p90 ms  max ms  over 5 ms
    -----------------------------------------------------------
           1  c       300      0.900    4.50    16.0         12
    """
    header = ("spinning", "case", "calls", "median ms", "p90 ms", "max ms", f"over {STALL_MS:g} ms")
    table = [
        (r["load"], r["case"], r["calls"], r["median_ms"], r["p90_ms"], r["max_ms"], r["stalled"])
        for r in rows
    ]
    return _text.table(header, table, ("d", "", "d", ".3f", ".2f", ".1f", "d"))
