"""Short tables rendered at build time from the measured files in ``docs/generated/``.

The pages lead with a few ratios; the files ``docs/make_plots.py`` and
``tools/gpu_check.py`` wrote hold them among wide text dumps. These directives read the
files and render the ratios as tables, with the file and the machine under each, so that
a figure in a table is never typed in by hand and never disagrees with its file::

    ```{ratio-table} generated/bench_table.txt generated/peers_table.txt
    ```

    ```{gpu-ratio-table} generated/gpu_check_h200.json
    ```

    ```{accuracy-table} generated/verify_table.txt
    ```

Each figure is printed as its file has it (``ratio-table``, ``accuracy-table``) or, for
the GPU, computed from the file's microseconds and rounded to two decimals. A file whose
layout is not the one expected fails the build with the file's name, never a blank cell.
"""

from __future__ import annotations

import abc
import json
import math
import re
from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util.docutils import SphinxDirective

# Implementations that measure.py peers names by their entry point: one row per library.
_ENTRY_POINT = re.compile(r"\s+(_ZGV\w+|Sleef_\w+)$")


_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def _size(n: str) -> str:
    # 100000 -> 10⁵, 268435456 -> 2²⁸, others with thousands separators.
    value = int(n)
    for base in (10, 2):
        power = round(math.log(value, base)) if value > 0 else 0
        if value == base**power and power > 1:
            return f"{base}{str(power).translate(_SUPERSCRIPT)}"
    return f"{value:,}"


def _cpu_line(path: Path, lines: list[str]) -> str:
    for line in lines:
        if line.startswith("CPU: "):
            return line[len("CPU: ") :]
    raise ExtensionError(f"{path}: no 'CPU: ' line naming the machine")


def _table_rows(path: Path, lines: list[str], first_column: str) -> list[list[str]]:
    # The rows under the header (the line starting with first_column) and its dashes,
    # up to the first blank line (notes may follow it).
    for i, line in enumerate(lines):
        if line.split()[:1] == [first_column]:
            rows = []
            for row in lines[i + 2 :]:
                if not row.strip():
                    break
                rows.append(row.split())
            return rows
    raise ExtensionError(f"{path}: no table header starting with {first_column!r}")


def bench_ratios(path: Path) -> tuple[str, dict[tuple[str, str], dict[tuple[str, str], str]]]:
    """The machine and the speedups of a ``cbrtgrad bench`` table.

    Returns the CPU line and ``{(kernel, anchor): {(dtype, size): speedup}}``; a row is
    ``kernel backend dtype n ns/elem anchor... ns/elem speedup`` (the anchor may hold spaces).
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    ratios: dict[tuple[str, str], dict[tuple[str, str], str]] = {}
    for row in _table_rows(path, lines, "kernel"):
        if len(row) < 8:
            raise ExtensionError(f"{path}: short row {' '.join(row)!r}")
        kernel, dtype, n, anchor, speedup = row[0], row[2], row[3], " ".join(row[5:-2]), row[-1]
        ratios.setdefault((kernel, f"`{anchor}`"), {})[(dtype, _size(n))] = speedup
    return _cpu_line(path, lines), ratios


def peer_ratios(path: Path) -> tuple[str, dict[tuple[str, str], dict[tuple[str, str], str]]]:
    """The machine and the ``peer/ours`` column of a ``tools/measure.py peers`` table.

    Same shape as :func:`bench_ratios`, kernel ``cbrt``. cbrtgrad's own rows (1.00) and
    numpy's (``np.cbrt`` is the bench table's anchor already) are left out; a library's
    entry points (one per dtype and ISA) fold into one row.
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    ratios: dict[tuple[str, str], dict[tuple[str, str], str]] = {}
    for row in _table_rows(path, lines, "dtype"):
        if len(row) < 7:
            raise ExtensionError(f"{path}: short row {' '.join(row)!r}")
        dtype, n, name, ratio = row[0], row[1], " ".join(row[2:-4]), row[-2]
        name = _ENTRY_POINT.sub("", name)
        if name.startswith(("cbrtgrad", "numpy")):
            continue
        ratios.setdefault(("cbrt", name), {})[(dtype, _size(n))] = ratio
    return _cpu_line(path, lines), ratios


def gpu_ratios(path: Path) -> tuple[str, dict[tuple[str, str], dict[str, str]]]:
    """The device and, per dtype, each kernel's ratios from ``tools/gpu_check.py --json``.

    Against a copy: the ``of_copy`` bandwidth share (each input read and each output
    written, over ``cupy.copyto``'s). Against a peer: the peer's microseconds over the
    forward's. Returns the device and ``{(kernel, against): {dtype: ratio}}``.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        device, throughput = data["device"], data["throughput"]
        times = {(row["dtype"], row["kernel"]): row for row in throughput}
    except (ValueError, KeyError, TypeError) as error:
        raise ExtensionError(f"{path}: not a gpu_check JSON file ({error})") from None
    ours = {
        "cbrt": "cbrtgrad forward, out=",
        "cbrt_grad": "cbrtgrad gradient, out=",
        "cbrt_and_grad": "cbrtgrad fused, out=",
    }
    peers = [kernel for _, kernel in times if not kernel.startswith(("cbrtgrad", "copy"))]
    ratios: dict[tuple[str, str], dict[str, str]] = {}
    for dtype in dict.fromkeys(d for d, _ in times):
        for kernel, name in ours.items():
            row = times.get((dtype, name))
            if row is None:
                raise ExtensionError(f"{path}: no {name!r} row for {dtype}")
            share = f"{row['of_copy']:.2f}"
            ratios.setdefault((kernel, "a copy (same bytes)"), {})[dtype] = share
            if kernel != "cbrt":
                continue
            for peer in dict.fromkeys(peers):
                if (dtype, peer) in times:
                    ratio = times[(dtype, peer)]["us"] / row["us"]
                    ratios.setdefault((kernel, f"`{peer}`"), {})[dtype] = f"{ratio:.2f}"
    return device, ratios


def _markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


class _TableDirective(SphinxDirective, abc.ABC):
    """Render markdown lines built from files named relative to the page."""

    required_arguments = 1
    optional_arguments = 4
    has_content = False

    def files(self) -> list[Path]:
        """The argument files, relative to the page's folder, each a build dependency."""
        paths = []
        for argument in self.arguments:
            relative, absolute = self.env.relfn2path(argument, self.env.docname)
            self.env.note_dependency(relative)
            path = Path(absolute)
            if not path.is_file():
                raise self.error(f"{self.name}: no file {argument}")
            paths.append(path)
        return paths

    @abc.abstractmethod
    def markdown(self) -> list[str]:
        """The table and its source line, as MyST markdown."""

    def run(self) -> list[nodes.Node]:
        try:
            lines = self.markdown()
        except ExtensionError as error:
            raise self.error(f"{self.name}: {error}") from None
        container = nodes.container(classes=["generated-table"])
        self.state.nested_parse(StringList(lines, self.env.docname), self.content_offset, container)
        return [container]

    def sources(self) -> str:
        """The argument files as the repository names them (the pages are in docs/)."""
        return ", ".join(f"`docs/{Path(a).as_posix()}`" for a in self.arguments)


class RatioTable(_TableDirective):
    """``{ratio-table} BENCH [PEERS...]``: cbrtgrad's speedups from bench tables, one machine."""

    def markdown(self) -> list[str]:
        machines: dict[str, None] = {}
        ratios: dict[tuple[str, str], dict[tuple[str, str], str]] = {}
        for path in self.files():
            reader = peer_ratios if "implementation" in path.read_text("utf-8") else bench_ratios
            machine, found = reader(path)
            machines[machine] = None
            for key, cells in found.items():
                ratios.setdefault(key, {}).update(cells)
        if len(machines) != 1:
            raise ExtensionError(f"the files come from different machines: {list(machines)}")
        columns = list(dict.fromkeys(c for cells in ratios.values() for c in cells))
        columns.sort(key=lambda c: c[0])  # float32 first, the sizes in file order
        header = ["kernel", "against"] + [f"{dtype} {size}" for dtype, size in columns]
        rows = [
            [f"`{kernel}`", against] + [cells.get(c, "–") for c in columns]
            for (kernel, against), cells in ratios.items()
        ]
        note = (
            f"The other's time over cbrtgrad's, one thread (above 1: cbrtgrad is faster). "
            f"CPU: {next(iter(machines))}. From {self.sources()}."
        )
        return [*_markdown_table(header, rows), "", note]


class GpuRatioTable(_TableDirective):
    """``{gpu-ratio-table} JSON``: the GPU kernels against a copy and the GPU peers."""

    def markdown(self) -> list[str]:
        (path,) = self.files()
        device, ratios = gpu_ratios(path)
        dtypes = list(dict.fromkeys(d for cells in ratios.values() for d in cells))
        header = ["kernel", "against", *dtypes]
        rows = [
            [f"`{kernel}`", against] + [cells.get(d, "–") for d in dtypes]
            for (kernel, against), cells in ratios.items()
        ]
        note = (
            "Against a copy: the share of a copy's bandwidth the kernel reaches; against a "
            "peer: the peer's time over cbrtgrad's (above 1: cbrtgrad is faster). "
            f"GPU: {device}. From {self.sources()}."
        )
        return [*_markdown_table(header, rows), "", note]


class AccuracyTable(_TableDirective):
    """``{accuracy-table} VERIFY``: the forward and gradient errors of each backend."""

    def markdown(self) -> list[str]:
        (path,) = self.files()
        lines = path.read_text(encoding="utf-8").splitlines()
        header = ["backend", "dtype", "forward: largest error", "correctly rounded"]
        header += ["gradient: largest error", "given `y`"]
        rows = []
        for row in _table_rows(path, lines, "backend"):
            if len(row) < 10:
                raise ExtensionError(f"{path}: short row {' '.join(row)!r}")
            backend, dtype, _, max_ulp, share, _, _, grad, given = row[:9]
            rows.append(
                [f"`{backend}`", dtype, f"{max_ulp} ulp", share, f"{grad} ulp", f"{given} ulp"]
            )
        if not rows:
            raise ExtensionError(f"{path}: no rows")
        note = (
            f"`cbrtgrad verify -n {_verify_size(path, lines)}` (`numpy` is `np.cbrt`). CPU: "
            f"{_cpu_line(path, lines)}. From {self.sources()}."
        )
        return [*_markdown_table(header, rows), "", note]


def _verify_size(path: Path, lines: list[str]) -> str:
    """The number of inputs per row of a verify table (its ``n`` column, the same on each)."""
    sizes = {row[2] for row in _table_rows(path, lines, "backend")}
    if len(sizes) != 1:
        raise ExtensionError(f"{path}: rows of different sizes {sorted(sizes)}")
    return sizes.pop()


def setup(app: Sphinx) -> dict[str, object]:
    """Register the directives."""
    app.add_directive("ratio-table", RatioTable)
    app.add_directive("gpu-ratio-table", GpuRatioTable)
    app.add_directive("accuracy-table", AccuracyTable)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
