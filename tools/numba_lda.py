"""The worked example of docs/numba.md at full size: LDA exchange over a density grid.

The page's example (``lda_exchange`` with ``cbrtgrad.numba.cbrt``, against
the same loop with ``rho ** (1/3)``) on a 128^3 grid, with two more variants:
numba's own ``np.cbrt`` in the loop, and ``cbrtgrad.numba.cbrt_into`` over
blocks of the grid (the vectorised block function; the same bits as the
scalar loop, checked here). For each: the best time (every variant in turns,
:func:`cbrtgrad.cli.bench.timing.best_times`) on all of numba's threads, and the
largest error of ``e_x = -C rho^(4/3)`` and ``v_x = -(4/3) C rho^(1/3)`` in
ulp against mpmath (200 bits, taking the float constants the code uses as
exact) over a sample of grid points. docs/generated/numba_lda.txt is its
output::

    python tools/numba_lda.py > docs/generated/numba_lda.txt
"""

from __future__ import annotations

import argparse
import sys

import mpmath
import numba
import numpy as np

from cbrtgrad.build import isa as _isa
from cbrtgrad.cli.bench.timing import best_times
from cbrtgrad.numba import cbrt, cbrt_into
from cbrtgrad.verification import text as _text

C_X = 0.75 * (3 / np.pi) ** (1 / 3)  # Dirac's exchange constant
BLOCK = 4096


@numba.njit(parallel=True)
def lda_exchange(rho, e_x, v_x):  # type: ignore[no-untyped-def]
    for i in numba.prange(rho.size):
        r = cbrt(rho[i])
        e_x[i] = -C_X * rho[i] * r
        v_x[i] = -(4 / 3) * C_X * r


@numba.njit(parallel=True)
def lda_exchange_pow(rho, e_x, v_x):  # type: ignore[no-untyped-def]
    for i in numba.prange(rho.size):
        r = rho[i] ** (1 / 3)
        e_x[i] = -C_X * rho[i] * r
        v_x[i] = -(4 / 3) * C_X * r


@numba.njit(parallel=True)
def lda_exchange_np_cbrt(rho, e_x, v_x):  # type: ignore[no-untyped-def]
    for i in numba.prange(rho.size):
        r = np.cbrt(rho[i])
        e_x[i] = -C_X * rho[i] * r
        v_x[i] = -(4 / 3) * C_X * r


@numba.njit(parallel=True)
def lda_exchange_blocks(rho, e_x, v_x):  # type: ignore[no-untyped-def]
    for b in numba.prange((rho.size + BLOCK - 1) // BLOCK):
        start, stop = b * BLOCK, min((b + 1) * BLOCK, rho.size)
        cbrt_into(rho[start:stop], v_x[start:stop])  # v_x holds rho^(1/3) for now
        for i in range(start, stop):
            e_x[i] = -C_X * rho[i] * v_x[i]
            v_x[i] = -(4 / 3) * C_X * v_x[i]


VARIANTS = {
    "cbrtgrad.numba.cbrt(rho[i])": lda_exchange,
    "rho[i] ** (1/3)": lda_exchange_pow,
    "np.cbrt(rho[i])": lda_exchange_np_cbrt,
    "cbrtgrad.numba.cbrt_into per 4096-point block": lda_exchange_blocks,
}


def density(n: int) -> np.ndarray:
    """A Gaussian density on an n^3 grid over [-6, 6]^3 (down to about 1e-47)."""
    axis = np.linspace(-6.0, 6.0, n)
    x, y, z = np.meshgrid(axis, axis, axis, indexing="ij")
    return np.ravel(np.exp(-(x**2 + y**2 + z**2)) / np.pi**1.5)


def max_ulp(
    got: np.ndarray, rho: np.ndarray, factor: float, power: int, points: np.ndarray
) -> float:
    """The largest error of ``got[i]`` against ``factor rho^(power/3)``, exactly, in ulp."""
    worst = 0.0
    for i in points:
        r = mpmath.mpf(float(rho[i]))
        exact = mpmath.mpf(factor) * r ** (power // 3) * mpmath.cbrt(r) ** (power % 3)
        ulp = np.spacing(abs(float(exact)))
        worst = max(worst, float(abs(mpmath.mpf(float(got[i])) - exact) / ulp))
    return worst


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--grid", type=int, default=128, help="points per axis (default 128)")
    parser.add_argument("--repeat", type=int, default=20, help="rounds of measurements")
    parser.add_argument("--sample", type=int, default=5000, help="points checked with mpmath")
    args = parser.parse_args(argv)
    mpmath.mp.prec = 200
    rho = density(args.grid)
    outputs = {name: (np.empty_like(rho), np.empty_like(rho)) for name in VARIANTS}
    for name, function in VARIANTS.items():
        function(rho, *outputs[name])
    scalar, blocks = outputs["cbrtgrad.numba.cbrt(rho[i])"], outputs[list(VARIANTS)[-1]]
    assert all(
        np.array_equal(a.view(np.int64), b.view(np.int64))
        for a, b in zip(scalar, blocks, strict=True)
    )
    runs = [
        lambda f=f, o=o: f(rho, *o)
        for f, o in zip(VARIANTS.values(), outputs.values(), strict=True)
    ]
    times = best_times(runs, args.repeat)
    points = np.random.default_rng(0).choice(rho.size, min(args.sample, rho.size), replace=False)
    rows = []
    for (name, (e_x, v_x)), seconds in zip(outputs.items(), times, strict=True):
        e_error = max_ulp(e_x, rho, -C_X, 4, points)
        v_error = max_ulp(v_x, rho, -(4 / 3) * C_X, 1, points)
        rows.append((name, seconds * 1e3, f"{seconds / times[0]:.2f}x", e_error, v_error))
    print(f"CPU: {_isa.host_isa().describe()}; numba {numba.__version__}, "
          f"{numba.get_num_threads()} threads")  # fmt: skip
    print(f"grid {args.grid}^3 = {rho.size} points, float64; errors over {points.size} of them")
    header = ("rho^(1/3) by", "time (ms)", "vs cbrt", "e_x max ulp", "v_x max ulp")
    print(_text.table(header, rows, ("", ".2f", "", ".2f", ".2f")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
