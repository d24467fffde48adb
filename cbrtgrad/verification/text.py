"""The one table formatter of the command line (bench, peers, verify, engine, info)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def table(header: Sequence[str], rows: Iterable[Sequence[object]], formats: Sequence[str]) -> str:
    """Columns two spaces apart under a rule, each as wide as its widest cell.

    Parameters
    ----------
    header : sequence of str
        The column titles.
    rows : iterable of sequences
        One cell per column.
    formats : sequence of str
        One :func:`format` spec per column: ``""`` for a text column
        (left-aligned), a spec such as ``".3f"`` or ``"d"`` for a number
        column (right-aligned). A ``str`` cell in a number column, a ``"-"``
        for a missing figure say, is right-aligned as it is.

    Returns
    -------
    str
        The header, a rule as wide as the titled columns, then the rows,
        joined by newlines, with no trailing spaces.

    Examples
    --------
    >>> print(table(["name", "ns/elem"], [["cpu", 1.5], ["numpy", "-"]], ["", ".3f"]))
    name   ns/elem
    --------------
    cpu      1.500
    numpy        -
    """
    cells = [
        [v if isinstance(v, str) else format(v, spec) for v, spec in zip(row, formats, strict=True)]
        for row in rows
    ]
    widths = [max([len(title)] + [len(r[k]) for r in cells]) for k, title in enumerate(header)]

    # The rule spans the titled columns: a trailing untitled note (a peer's
    # "absent: ..." reason) may run past it.
    titled = max((k + 1 for k, title in enumerate(header) if title), default=0)

    def line(values: Sequence[str], count: int = len(header)) -> str:
        return "  ".join(
            f"{v:>{w}}" if spec else f"{v:<{w}}"
            for v, w, spec in zip(values[:count], widths, formats, strict=False)
        ).rstrip()

    lines = [line(row) for row in cells]
    head = line(header)
    rule = "-" * max([len(head), *(len(line(row, titled)) for row in cells)])
    return "\n".join([head, rule, *lines])
