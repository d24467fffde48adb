"""The figure of ``python tools/measure.py plot``: ns per element against array size.

matplotlib is an optional dependency (the ``plot`` extra); it is imported only
here, and only when a figure is asked for.
"""

from __future__ import annotations

import os
from typing import Any

from .curves import CurvePoint

INSTALL_HINT = "pip install 'cbrtgrad[plot]' (or pip install matplotlib)"


def require_matplotlib() -> Any:
    """Import matplotlib, or raise an ``ImportError`` that says how to install it.

    Returns
    -------
    module
        The ``matplotlib`` package.

    Raises
    ------
    ImportError
        When matplotlib cannot be imported; the message names the ``plot`` extra.

    Examples
    --------
    >>> require_matplotlib().__name__
    'matplotlib'
    """
    try:
        import matplotlib
    except ImportError as exc:
        raise ImportError(
            f"cbrtgrad: drawing the plot needs matplotlib, which cannot be imported ({exc}); "
            f"install it with {INSTALL_HINT}"
        ) from exc
    return matplotlib


def check_path(path: str) -> str:
    """Check, before any measuring, that a figure can be written to ``path``.

    Parameters
    ----------
    path : str
        Output file; its extension picks the format (``.png``, ``.svg``, ``.pdf``, ...).

    Returns
    -------
    str
        ``path`` unchanged.

    Raises
    ------
    ImportError
        When matplotlib is missing.
    ValueError
        For an extension matplotlib cannot write, or a folder that does not exist.

    Examples
    --------
    >>> check_path("curve.png")
    'curve.png'
    >>> check_path("curve.docx")
    Traceback (most recent call last):
    ...
    ValueError: cbrtgrad: cannot write a plot to 'curve.docx': unknown format 'docx'; ...
    """
    require_matplotlib()
    from matplotlib.backend_bases import FigureCanvasBase

    extension = os.path.splitext(path)[1].lstrip(".").lower()
    supported = FigureCanvasBase.get_supported_filetypes()
    if extension not in supported:
        raise ValueError(
            f"cbrtgrad: cannot write a plot to {path!r}: unknown format {extension!r}; "
            f"use one of {', '.join('.' + e for e in sorted(supported))}"
        )
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"cbrtgrad: cannot write a plot to {path!r}: no folder {folder!r}")
    return path


def plot_curve(points: list[CurvePoint], path: str, *, title: str = "") -> Any:
    """Draw ns per element against array size, log-log, one panel per dtype.

    Parameters
    ----------
    points : list of CurvePoint
        What :func:`tools.measuring.curves.curve` measured.
    path : str
        Output file (see :func:`check_path`).
    title : str, optional
        A line above the panels (the machine and the versions, say).

    Returns
    -------
    matplotlib.figure.Figure
        The figure written (one axes per dtype, one line per series).

    Raises
    ------
    ValueError
        For no points, or a ``path`` that :func:`check_path` rejects.

    Examples
    --------
    >>> import os, tempfile
    >>> from tools.measuring.curves import CurvePoint
    >>> points = [CurvePoint("np.cbrt", "float64", n, 1.0 + 100 / n) for n in (10, 100, 1000)]
    >>> path = os.path.join(tempfile.mkdtemp(), "curve.png")
    >>> figure = plot_curve(points, path)
    >>> [line.get_label() for line in figure.axes[0].get_lines()]
    ['np.cbrt']
    >>> with open(path, "rb") as png:
    ...     png.read(4)[1:]
    b'PNG'
    """
    if not points:
        raise ValueError("cbrtgrad: plot_curve needs at least one point")
    check_path(path)
    from matplotlib.figure import Figure

    dtypes = list(dict.fromkeys(p.dtype for p in points))
    series = list(dict.fromkeys(p.series for p in points))
    figure = Figure(figsize=(5.2 * len(dtypes), 4.2), layout="constrained")
    axes = figure.subplots(1, len(dtypes), sharey=True, squeeze=False)[0]
    for ax, dtype in zip(axes, dtypes, strict=True):
        for k, name in enumerate(series):
            mine = sorted(
                (p.n, p.ns_per_element) for p in points if p.dtype == dtype and p.series == name
            )
            if not mine:
                continue
            sizes, ns = zip(*mine, strict=True)
            anchor = not name.startswith("cbrtgrad")
            ax.plot(
                sizes,
                ns,
                linestyle="--" if anchor else "-",
                marker="s" if anchor else "o",
                markersize=4,
                color=f"C{k}",
                label=name,
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(dtype)
        ax.set_xlabel("array size (elements)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("ns per element (best of repeats)")
    axes[-1].legend(fontsize="small")
    if title:
        figure.suptitle(title, fontsize="medium")
    figure.savefig(path, dpi=110)
    return figure
