"""Time today's forward (or gradient) ufuncs against those of an earlier commit, in one process.

Issue 12 asks that the correctly rounded float64 forward run at least 0.9x
as fast as the kernel of the day the issue was filed, on the same machine.
Two processes on a shared 2-core machine see different slow spells, so this
tool loads both kernels into one process and times them in turn:

1. ``git archive REF cbrtgrad`` is unpacked into a temporary folder under
   the package name ``cbrtgrad_at_REF`` (the kernels import each other
   relatively, so the copy is a second, independent package);
2. both packages' single-thread ufuncs (``ufuncs().cube_root`` of their kernels' catalog)
   compile for this CPU, each with its own compile policy (vector width,
   interleave) as of its commit;
3. for each dtype and size, ``rounds`` turns of: today's ufunc, the old
   ufunc, ``np.cbrt``; each turn the best of ``repeat`` measurements
   (:func:`cbrtgrad.cli.bench.timing.best_time`), each figure the best over the
   turns, on :func:`cbrtgrad.cli.bench.inputs.bench_inputs` written into
   a preallocated ``out=``.

The ufuncs are called directly, so the figures are the kernels' loops, not
``cbrtgrad.cbrt``'s Python call (about 2 us). It also counts the results on
which the two kernels differ (the old float64 one was not correctly rounded),
bit for bit. ``--kernel grad`` does the same for the gradient ufuncs, on
``g`` from the same inputs and ``y`` today's cube root of another draw,
against numpy's ``g / (3 * y * y)`` in place of ``np.cbrt``.

    python tools/compare_kernels_with_commit.py 5908c53
    python tools/compare_kernels_with_commit.py 5908c53 --sizes 100000 --rounds 3 --dtypes float64
    python tools/compare_kernels_with_commit.py bb16daa --kernel grad
"""

from __future__ import annotations

import argparse
import functools
import importlib
import io
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from cbrtgrad.build.isa import host_isa
from cbrtgrad.cli.bench.inputs import bench_inputs
from cbrtgrad.cli.bench.timing import best_time
from cbrtgrad.kernels.cpu import catalog as cpu
from cbrtgrad.verification import text as _text

ROOT = Path(__file__).resolve().parent.parent


def resolve(ref: str) -> str:
    """The short hash of commit ``ref`` of this repository; ValueError if there is none."""
    done = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", "--short", f"{ref}^{{commit}}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0 or not done.stdout.strip():
        raise ValueError(f"ref: {ref!r} is not a commit of this repository")
    return done.stdout.strip()


def load_package_at(ref: str, into: Path) -> Any:
    """Import the ``cbrtgrad`` package of commit ``ref`` as ``cbrtgrad_at_<sha>``."""
    sha = resolve(ref)
    name = f"cbrtgrad_at_{sha}"
    archive = subprocess.run(
        ["git", "archive", "--format=tar", sha, "cbrtgrad"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    (into / "cbrtgrad").rename(into / name)
    sys.path.insert(0, str(into))
    try:  # the kernels' catalog since the package's folders are its layers
        return importlib.import_module(f"{name}.kernels.cpu.catalog"), sha
    except ModuleNotFoundError:
        return importlib.import_module(f"{name}.kernels.cpu"), sha


def _numpy_gradient(g: np.ndarray, y: np.ndarray, out: np.ndarray) -> np.ndarray:
    """numpy's three-pass ``g / (3 * y * y)`` into ``out``: the gradient's anchor."""
    return np.divide(g, 3 * y * y, out=out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("ref", help="the earlier commit (e.g. 5908c53)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 10_000_000])
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float64"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--kernel", choices=("forward", "grad"), default="forward")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.repeat < 1:
        parser.error("--rounds and --repeat must be at least 1")
    for n in args.sizes:
        if n < 1:
            parser.error(f"--sizes must be positive, got {n}")
    for d in args.dtypes:
        if d not in ("float32", "float64"):
            parser.error(f"--dtypes: float32 or float64, got {d!r}")
    try:
        resolve(args.ref)
    except ValueError as exc:
        parser.error(str(exc))

    with tempfile.TemporaryDirectory() as tmp:
        old_cpu, sha = load_package_at(args.ref, Path(tmp))
        grad = args.kernel == "grad"
        name = "cube_root_grad" if grad else "cube_root"
        today = getattr(cpu.ufuncs(), name)
        old = getattr(old_cpu.ufuncs(), name)
        anchor = "g/(3*y*y)" if grad else "np.cbrt"
        calls = {"today": today, f"at {sha}": old, anchor: _numpy_gradient if grad else np.cbrt}
        times: dict[tuple[str, int, str], list[float]] = {}
        inputs = []
        for d in args.dtypes:
            for n in args.sizes:
                x = bench_inputs(np.dtype(d), n, seed=1)
                operands = (
                    (x, cpu.ufuncs().cube_root(bench_inputs(np.dtype(d), n, seed=2)))
                    if grad
                    else (x,)
                )
                out = np.empty_like(x)
                for f in calls.values():
                    f(*operands, out=out)  # compiled and pages touched before timing
                inputs.append((d, n, operands, out))
        for _ in range(args.rounds):
            for d, n, operands, out in inputs:
                reps = args.repeat if n <= 1_000_000 else max(3, args.repeat // 4)
                for label, f in calls.items():
                    t = best_time(functools.partial(f, *operands, out=out), reps)
                    times.setdefault((d, n, label), []).append(t)
        rows = []
        for d, n, operands, _ in inputs:
            best = {label: min(times[(d, n, label)]) / n * 1e9 for label in calls}
            bits = np.dtype(d.replace("float", "int"))
            differ = int(np.count_nonzero(today(*operands).view(bits) != old(*operands).view(bits)))
            old_ns, np_ns = best[f"at {sha}"], best[anchor]
            rows.append(
                [
                    d,
                    n,
                    best["today"],
                    old_ns,
                    np_ns,
                    old_ns / best["today"],
                    np_ns / best["today"],
                    differ,
                ]
            )
    print(f"cpu: {host_isa().describe()}")
    print(
        f"numpy {np.__version__}; {args.rounds} rounds in turn, best of {args.repeat} each;"
        " ns per element, ufunc called directly with out="
    )
    head = [
        "dtype",
        "n",
        "today",
        f"at {sha}",
        anchor,
        f"{sha}/today",
        f"{anchor}/today",
        "results differ",
    ]
    print(_text.table(head, rows, ["", ",d", ".3f", ".3f", ".3f", ".2f", ".2f", ",d"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
