"""Regenerate the measured figures of the docs pages (``docs/generated/``).

Runs the command-line code itself (``cbrtgrad verify``, ``cbrtgrad bench``, and
``python tools/measure.py plot`` and ``peers``, the measuring code that is not
shipped), so the pages show exactly what the commands print and draw::

    python docs/make_plots.py               # the full run: a few minutes
    python docs/make_plots.py --quick       # fewer sizes, inputs and repeats: about a minute
    python docs/make_plots.py --exhaustive  # also the 2^32 float32 sweep (a minute on 2 cores)
    python docs/make_plots.py --peers       # only the table of vectorised peers (peers_table.txt)

The Sphinx build only reads the files written here; it measures nothing.
Commit the regenerated files with the change that moved the numbers.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import os
import subprocess
import sys
from collections.abc import Callable, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # this tree's cbrtgrad (and tools), not an installed one

from cbrtgrad.cli import main as cli  # noqa: E402
from tools import measure  # noqa: E402

FULL = {"table_sizes": [100_000, 10_000_000], "curve_sizes": None, "repeat": 20, "n": 20_000}
QUICK = {
    "table_sizes": [100_000, 1_000_000],
    "curve_sizes": [100, 10_000, 1_000_000],
    "repeat": 3,
    "n": 2_000,
}


def _run_cli(argv: list[str], main: Callable[[list[str]], int] = cli.main) -> str:
    # The tables go to stdout (captured); the progress bar stays on stderr.
    # ``main`` is the cbrtgrad command's, or tools/measure.py's.
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        status = main(argv)
    if status != 0:
        name = "cbrtgrad" if main is cli.main else "python tools/measure.py"
        raise SystemExit(f"{name} {' '.join(argv)} exited with {status}")
    return buffer.getvalue()


def _commit() -> str:
    """The checked-out commit, and whether the tree differs from it."""
    root = os.path.dirname(HERE)

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return f"{commit} (with uncommitted changes)" if dirty else commit


def write_peers(out: str, sizes: list[int], repeat: int) -> str:
    """Measure ``python tools/measure.py peers`` and write ``peers_table.txt``; returns its path.

    The peer table is measured on its own (it imports jax where installed,
    and its figures for cbrtgrad move with the kernels): its first line says
    when, at which commit and with which command.
    """
    argv = ["peers", "--sizes", *map(str, sizes), "--repeat", str(repeat)]
    table = _run_cli(argv, measure.main)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    header = f"measured {stamp} at commit {_commit()}: python tools/measure.py {' '.join(argv)}"
    path = os.path.join(out, "peers_table.txt")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(header + "\n" + table.rstrip("\n") + "\n")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """Measure and write the files of ``docs/generated/``; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few sizes and repeats")
    parser.add_argument("--out", default=os.path.join(HERE, "generated"), help="output folder")
    parser.add_argument("--table-sizes", type=int, nargs="+", help="sizes of the bench table")
    parser.add_argument("--curve-sizes", type=int, nargs="+", help="sizes of the plot")
    parser.add_argument("--repeat", type=int, help="best of this many calls")
    parser.add_argument("-n", type=int, help="random inputs per dtype for verify")
    parser.add_argument("--exhaustive", action="store_true", help="also the float32 sweep")
    parser.add_argument(
        "--peers",
        action="store_true",
        help="instead: only the table of vectorised peers (measure.py peers), peers_table.txt",
    )
    args = parser.parse_args(argv)
    preset = QUICK if args.quick else FULL
    table_sizes = args.table_sizes or preset["table_sizes"]
    curve_sizes = args.curve_sizes or preset["curve_sizes"]
    repeat = args.repeat or preset["repeat"]
    n = args.n or preset["n"]
    os.makedirs(args.out, exist_ok=True)
    if args.peers:
        print(f"wrote {write_peers(args.out, table_sizes, repeat)}")
        return 0

    verify = _run_cli(["verify", "-n", str(n)])
    if args.exhaustive:
        sweep = _run_cli(["verify", "-n", "100", "--backends", "cpu", "--exhaustive"])
        sweep = sweep[sweep.index("Exhaustive") :]

    table = _run_cli(["bench", "--sizes", *map(str, table_sizes), "--repeat", str(repeat)])
    plot_argv = ["plot", os.path.join(args.out, "bench_curve.png")]
    plot_argv += ["--repeat", str(repeat)]
    if curve_sizes:
        plot_argv += ["--sizes", *map(str, curve_sizes)]
    load_before = os.getloadavg() if hasattr(os, "getloadavg") else None
    curve = _run_cli(plot_argv, measure.main)
    curve = "\n".join(line for line in curve.splitlines() if not line.startswith("plot written"))

    # The versions and the CPU; the backend lines say more than the page needs.
    info = [line for line in cli.info_lines() if not line.startswith(" ") and ":" not in line[-1:]]
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    custom = args.table_sizes or args.curve_sizes or args.repeat or args.n
    mode = "custom" if custom else "quick" if args.quick else "full"
    # Other work on the machine slows the parallel backend most: say how busy it was.
    load = ", ".join(f"{v:.1f}" for v in load_before) if load_before else "unknown"
    header = (
        f"measured {stamp}, {mode} run (best of {repeat}), python docs/make_plots.py; "
        f"load average before the curve {load}"
    )
    files = {
        "verify_table.txt": verify,
        "bench_table.txt": table,
        "bench_curve.txt": curve,
        "machine.txt": "\n".join([header, *info]),
    }
    if args.exhaustive:
        files["exhaustive.txt"] = sweep
    for name, text in files.items():
        with open(os.path.join(args.out, name), "w", encoding="utf-8") as handle:
            handle.write(text.rstrip("\n") + "\n")
    print(f"wrote {', '.join([*files, 'bench_curve.png'])} to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
