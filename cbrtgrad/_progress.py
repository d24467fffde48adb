"""The one progress bar of the command line (``verify --exhaustive``, ``bench --plot``)."""

from __future__ import annotations

import time
from typing import TextIO


def draw(done: int, total: int, started: float, stream: TextIO) -> None:
    """Redraw a one-line progress bar: ``done`` of ``total`` steps since ``started``.

    Parameters
    ----------
    done, total : int
        Steps finished and steps in all (``total > 0``).
    started : float
        :func:`time.perf_counter` value when the work began (for the time left).
    stream : file-like
        Where to draw (a carriage return rewrites the line in place).

    Examples
    --------
    >>> import io, time
    >>> buffer = io.StringIO()
    >>> draw(1, 4, time.perf_counter(), buffer)
    >>> buffer.getvalue()[:32]
    '\\r[##########--------------------'
    >>> "25.0%" in buffer.getvalue()
    True
    """
    width = 40
    filled = int(width * done / total)
    elapsed = time.perf_counter() - started
    eta = elapsed / done * (total - done) if done else 0.0
    bar = "#" * filled + "-" * (width - filled)
    stream.write(f"\r[{bar}] {done / total:6.1%}  {elapsed:6.0f} s elapsed, ~{eta:4.0f} s left")
    stream.flush()
