"""What a small call costs: cbrtgrad's functions on few elements against ``np.cbrt``.

On one element a call is all argument handling: the kernel's own loop costs
what ``np.cbrt``'s does (both are numpy ufuncs). Each row is a ratio to an
anchor timed in the same rounds (:func:`cbrtgrad.cli.bench.timing.best_times`):
``np.cbrt`` on one float64 for the one-element calls, cbrtgrad's own ufunc
(the ``cpu`` backend's loop, called directly) on 1,000 elements for the
argument handling left there. The goals the rows are read against
(docs/performance.md): within 2x ``np.cbrt`` on one element, ``out=`` no slower than
without, 1,000 elements within 1.2x of the ufunc, the graph engine's step at
most 20x; an explicit ``backend="cpu"`` the same route as the automatic choice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ... import api
from ...engine import Tensor
from ...kernels.cpu import catalog as cpu
from .timing import best_times

#: The anchors a case is timed against, by key (see :func:`_cases`).
ANCHORS = {"one": "np.cbrt(x), 1 float64", "many": "the cpu ufunc, 1,000 float64"}


def _cases(
    one: np.ndarray, g: np.ndarray, out: np.ndarray, many: np.ndarray
) -> list[tuple[str, str, Callable[[], Any]]]:
    """``(case, anchor key, call)`` per case: ``"one"`` for one element, ``"many"`` for 1,000."""

    def engine_step() -> None:
        x = Tensor(one, requires_grad=True)
        api.cbrt(x).sum().backward()

    return [
        ("cbrt(x), 1 float64", "one", lambda: api.cbrt(one)),
        ("cbrt(x, out=o), 1 float64", "one", lambda: api.cbrt(one, out=out)),
        ("cbrt_grad(g, y), 1 float64", "one", lambda: api.cbrt_grad(g, one)),
        ("cbrt_and_grad(x, g), 1 float64", "one", lambda: api.cbrt_and_grad(one, g)),
        ("Tensor, cbrt(x).sum().backward(), 1 float64", "one", engine_step),
        ("cbrt(x, backend='cpu'), 1,000 float64", "many", lambda: api.cbrt(many, backend="cpu")),
        ("cbrt(x), 1,000 float64", "many", lambda: api.cbrt(many)),
    ]


def anchor_calls(one: np.ndarray, many: np.ndarray) -> dict[str, Callable[[], Any]]:
    """The anchors' calls by key: ``np.cbrt`` on ``one``, the ``cpu`` ufunc on ``many``."""
    ufunc = cpu.ufunc("cube_root", np.float64)
    return {"one": lambda: np.cbrt(one), "many": lambda: ufunc(many)}


def call_rows(repeat: int = 20) -> list[dict[str, Any]]:
    """Time small calls of the api and the engine against their anchors, in turns.

    Parameters
    ----------
    repeat : int, default 20
        Rounds; each call keeps its best.

    Returns
    -------
    list of dict
        ``{"case", "cbrtgrad_s", "anchor", "anchor_s", "ratio"}`` per call,
        as :func:`cbrtgrad.cli.bench.engine.engine_rows` gives them.

    Examples
    --------
    >>> rows = call_rows(repeat=1)
    >>> [r["anchor"] for r in rows][-3:]
    ['np.cbrt(x), 1 float64', 'the cpu ufunc, 1,000 float64', 'the cpu ufunc, 1,000 float64']
    >>> all(r["ratio"] > 0 for r in rows)
    True
    """
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"cbrtgrad: repeat must be an int >= 1, got {repeat!r}")
    one = np.ones(1)
    g = np.full(1, 3.0)
    out = np.empty(1)
    many = np.linspace(-1e3, 1e3, 1000)
    anchors = anchor_calls(one, many)
    cases = _cases(one, g, out, many)
    times = best_times([*anchors.values(), *(call for _, _, call in cases)], repeat)
    anchor_s = dict(zip(anchors, times, strict=False))
    return [
        {
            "case": case,
            "cbrtgrad_s": seconds,
            "anchor": ANCHORS[key],
            "anchor_s": anchor_s[key],
            "ratio": seconds / anchor_s[key],
        }
        for (case, key, _), seconds in zip(cases, times[len(anchors) :], strict=True)
    ]
