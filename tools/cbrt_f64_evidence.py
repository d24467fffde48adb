"""Evidence for the correctly rounded float64 cube root: hard cases and a large random check.

Two jobs, both on the CPU kernels:

``find-hard``: search random float64 inputs (all binades, both signs) for those
whose root lies so close to a midpoint between doubles that the fast path
sends them to the exact path, compute each one's correctly rounded root with
Python integers (``cbrtgrad/verification/integer_oracle.py``, no floating point), and write them
to ``tests/data/cbrt_f64_hard.txt`` (hex input, hex root), which the tests read.

``check-random N``: N random inputs over all binades through the ``cpu`` and
``parallel`` backends, and again without those under 2^-800 (so that whole
blocks take the plain fast path), each result checked exactly: ``y`` is the correctly
rounded root of ``x`` if and only if ``x`` lies strictly between the cubes of
the midpoints below and above ``y``, decided in integer arithmetic
(``kernels/formulas/exact_rounding.py``, itself checked against Python fractions in
``tests/test_correct_rounding_f64.py``).

``check-grad-random N``: N random pairs (g, y) over all binades through the
``cpu`` and ``parallel`` gradient, each result checked exactly: ``dx`` is the
correctly rounded ``g / (3 y^2)`` if and only if ``|g|`` lies strictly between
``3 m y^2`` at the midpoints below and above ``|dx|``, decided in integer
arithmetic (``above_midpoint_times_square``, checked against Python fractions
in ``tests/test_gradient_rounding_f64.py``). Pairs outside the proved domain
(``|g| < 2^-968``, results outside [2^-968, 2^1020)) are drawn again.

    python tools/cbrt_f64_evidence.py find-hard --inputs 400000000
    python tools/cbrt_f64_evidence.py check-random 100000000
    python tools/cbrt_f64_evidence.py check-grad-random 100000000
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numba
import numpy as np

from cbrtgrad import api
from cbrtgrad.build.isa import host_isa
from cbrtgrad.kernels.cpu import catalog as cpu
from cbrtgrad.kernels.formulas.exact_rounding import make_exact_rounding
from cbrtgrad.kernels.formulas.primitives import CPU_PRIMITIVES
from cbrtgrad.verification import cases
from cbrtgrad.verification.integer_oracle import correctly_rounded_cbrt

ROOT = Path(__file__).resolve().parent.parent
HARD_FILE = ROOT / "tests" / "data" / "cbrt_f64_hard.txt"
_exact = make_exact_rounding(CPU_PRIMITIVES, numba.njit)
_above = _exact.above_midpoint_cubed
_above_times_square = _exact.above_midpoint_times_square
_fast = cpu.FORMULAS.cube_root_f64_fast


@numba.njit
def _hard_flags(x, flags):  # type: ignore[no-untyped-def]
    for i in range(x.shape[0]):
        flags[i] = _fast(x[i])[1] != 0


@numba.njit
def _count_wrong(x, y):  # type: ignore[no-untyped-def]
    # y correctly rounded <=> m_below^3 < |x| < m_above^3 (finite nonzero x).
    wrong = 0
    for i in range(x.shape[0]):
        ax = abs(x[i])
        ay = abs(y[i])
        below = np.nextafter(ay, 0.0)
        above = np.nextafter(ay, np.inf)
        ok = _above(ax, below, ay) and not _above(ax, ay, above)
        ok = ok and (y[i] < 0.0) == (x[i] < 0.0)
        wrong += not ok
    return wrong


@numba.njit
def _count_wrong_grad(g, y, dx):  # type: ignore[no-untyped-def]
    # dx correctly rounded <=> 3 m_below y^2 < |g| < 3 m_above y^2.
    wrong = 0
    for i in range(g.shape[0]):
        ag = abs(g[i])
        ay = abs(y[i])
        ad = abs(dx[i])
        below = np.nextafter(ad, 0.0)
        above = np.nextafter(ad, np.inf)
        ok = _above_times_square(ag, below, ad, ay) and not _above_times_square(ag, ad, above, ay)
        ok = ok and (dx[i] < 0.0) == (g[i] < 0.0)
        wrong += not ok
    return wrong


def _random_pairs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = np.cbrt(cases.random_inputs(np.dtype(np.float64), n, seed))
    g = rng.uniform(-2.0, 2.0, n) * 2.0 ** rng.integers(-1000, 1000, n)
    with np.errstate(all="ignore"):
        q = np.abs(g / (3.0 * y * y))
    keep = (np.abs(g) >= 2.0**-968) & (q >= 2.0**-967) & (q < 2.0**1019)
    keep &= np.isfinite(y) & (y != 0)
    return g[keep], y[keep]


def check_grad_random(n: int, chunk: int = 10_000_000) -> int:
    print(f"CPU: {host_isa().describe()}")
    total_wrong = 0
    checked = 0
    start = time.perf_counter()
    for seed in range(max(1, n // chunk)):
        g, y = _random_pairs(chunk, 4000 + seed)
        for backend in ("cpu", "parallel"):
            dx = np.asarray(api.cbrt_grad(g, y, backend=backend))
            total_wrong += _count_wrong_grad(g, y, dx)
        checked += g.size
    seconds = time.perf_counter() - start
    print(f"{checked} random pairs x 2 backends: {total_wrong} wrong ({seconds:.0f} s)")
    return total_wrong


def _random(n: int, seed: int) -> np.ndarray:
    x = cases.random_inputs(np.dtype(np.float64), n, seed)
    # The exact check needs normal x (the kernels scale subnormals exactly,
    # so their roots are checked through x 2^300 below).
    return x[np.abs(x) >= np.finfo(np.float64).tiny]


def find_hard(inputs: int, chunk: int = 10_000_000) -> None:
    found: list[float] = []
    start = time.perf_counter()
    for seed in range(max(1, inputs // chunk)):
        x = cases.random_inputs(np.dtype(np.float64), chunk, 1000 + seed)
        flags = np.zeros(x.size, np.bool_)
        _hard_flags(x, flags)
        found += [float(v) for v in x[flags]]
    lines = [f"{x.hex()} {correctly_rounded_cbrt(x).hex()}" for x in sorted(set(found), key=abs)]
    HARD_FILE.parent.mkdir(exist_ok=True)
    header = (
        "# float64 inputs whose cube roots lie within about 2^-25 ulp of a midpoint between\n"
        "# doubles (the fast path's exact-path lanes), found by tools/cbrt_f64_evidence.py\n"
        f"# find-hard --inputs {inputs}; second column: the correctly rounded root, computed\n"
        "# with Python integers (cbrtgrad/verification/integer_oracle.py). input root, in hex.\n"
    )
    HARD_FILE.write_text(header + "\n".join(lines) + "\n", encoding="utf-8")
    seconds = time.perf_counter() - start
    print(f"{len(lines)} hard inputs in {inputs} random ones ({seconds:.0f} s) -> {HARD_FILE}")


def check_random(n: int, chunk: int = 10_000_000) -> int:
    print(f"CPU: {host_isa().describe()}")
    total_wrong = 0
    checked = 0
    start = time.perf_counter()
    for seed in range(max(1, n // chunk)):
        x = _random(chunk, 2000 + seed)
        # The same inputs without those under 2^-800: blocks of nothing but
        # plain inputs, which take the plain fast path (kernels/cpu/blocks.py:
        # forward_block_f64); nearly every block of x has a tiny input.
        plain = np.ascontiguousarray(x[np.abs(x) >= 2.0**-800])
        for backend in ("cpu", "parallel"):
            for inputs in (x, plain):
                y = np.asarray(api.cbrt(inputs, backend=backend))
                total_wrong += _count_wrong(inputs, y)
        checked += plain.size
        # Subnormal inputs: x 2^300 is normal and checked exactly, and the
        # root of x must be its root times 2^-100, exactly.
        rng = np.random.default_rng(3000 + seed)
        bits = rng.integers(1, 1 << 52, chunk // 100, dtype=np.int64)
        tiny = bits.view(np.float64) * rng.choice([-1.0, 1.0], bits.size)
        up = np.ldexp(tiny, 300)
        y_up = np.asarray(api.cbrt(up, backend="cpu"))
        total_wrong += _count_wrong(up, y_up)
        total_wrong += int(np.count_nonzero(np.ldexp(y_up, -100) != api.cbrt(tiny, backend="cpu")))
        checked += tiny.size
        checked += x.size
    seconds = time.perf_counter() - start
    print(f"{checked} random inputs x 2 backends: {total_wrong} wrong ({seconds:.0f} s)")
    return total_wrong


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    hard = sub.add_parser("find-hard")
    hard.add_argument("--inputs", type=int, default=400_000_000)
    rand = sub.add_parser("check-random")
    rand.add_argument("n", type=int)
    grad = sub.add_parser("check-grad-random")
    grad.add_argument("n", type=int)
    args = parser.parse_args()
    if args.command == "find-hard":
        find_hard(args.inputs)
        return 0
    if args.command == "check-grad-random":
        return 1 if check_grad_random(args.n) else 0
    return 1 if check_random(args.n) else 0


if __name__ == "__main__":
    sys.exit(main())
