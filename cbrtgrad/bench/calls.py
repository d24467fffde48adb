"""What a small call costs: cbrtgrad's functions on few elements against ``np.cbrt``.

On one element a call is all argument handling: the kernel's own loop costs
what ``np.cbrt``'s does (both are numpy ufuncs). Each row is a ratio to an
anchor timed in the same rounds (:func:`cbrtgrad.bench.timing.best_times`):
``np.cbrt`` on one float64 for the one-element calls, cbrtgrad's own ufunc
(the ``cpu`` backend's loop, called directly) on 1,000 elements for the
argument handling left there. Issue 33 sets the goals the rows are read
against: within 2x ``np.cbrt`` on one element, ``out=`` no slower than
without, 1,000 elements within 1.2x of the ufunc, the graph engine's step at
most 20x.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import api
from ..engine import Tensor
from ..kernels import cpu
from .timing import best_times


def _cases(
    one: np.ndarray, g: np.ndarray, out: np.ndarray, many: np.ndarray
) -> list[tuple[str, Callable[[], Any]]]:
    def engine_step() -> None:
        x = Tensor(one, requires_grad=True)
        api.cbrt(x).sum().backward()

    return [
        ("cbrt(x), 1 float64", lambda: api.cbrt(one)),
        ("cbrt(x, out=o), 1 float64", lambda: api.cbrt(one, out=out)),
        ("cbrt_grad(g, y), 1 float64", lambda: api.cbrt_grad(g, one)),
        ("cbrt_and_grad(x, g), 1 float64", lambda: api.cbrt_and_grad(one, g)),
        ("Tensor, cbrt(x).sum().backward(), 1 float64", engine_step),
        ("cbrt(x), 1,000 float64", lambda: api.cbrt(many)),
    ]


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
        as :func:`cbrtgrad.bench.engine.engine_rows` gives them.

    Examples
    --------
    >>> rows = call_rows(repeat=1)
    >>> [r["anchor"] for r in rows][-2:]
    ['np.cbrt(x), 1 float64', 'the cpu ufunc, 1,000 float64']
    >>> all(r["ratio"] > 0 for r in rows)
    True
    """
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"cbrtgrad: repeat must be an int >= 1, got {repeat!r}")
    one = np.ones(1)
    g = np.full(1, 3.0)
    out = np.empty(1)
    many = np.linspace(-1e3, 1e3, 1000)
    ufunc = cpu.ufunc("cube_root", np.float64)
    cases = _cases(one, g, out, many)
    anchors = [lambda: np.cbrt(one), lambda: ufunc(many)]
    times = best_times([*anchors, *(call for _, call in cases)], repeat)
    anchor_one, anchor_many = times[:2]
    rows = []
    for (case, _), seconds in zip(cases, times[2:], strict=True):
        small = "1,000" not in case
        anchor_s = anchor_one if small else anchor_many
        rows.append(
            {
                "case": case,
                "cbrtgrad_s": seconds,
                "anchor": "np.cbrt(x), 1 float64" if small else "the cpu ufunc, 1,000 float64",
                "anchor_s": anchor_s,
                "ratio": seconds / anchor_s,
            }
        )
    return rows
