"""Plain-text tables, as the command line prints them."""

from __future__ import annotations

from collections.abc import Iterable


def text_table(header: str, lines: Iterable[str]) -> str:
    """A header, a rule as wide as the header, then the lines.

    Parameters
    ----------
    header : str
        The column titles, already laid out.
    lines : iterable of str
        One formatted line per row.

    Returns
    -------
    str
        The table, lines joined by newlines.

    Examples
    --------
    >>> print(text_table("a  b", ["1  2"]))
    a  b
    ----
    1  2
    """
    return "\n".join([header, "-" * len(header), *lines])
