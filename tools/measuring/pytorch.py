"""``python tools/measure.py torch``: the PyTorch bridge against PyTorch's own ops, as ratios.

Three pairs, each pair's measurements taken in turns
(:func:`~cbrtgrad.bench.timing.best_times`) with PyTorch and numba on the
same number of threads:

* forward plus backward of ``cbrt(x).sum()`` on 10^6 float32 elements,
  through ``cbrtgrad.torch.cbrt`` and through PyTorch's
  ``torch.sign(x) * x.abs().pow(1/3)`` (PyTorch has no cube root);
* one call on a one-element float32 tensor: ``cbrtgrad.torch.cbrt`` and
  ``torch.exp`` (an element-wise op of PyTorch's own, for the call's overhead),
  on a tensor that needs no gradient (the bridge calls the kernel without
  its ``autograd.Function``) and on one that requires grad (through it);
* the first pair's bridge step under ``torch.compile`` and eager, with
  inductor (the default backend, whose generated code includes the sum) and
  with aot_eager (the same traced graphs run by PyTorch's own kernels: what
  compiling costs or saves around the bridge's ops themselves).

``ratio`` is cbrtgrad's time over the anchor's: below 1 is faster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from cbrtgrad.bench.timing import best_times

LARGE = 1_000_000


@contextmanager
def _threads_as_numba() -> Iterator[int]:
    """PyTorch's intra-op threads set to numba's (the kernels' threads) while measuring."""
    import numba
    import torch

    before = torch.get_num_threads()
    threads = numba.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield threads
    finally:
        torch.set_num_threads(before)


def _step(x: Any, loss: Callable[[Any], Any]) -> Callable[[], None]:
    def run() -> None:
        x.grad = None
        loss(x).backward()

    return run


def torch_rows(
    repeat: int = 20, compile_backends: tuple[str, ...] = ("inductor", "aot_eager")
) -> list[dict[str, Any]]:
    """Time the PyTorch bridge against PyTorch's anchors (see the module's docstring).

    Parameters
    ----------
    repeat : int, default 20
        Measurements per case; the best of each is reported.
    compile_backends : tuple of str, default ("inductor", "aot_eager")
        ``torch.compile``'s backends, a compiled row each.

    Returns
    -------
    list of dict
        ``{"case", "cbrtgrad_s", "anchor", "anchor_s", "ratio"}`` per case, as
        :func:`cbrtgrad.bench.engine.engine_rows` (and printed by
        :func:`cbrtgrad.bench.engine.format_engine_rows`).

    Raises
    ------
    ImportError
        Without PyTorch (the ``torch`` extra).

    Examples
    --------
    >>> rows = torch_rows(repeat=1, compile_backends=())  # no compiled row: quick
    >>> [sorted(r) == ['anchor', 'anchor_s', 'case', 'cbrtgrad_s', 'ratio'] for r in rows]
    [True, True, True]
    """
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"cbrtgrad: repeat must be an int >= 1, got {repeat!r}")
    import torch

    import cbrtgrad.torch as ct

    big = np.random.default_rng(0).standard_normal(LARGE).astype(np.float32)
    x = torch.from_numpy(big).requires_grad_(True)
    one = torch.ones(1)
    tracked = torch.ones(1, requires_grad=True)

    def bridge(t: Any) -> Any:
        return ct.cbrt(t).sum()

    def expression(t: Any) -> Any:
        return (torch.sign(t) * t.abs().pow(1.0 / 3.0)).sum()

    with _threads_as_numba() as threads:
        step = f"cbrt(x).sum().backward(), 1e6 float32, {threads} threads"
        # NOTE: one call of each first (and of each compiled step): the first
        # call loads the kernels (about 0.5 s; compiling, some 20 s), and
        # best_times' autorange, whose first round is its warm-up, would then
        # time single calls, each just after 10 ms of the other function:
        # 160 to 200 us instead of 10 for the one-element cbrt (AMD Zen 4).
        for warm_up in (lambda: ct.cbrt(one), lambda: ct.cbrt(tracked), _step(x, bridge)):
            warm_up()
        one_s, exp_s = best_times([lambda: ct.cbrt(one), lambda: torch.exp(one)], repeat)
        grad_s, exp_grad_s = best_times(
            [lambda: ct.cbrt(tracked), lambda: torch.exp(tracked)], repeat
        )
        eager_s, anchor_s = best_times([_step(x, bridge), _step(x, expression)], repeat)
        cases = [
            (f"{step}, cbrtgrad.torch", eager_s, "torch.sign(x)*x.abs().pow(1/3)", anchor_s),
            ("cbrtgrad.torch.cbrt(x), 1 element float32", one_s, "torch.exp(x)", exp_s),
            ("the same, x requiring grad", grad_s, "torch.exp(x)", exp_grad_s),
        ]
        for backend in compile_backends:
            compiled = torch.compile(bridge, fullgraph=True, backend=backend)
            _step(x, compiled)()
            compiled_s, again_s = best_times([_step(x, compiled), _step(x, bridge)], repeat)
            cases.append((f"{step}, torch.compile ({backend})", compiled_s, "eager", again_s))
    return [
        {"case": case, "cbrtgrad_s": t, "anchor": anchor, "anchor_s": a, "ratio": t / a}
        for case, t, anchor, a in cases
    ]
