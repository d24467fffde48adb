"""The package's timer: the best of repeated measurements, several functions in turns.

Every figure of ``cbrtgrad bench`` (and of asv's ratio benchmarks) comes from
:func:`best_time` or :func:`best_times` (``timeit``'s autorange and repeat):
the best of ``repeat`` measurements (the least disturbed by other work on a
shared machine), per call.
"""

from __future__ import annotations

import gc
import timeit
from collections.abc import Callable, Sequence
from typing import Any

#: The shortest measurement: calls are repeated in a row (timeit's autorange
#: counts 1, 2, 5, 10, 20, ...) until one measurement lasts this long, so that
#: the clock's resolution and the loop's overhead vanish beside it, and so
#: does what a call pays just after another function ran (its caches and the
#: allocator's state): with :func:`best_times` over ``bench --calls``' set,
#: 1 ms measurements read a one-element ``cbrt`` at several times its cost in
#: a loop of its own, which 10 ms measurements give (docs/performance.md).
MEASUREMENT_SECONDS = 1e-2


class _Enough(Exception):
    """Stops :meth:`timeit.Timer.autorange` at :data:`MEASUREMENT_SECONDS` (its own: 0.2 s)."""


def _stop_at_measurement_seconds(number: int, seconds: float) -> None:
    if seconds >= MEASUREMENT_SECONDS:
        raise _Enough(number)


def best_time(
    func: Callable[[], Any],
    repeat: int,
    *,
    number: int | None = None,
    setup: Callable[[], Any] | None = None,
) -> float:
    """Seconds per call of ``func``: the best of ``repeat`` measurements (``timeit``).

    The package's timer (:func:`best_times` takes several functions' in
    turns). ``number`` calls make one measurement; by
    default :meth:`timeit.Timer.autorange` picks it, the fewest of 1, 2, 5,
    10, 20, ... that last :data:`MEASUREMENT_SECONDS`, after one call made
    as the warm-up (compilation, caches); with ``number`` given, one
    measurement is made and dropped as the warm-up instead.

    Parameters
    ----------
    func : callable
        Called with no arguments.
    repeat : int
        Measurements (>= 1); the fastest is kept.
    number : int, optional
        Calls per measurement (default: autorange's).
    setup : callable, optional
        Called before each measurement, untimed (``timeit``'s ``setup``).
        The garbage collector stays on during the measurements.

    Returns
    -------
    float
        The best measurement divided by ``number``.

    Examples
    --------
    >>> best_time(lambda: None, 3) >= 0.0
    True
    >>> best_time(lambda: sum(range(100)), 2, number=10) > 0.0
    True
    """

    def before_each() -> None:
        # timeit turns the garbage collector off while it measures; real
        # callers run with it on (and the dask timing's setup waits for
        # futures to be freed), so it goes back on, as timeit's docs suggest.
        gc.enable()
        if setup is not None:
            setup()

    timer = timeit.Timer(func, setup=before_each)
    if number is None:
        timer.timeit(1)  # the warm-up, outside autorange (see best_times)
        try:
            number = timer.autorange(_stop_at_measurement_seconds)[0]
        except _Enough as enough:
            number = int(enough.args[0])
    else:
        timer.timeit(number)
    return min(timer.repeat(repeat=repeat, number=number)) / number


def best_times(functions: Sequence[Callable[[], Any]], repeat: int) -> list[float]:
    """Seconds per call of each function, their measurements taken in turns.

    :func:`best_time` for several functions at once: each function's
    ``number`` of calls per measurement is found as there (one call, the
    warm-up, then autorange), then ``repeat`` rounds each make one measurement
    of every function, in order, and each function keeps its best. A ratio
    of two results is thereby taken from the same stretches of time: on a
    shared machine a slow spell during the measurements of one function
    alone would bias it (measured: ``cbrtgrad bench``'s float64 forward
    against ``np.cbrt`` moved between 0.92x and 1.16x from run to run when
    each was timed in one stretch).

    Parameters
    ----------
    functions : sequence of callables
        Each called with no arguments; at least one.
    repeat : int
        Rounds (>= 1).

    Returns
    -------
    list of float
        Per function, in order, its best measurement divided by its number
        of calls.

    Examples
    --------
    >>> fast, slow = best_times([lambda: None, lambda: sum(range(1000))], 3)
    >>> 0.0 <= fast < slow
    True
    """
    functions = list(functions)
    if not functions:
        raise ValueError("functions: expected at least one callable, got none")
    for index, func in enumerate(functions):
        if not callable(func):
            raise TypeError(f"functions[{index}]: expected a callable, got {type(func).__name__}")
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"repeat: expected an integer >= 1, got {repeat!r}")
    timers = []
    numbers = []
    for func in functions:
        # NOTE: timeit.Timer.timeit turns the garbage collector off for its
        # measurement; the setup turns it back on, as in best_time.
        timer = timeit.Timer(func, setup=gc.enable)
        # NOTE: one call first, the warm-up: autorange keeps the count whose
        # measurement lasts MEASUREMENT_SECONDS, and a first call that loads a
        # kernel from the cache (10 to 50 ms) would make it 1, each
        # measurement one call, timer and cold caches included (seen: the
        # one-element cbrt_grad of ``bench --calls`` read 8 to 18 us, 25 to 40x
        # np.cbrt, in about half the runs, where its loop costs 0.9 us).
        timer.timeit(1)
        try:
            number = timer.autorange(_stop_at_measurement_seconds)[0]
        except _Enough as enough:
            number = int(enough.args[0])
        timers.append(timer)
        numbers.append(number)
    best = [float("inf")] * len(functions)
    for _ in range(repeat):
        for index, (timer, number) in enumerate(zip(timers, numbers, strict=True)):
            best[index] = min(best[index], timer.timeit(number) / number)
    return best
