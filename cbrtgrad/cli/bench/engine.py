"""``cbrtgrad bench --engine``: the graph engine's overhead against bare numpy.

NOTE: the ratio for 10^6 elements is bounded below by the kernels: the
correctly rounded float32 cube root alone is slower than numpy's ``np.cbrt``
(SVML where numpy has it; the figures are in docs/engine.md, "Performance"),
so the row for the ``numpy`` backend is reported too, to show the engine's
own overhead.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import api
from ...backends import auto_choice, availability
from ...engine import Tensor
from ...verification import text as _text
from .timing import best_time

LARGE = 1_000_000


def _forward_backward(x: Tensor, backend: str | None) -> Any:
    def run() -> None:
        x.grad = None
        api.cbrt(x, backend=backend).sum().backward()

    return run


def engine_rows(repeat: int = 20) -> list[dict[str, Any]]:
    """Time forward plus backward of ``cbrt(x).sum()`` against the anchors.

    Parameters
    ----------
    repeat : int, default 20
        Repetitions; the best time of each is reported.

    Returns
    -------
    list of dict
        ``{"case", "cbrtgrad_s", "anchor", "anchor_s", "ratio"}`` per case:
        10^6 float32 elements against a bare ``np.cbrt`` (the automatic
        choice, then each available backend of ``cpu``, ``parallel`` and
        ``numpy``), and a 1-element array against a bare ``np.cbrt`` call.

    Examples
    --------
    >>> rows = engine_rows(repeat=1)
    >>> sorted(rows[0])
    ['anchor', 'anchor_s', 'case', 'cbrtgrad_s', 'ratio']
    """
    if not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"cbrtgrad: repeat must be an int >= 1, got {repeat!r}")
    rng = np.random.default_rng(0)
    big = rng.standard_normal(LARGE).astype(np.float32)
    anchor_big = best_time(lambda: np.cbrt(big), repeat)
    rows = []
    for backend in ("auto", "cpu", "parallel", "numpy"):
        if backend != "auto" and not availability(backend).available:
            continue
        x = Tensor(big, requires_grad=True)
        t = best_time(_forward_backward(x, None if backend == "auto" else backend), repeat)
        label = f"auto: {auto_choice(big).name}" if backend == "auto" else backend
        rows.append(
            {
                "case": f"cbrt(x).sum().backward(), 1e6 float32, {label}",
                "cbrtgrad_s": t,
                "anchor": "np.cbrt(x) forward only",
                "anchor_s": anchor_big,
                "ratio": t / anchor_big,
            }
        )
    one = np.ones(1, np.float32)
    x1 = Tensor(one, requires_grad=True)
    t1 = best_time(_forward_backward(x1, None), repeat)
    anchor1 = best_time(lambda: np.cbrt(one), repeat)
    rows.append(
        {
            "case": "cbrt(x).sum().backward(), 1 element float32",
            "cbrtgrad_s": t1,
            "anchor": "np.cbrt(x) forward only",
            "anchor_s": anchor1,
            "ratio": t1 / anchor1,
        }
    )
    return rows


def format_engine_rows(rows: list[dict[str, Any]]) -> str:
    """The engine rows as a text table (what ``cbrtgrad bench --engine`` prints).

    Examples
    --------
    >>> row = {"case": "c", "cbrtgrad_s": 2e-3, "anchor": "a", "anchor_s": 1e-3, "ratio": 2.0}
    >>> print(format_engine_rows([row]))
    case  cbrtgrad (us)  anchor  time (us)  ratio
    ---------------------------------------------
    c            2000.0  a          1000.0   2.00
    """
    cells = [
        (r["case"], r["cbrtgrad_s"] * 1e6, r["anchor"], r["anchor_s"] * 1e6, r["ratio"])
        for r in rows
    ]
    header = ("case", "cbrtgrad (us)", "anchor", "time (us)", "ratio")
    return _text.table(header, cells, ("", ".1f", "", ".1f", ".2f"))
