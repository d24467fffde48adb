"""The float64 forward's inverse cube root: the range it must cover and its minimax polynomial.

``inverse_cbrt_f64`` in ``cbrtgrad/kernels/formulas/f64.py`` starts from the bit
trick's ``r0`` (``inverse_cbrt_guess_f64``), forms ``e = a r0^3 - 1`` and returns
``r = r0 (1 + e Q(e))``, with ``1 + e Q(e)`` a degree-6 polynomial close to
``(1 + e)^(-1/3)`` in relative error; the proof of correct rounding needs
``|r a^(1/3) - 1| <= 2^-31.5`` (docs/mathematics.md).

``range``: ``e`` over every positive normal float64. ``r0`` depends on the
high 32 bits of the pattern alone, and for a fixed ``r0`` ``e`` grows with
``a``, so the two ends of each high word's 2^32 patterns bound it: 2^31 high
words through the kernel's own compiled bit trick, about 20 s.

``fit LO HI``: the minimax ``Q`` (degree 5) on ``[LO, HI]`` in the relative
error of ``1 + e Q(e)`` against ``(1 + e)^(-1/3)`` (Lawson's iteration on
40 001 points), its coefficients as the kernel writes them, and its largest
error, rechecked with mpmath at 4001 points at 50 digits; then the same for
the kernel's own coefficients.

    python tools/fit_cbrt_f64_inverse.py range
    python tools/fit_cbrt_f64_inverse.py fit -0.0995 0.1068
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _minimax import lawson  # noqa: E402

from cbrtgrad.kernels.cpu import catalog as cpu  # noqa: E402
from cbrtgrad.kernels.formulas import f64 as formulas_f64  # noqa: E402
from cbrtgrad.kernels.formulas.primitives import i64_as_f64  # noqa: E402

_guess = cpu.FORMULAS.inverse_cbrt_guess_f64
KERNEL_COEFFICIENTS = (
    formulas_f64._Q0,
    formulas_f64._Q1,
    formulas_f64._Q2,
    formulas_f64._Q3,
    formulas_f64._Q4,
    formulas_f64._Q5,
)
#: Degree of Q: 1 + e Q(e) has degree 6.
DEGREE = 5


@numba.njit(cache=False)
def _e_range(first: int, last: int) -> tuple[float, float]:  # pragma: no cover - compiled
    lo = math.inf
    hi = -math.inf
    for high in range(first, last):
        for low in (0, 0xFFFFFFFF):
            a = i64_as_f64(np.int64((high << 32) | low))
            r = _guess(a)
            # a r^3 - 1 to within a few 2^-53: far inside the margins used.
            e = (a * r) * (r * r) - 1.0
            lo = min(lo, e)
            hi = max(hi, e)
    return lo, hi


def e_range(first: int = 0x00100000, last: int = 0x7FF00000) -> tuple[float, float]:
    """The least and largest ``a r0^3 - 1`` over the high words ``[first, last)``.

    The default is every positive normal float64.
    """
    return _e_range(first, last)


def fit(lo: float, hi: float) -> tuple[np.ndarray, float]:
    """Coefficients ``Q0 .. Q5`` and the largest relative error of ``1 + e Q(e)``."""
    if not -0.5 < lo < 0.0 < hi < 0.5:
        raise ValueError(f"need -0.5 < LO < 0 < HI < 0.5, got LO={lo!r}, HI={hi!r}")
    e = np.linspace(lo, hi, 40001)
    e = e[e != 0.0]
    root = (1.0 + e) ** (1.0 / 3.0)
    # (1 + e Q(e)) root - 1, linear in Q's coefficients.
    basis = (root * e)[:, None] * np.vander(e, DEGREE + 1, increasing=True)
    coefficients = lawson(basis, 1.0 - root, iterations=2000)
    return coefficients, max_error(coefficients, lo, hi)


def max_error(coefficients: Any, lo: float, hi: float) -> float:
    """The largest ``|(1 + e Q(e)) (1 + e)^(1/3) - 1|`` on ``[lo, hi]``, by mpmath."""
    import mpmath

    mpmath.mp.dps = 50
    q = [mpmath.mpf(float(c)) for c in coefficients]
    worst = mpmath.mpf(0)
    third = mpmath.mpf(1) / 3
    for value in np.linspace(lo, hi, 4001):
        e = mpmath.mpf(float(value))
        p = 1 + e * mpmath.polyval(q[::-1], e)
        worst = max(worst, abs(p * (1 + e) ** third - 1))
    return float(worst)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("range", help="e = a r0^3 - 1 over every positive normal float64")
    fitting = commands.add_parser("fit", help="the minimax polynomial on [LO, HI]")
    fitting.add_argument("lo", type=float)
    fitting.add_argument("hi", type=float)
    args = parser.parse_args(argv)
    if args.command == "range":
        lo, hi = e_range()
        print(f"e = a r0^3 - 1 over every positive normal float64: [{lo!r}, {hi!r}]")
        return 0
    coefficients, worst = fit(args.lo, args.hi)
    for i, c in enumerate(coefficients):
        print(f"_Q{i} = {float(c)!r}")
    print(
        f"largest relative error on [{args.lo!r}, {args.hi!r}]: "
        f"{worst:.4g} = 2^{math.log2(worst):.2f}"
    )
    kernel = max_error(KERNEL_COEFFICIENTS, args.lo, args.hi)
    print(f"the kernel's coefficients there: {kernel:.4g} = 2^{math.log2(kernel):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
