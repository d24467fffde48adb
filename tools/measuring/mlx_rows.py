"""The MLX bridge against MLX's own ops and cbrtgrad's api, as ratios (issue 39's goals).

On 10^6 float32 elements on MLX's CPU, each pair's measurements taken in
turns (:func:`~cbrtgrad.cli.bench.timing.best_times`):

* the forward, ``mx.eval(cbrtgrad.mlx.cbrt(x))``, against the expression an
  MLX user writes today, ``mx.sign(x) * mx.power(mx.abs(x), 1/3)``, against
  ``mx.power(x, 1/3)`` (the seed's route: nan for negative x), and against
  ``cbrtgrad.cbrt`` on the numpy view of the same memory (the bridge's own
  cost) with the api's automatic choice: both on numba's threads from
  ``CBRTGRAD_PARALLEL_MIN`` elements (10^6), the api's ``parallel`` backend
  and the bridge's threaded loops;
* the same on one thread each, like with like: the bridge with
  ``CBRTGRAD_MLX_PARALLEL_MIN`` above ``n`` against ``backend="cpu"``;
* forward plus backward, ``mx.value_and_grad`` of ``cbrt(x).sum()``, against
  the same two expressions.

``ratio`` is cbrtgrad's time over the anchor's: below 1 is faster. The
goals: forward plus backward at least 4x faster than the expression (ratio
at most 0.25), and the forward within 1.5x of ``cbrtgrad.cbrt`` on the view.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from cbrtgrad.cli.bench.timing import best_times

LARGE = 1_000_000


def _expression(mx: Any) -> Callable[[Any], Any]:
    return lambda v: mx.sign(v) * mx.power(mx.abs(v), 1.0 / 3.0)


@contextlib.contextmanager
def bridge_threads_from(size: int | None) -> Iterator[None]:
    """``CBRTGRAD_MLX_PARALLEL_MIN`` set to ``size`` for the block (``None``: unset, the default).

    Examples
    --------
    >>> from cbrtgrad import _config
    >>> with bridge_threads_from(10):
    ...     _config.settings().mlx_parallel_min_size
    10
    """
    from cbrtgrad import _config

    name = "CBRTGRAD_MLX_PARALLEL_MIN"
    saved = os.environ.pop(name, None)
    if size is not None:
        os.environ[name] = str(size)
    _config.settings.cache_clear()
    try:
        yield
    finally:
        os.environ.pop(name, None)
        if saved is not None:
            os.environ[name] = saved
        _config.settings.cache_clear()


def mlx_rows(repeat: int = 20, n: int = LARGE) -> list[dict[str, Any]]:
    """Time the MLX bridge against its anchors (see the module's docstring).

    Parameters
    ----------
    repeat : int, default 20
        Measurements per case; the best of each is reported.
    n : int, default 10^6
        Elements (float32, standard normal).

    Returns
    -------
    list of dict
        ``{"case", "cbrtgrad_s", "anchor", "anchor_s", "ratio"}`` per case, as
        :func:`cbrtgrad.cli.bench.pytorch.torch_rows`.

    Raises
    ------
    ImportError
        Without MLX (the ``mlx`` extra).

    Examples
    --------
    >>> rows = mlx_rows(repeat=1, n=1000)
    >>> len(rows), all(r["cbrtgrad_s"] > 0 and r["anchor_s"] > 0 for r in rows)
    (6, True)
    """
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"cbrtgrad: repeat must be an int >= 1, got {repeat!r}")
    import mlx.core as mx

    import cbrtgrad
    import cbrtgrad.mlx as cm

    x = mx.array(np.random.default_rng(0).standard_normal(n).astype(np.float32))
    mx.eval(x)
    view = np.asarray(x)  # the same memory, no copy
    expression, power = _expression(mx), (lambda v: mx.power(v, 1.0 / 3.0))

    def forward(f: Callable[[Any], Any]) -> Callable[[], None]:
        return lambda: mx.eval(f(x))

    def step(f: Callable[[Any], Any]) -> Callable[[], None]:
        value_and_grad = mx.value_and_grad(lambda v: f(v).sum())
        return lambda: mx.eval(value_and_grad(x))

    ours, theirs, seed, api = best_times(
        [forward(cm.cbrt), forward(expression), forward(power), lambda: cbrtgrad.cbrt(view)],
        repeat,
    )
    with bridge_threads_from(n + 1):  # above n: one thread
        ours_one, api_cpu = best_times(
            [forward(cm.cbrt), lambda: cbrtgrad.cbrt(view, backend="cpu")], repeat
        )
    ours_step, theirs_step, seed_step = best_times(
        [step(cm.cbrt), step(expression), step(power)], repeat
    )
    size = f"{n:,} float32, MLX's CPU"
    expression_name = "mx.sign(x)*mx.power(mx.abs(x),1/3)"
    seed_name = "mx.power(x,1/3) (nan for x < 0)"
    cases = [
        (f"cbrtgrad.mlx.cbrt(x), {size}", ours, expression_name, theirs),
        (f"cbrtgrad.mlx.cbrt(x), {size}", ours, seed_name, seed),
        (f"cbrtgrad.mlx.cbrt(x), {size}", ours, "cbrtgrad.cbrt(numpy view)", api),
        (
            f"cbrtgrad.mlx.cbrt(x) on one thread, {size}",
            ours_one,
            "cbrtgrad.cbrt(numpy view, backend='cpu')",
            api_cpu,
        ),
        (f"value_and_grad(cbrt(x).sum()), {size}", ours_step, expression_name, theirs_step),
        (f"value_and_grad(cbrt(x).sum()), {size}", ours_step, seed_name, seed_step),
    ]
    return [
        {"case": case, "cbrtgrad_s": t, "anchor": anchor, "anchor_s": a, "ratio": t / a}
        for case, t, anchor, a in cases
    ]


def format_mlx_rows(rows: list[dict[str, Any]]) -> str:
    """The rows as a plain-text table, times in ms.

    Examples
    --------
    >>> row = {"case": "c", "cbrtgrad_s": 1e-3, "anchor": "a", "anchor_s": 4e-3, "ratio": 0.25}
    >>> print(format_mlx_rows([row]))
    case  cbrtgrad ms  anchor  anchor ms  ratio
    c           1.000  a           4.000  0.250
    """
    header = ("case", "cbrtgrad ms", "anchor", "anchor ms", "ratio")
    table = [header] + [
        (
            r["case"],
            f"{r['cbrtgrad_s'] * 1e3:.3f}",
            r["anchor"],
            f"{r['anchor_s'] * 1e3:.3f}",
            f"{r['ratio']:.3f}",
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    right = {1, 3, 4}
    lines = [
        "  ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in table
    ]
    return "\n".join(line.rstrip() for line in lines)
