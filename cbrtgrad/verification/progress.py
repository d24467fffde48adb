"""The one progress bar (``verify --exhaustive``, ``tools/measure.py plot``): tqdm's."""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections.abc import Callable, Iterator
from typing import TextIO

from tqdm import tqdm

#: The percentage to a tenth, as the bar of earlier versions drew it.
BAR_FORMAT = "{percentage:5.1f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}]"


def interactive(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal outside CI, where the bar redraws itself in place.

    Examples
    --------
    >>> import io
    >>> interactive(io.StringIO())
    False
    """
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty()) and not os.environ.get("CI")


@contextlib.contextmanager
def bar(
    total: int, *, enabled: bool = True, stream: TextIO | None = None
) -> Iterator[Callable[[int], object]]:
    """A tqdm bar of ``total`` steps; the context gives its ``update(steps)``.

    On a terminal (:func:`interactive`) the bar redraws itself in place. In a
    log or under ``CI`` it stays quiet while the work runs and writes one
    line, the finished bar, at the end.

    Parameters
    ----------
    total : int
        Steps in all.
    enabled : bool, default True
        False draws nothing.
    stream : file-like, optional
        Where the bar goes (default stderr).

    Examples
    --------
    >>> import io
    >>> log = io.StringIO()
    >>> with bar(4, stream=log) as advance:
    ...     for _ in range(4):
    ...         advance(1)
    >>> log.getvalue().startswith("100.0%|") and log.getvalue().count("\\n") == 1
    True
    """
    out = stream if stream is not None else sys.stderr
    live = interactive(out)
    with tqdm(
        total=total,
        file=out,
        disable=not enabled,
        bar_format=BAR_FORMAT,
        delay=0 if live else math.inf,  # off a terminal: never drawn while running
    ) as progress:
        yield progress.update
        if enabled and not live:
            out.write(f"{progress}\n")
