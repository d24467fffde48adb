"""The package's rooms and their sizes: the figures of docs/architecture.md's picture.

Every module of ``cbrtgrad/`` belongs to exactly one room (a test checks it,
so that a new module is placed in the picture); run this to print each room's
modules and line count, and the total, for the page::

    python tools/room_lines.py                 # print them
    python tools/room_lines.py --update-page   # and write them into docs/architecture.md
"""

from __future__ import annotations

import fnmatch
import re
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "cbrtgrad"

#: The rooms, from the arithmetic up, then those beside the stack: each a
#: name and the glob patterns (relative to the package) of its modules.
ROOMS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("kernels", ("kernels/*.py",)),
    ("backends", ("backends/*.py",)),
    (
        "api",
        (
            "api.py",
            "_dtypes.py",
            "_ufunc_args.py",
            "_half.py",
            "_array_kinds.py",
            "_namespaces.py",
            "_subclasses.py",
            "_host.py",
            "__init__.py",
            "_version.py",
        ),
    ),
    ("engine", ("engine/*.py",)),
    ("bridges", ("torch/*.py", "jax/*.py", "mlx/*.py", "numba.py", "_numba_types.py")),
    ("verification", ("verification/*.py",)),
    (
        "cli",
        (
            "cli.py",
            "_cli_types.py",
            "__main__.py",
            "bench/*.py",
            "warming.py",
            "_warm_units.py",
            "_warm_report.py",
            "_progress.py",
            "_text.py",
        ),
    ),
    (
        "compile and cache",
        (
            "_compile.py",
            "_simd_shape.py",
            "_cache.py",
            "_kernel_locator.py",
            "_cache_entries.py",
            "_native_build.py",
            "_isa.py",
            "_config.py",
        ),
    ),
)


def modules() -> list[str]:
    """Every module of the package, relative to it, sorted."""
    return sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py"))


def room_of(module: str) -> list[str]:
    """The rooms whose patterns match ``module`` (exactly one, for a placed module)."""
    return [name for name, patterns in ROOMS if any(fnmatch.fnmatch(module, p) for p in patterns)]


def lines(module: str) -> int:
    """The module's lines, as ``wc -l`` counts them."""
    return (PACKAGE / module).read_bytes().count(b"\n")


def room_lines() -> dict[str, int]:
    """Lines per room, in the order of :data:`ROOMS`."""
    totals = {name: 0 for name, _ in ROOMS}
    for module in modules():
        for name in room_of(module):
            totals[name] += lines(module)
    return totals


def update_page(path: Path) -> None:
    """Write the current counts into the picture of ``path`` (docs/architecture.md).

    Each room's first ``name  count`` and the ``total  count`` line are
    rewritten, the width of the count kept so that the picture stays drawn.
    """
    text = path.read_text(encoding="utf-8")
    totals = room_lines()
    counts = {**totals, "total": sum(totals.values())}
    for name, count in counts.items():
        pattern = re.compile(rf"(\b{re.escape(name)} +)([\d,]+)")
        found = pattern.search(text)
        if found is None:
            raise SystemExit(f"{path} draws no count for {name!r}")
        new = f"{found.group(1)}{count:,}".ljust(len(found.group(0)))
        text = text[: found.start()] + new + text[found.end() :]
    path.write_text(text, encoding="utf-8")


def main() -> None:
    if sys.argv[1:] == ["--update-page"]:
        update_page(PACKAGE.parent / "docs" / "architecture.md")
    totals = room_lines()
    for name, count in totals.items():
        print(f"{name:20s} {count:6d}")
    print(f"{'total':20s} {sum(totals.values()):6d}")
    largest = max(modules(), key=lines)
    print(f"largest module: {largest} ({lines(largest)} lines)")


if __name__ == "__main__":
    main()
