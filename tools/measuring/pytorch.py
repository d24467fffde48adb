"""``python tools/measure.py torch``: the PyTorch bridge against PyTorch's own ops, as ratios.

Three pairs, each pair's measurements taken in turns
(:func:`~cbrtgrad.cli.bench.timing.best_times`) with PyTorch and numba on the
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
  compiling costs or saves around the bridge's ops themselves), at 10^6 and
  10^5 elements, eager and both backends timed in turns; then the same
  steps again with the bridge's CPU kernels replaced by bare allocations of
  their results (:func:`bare_kernels`): what the step costs around the
  kernels, eager and compiled (the same compiled graphs: the ops' kernels
  call the replaced functions).

``ratio`` is cbrtgrad's time over the anchor's: below 1 is faster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from cbrtgrad.cli.bench.timing import best_times

LARGE = 1_000_000
#: The sizes of the compiled rows.
COMPILE_SIZES = (LARGE, 100_000)


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


@contextmanager
def bare_kernels() -> Iterator[None]:
    """The bridge's CPU kernels replaced by bare allocations of their results, while in the block.

    ``cbrtgrad.torch._cpu.cube_root`` and ``cube_root_grad`` are what both
    routes run: the eager ``Function``s call them directly, the compiled
    graphs through the custom ops' kernels. Replaced, a step times all but
    the kernels (PyTorch's autograd, the sum, the compiled runtime, the ops'
    dispatch), with no recompile. A measuring device only: the results are
    uninitialised memory.

    Examples
    --------
    >>> import torch, cbrtgrad.torch as ct
    >>> with bare_kernels():
    ...     ct.cbrt(torch.ones(3, requires_grad=True)).shape
    torch.Size([3])
    >>> ct.cbrt(torch.tensor([8.0]))
    tensor([2.])
    """
    import torch

    from cbrtgrad.torch import _cpu

    kept = _cpu.cube_root, _cpu.cube_root_grad

    def cube_root(x: Any) -> Any:
        return torch.empty(x.shape, dtype=x.dtype)

    def cube_root_grad(g: Any, y: Any, shape: Any) -> Any:
        return torch.empty(shape, dtype=y.dtype)

    _cpu.cube_root, _cpu.cube_root_grad = cube_root, cube_root_grad
    try:
        yield
    finally:
        _cpu.cube_root, _cpu.cube_root_grad = kept


def _size_name(size: int) -> str:
    power = len(str(size)) - 1
    return f"1e{power}" if size == 10**power and power > 1 else str(size)


def _compiled_cases(
    loss: Callable[[Any], Any],
    backends: tuple[str, ...],
    sizes: tuple[int, ...],
    threads: int,
    repeat: int,
) -> list[tuple[str, float, str, float]]:
    """Eager and compiled steps of ``loss`` per size, timed in turns, with and without kernels."""
    import torch

    cases = []
    for size in sizes:
        data = np.random.default_rng(0).standard_normal(size).astype(np.float32)
        x = torch.from_numpy(data).requires_grad_(True)
        steps = [_step(x, loss)]
        for backend in backends:
            # NOTE: dynamic=False: the second size would otherwise make dynamo
            # recompile the same function with a symbolic size.
            compiled = torch.compile(loss, fullgraph=True, backend=backend, dynamic=False)
            steps.append(_step(x, compiled))
            steps[-1]()  # compiles (inductor: some 20 s on 2 cores)
        times = best_times(steps, repeat)
        with bare_kernels():
            bare = best_times(steps, repeat)
        step = f"cbrt(x).sum().backward(), {_size_name(size)} float32, {threads} threads"
        for backend, compiled_s, bare_s in zip(backends, times[1:], bare[1:], strict=True):
            cases.append((f"{step}, torch.compile ({backend})", compiled_s, "eager", times[0]))
            bare_case = "the same, kernels replaced by bare allocations"
            cases.append((bare_case, bare_s, "eager, the same", bare[0]))
    return cases


def _step(x: Any, loss: Callable[[Any], Any]) -> Callable[[], None]:
    def run() -> None:
        x.grad = None
        loss(x).backward()

    return run


def torch_rows(
    repeat: int = 20,
    compile_backends: tuple[str, ...] = ("inductor", "aot_eager"),
    compile_sizes: tuple[int, ...] = COMPILE_SIZES,
) -> list[dict[str, Any]]:
    """Time the PyTorch bridge against PyTorch's anchors (see the module's docstring).

    Parameters
    ----------
    repeat : int, default 20
        Measurements per case; the best of each is reported.
    compile_backends : tuple of str, default ("inductor", "aot_eager")
        ``torch.compile``'s backends, two compiled rows each per size (with
        the kernels, and with them replaced by bare allocations).
    compile_sizes : tuple of int, default (10**6, 10**5)
        The float32 sizes of the compiled rows.

    Returns
    -------
    list of dict
        ``{"case", "cbrtgrad_s", "anchor", "anchor_s", "ratio"}`` per case, as
        :func:`cbrtgrad.cli.bench.engine.engine_rows` (and printed by
        :func:`cbrtgrad.cli.bench.engine.format_engine_rows`).

    Raises
    ------
    ImportError
        Without PyTorch (the ``torch`` extra).
    ValueError
        For a ``repeat`` or a compile size that is not an int >= 1.

    Examples
    --------
    >>> rows = torch_rows(repeat=1, compile_backends=())  # no compiled row: quick
    >>> [sorted(r) == ['anchor', 'anchor_s', 'case', 'cbrtgrad_s', 'ratio'] for r in rows]
    [True, True, True]
    """
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"cbrtgrad: repeat must be an int >= 1, got {repeat!r}")
    for size in compile_sizes:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"cbrtgrad: compile_sizes must be ints >= 1, got {compile_sizes!r}")
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
        if compile_backends:
            cases += _compiled_cases(bridge, compile_backends, compile_sizes, threads, repeat)
    return [
        {"case": case, "cbrtgrad_s": t, "anchor": anchor, "anchor_s": a, "ratio": t / a}
        for case, t, anchor, a in cases
    ]
