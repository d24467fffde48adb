"""The float32 forward's step 2: the range it must cover and its minimax quadratic.

Step 1 of the float32 cube root (``inverse_cbrt_f32`` in
``cbrtgrad/kernels/formulas/f32.py``) leaves ``e = xs r^3 - 1`` in a narrow range;
step 2 computes ``y1 = xs r^2 P(u)``, ``u = 1 + e``, with ``P`` a quadratic
close to ``u^(-2/3)`` in relative error; step 3 needs ``y1`` within 2^-25 of the
root (relative) to pick the correctly rounded float32 (docs/mathematics.md).

``range``: ``e`` for every positive normal float32 (2^31 of them, through the
kernel's own compiled step 1, in float64 after it), about 15 s; with
``--integer-third``, through the CUDA kernels' step 1 instead (the bit trick's
third an integer division, ``inverse_cbrt_f32_integer_third``).

``fit LO HI``: the minimax quadratic of ``u^(-2/3)`` on ``[1 + LO, 1 + HI]``
in relative error (Lawson's iteration, ``tools/_minimax.py``, on 20 001 points), its coefficients as
the kernel writes them, and its largest error, rechecked with mpmath at 2001
points at 60 digits; then the same error for the kernel's own coefficients
(Lawson's iteration converges slowly: reruns agree to about 1e-9).

    python tools/fit_cbrt_f32_series.py range
    python tools/fit_cbrt_f32_series.py range --integer-third
    python tools/fit_cbrt_f32_series.py fit -0.00705 6e-7
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
from cbrtgrad.kernels.formulas import f32 as formulas_f32  # noqa: E402
from cbrtgrad.kernels.formulas.primitives import i32_as_f32  # noqa: E402

_inverse_cbrt_f32 = cpu.FORMULAS.inverse_cbrt_f32
_inverse_cbrt_f32_integer_third = cpu.FORMULAS.inverse_cbrt_f32_integer_third
_KERNEL_COEFFICIENTS = (formulas_f32._P0, formulas_f32._P1, formulas_f32._P2)


@numba.njit(cache=False)
def _e_range(first: int, last: int, integer_third: bool) -> tuple[float, float]:  # pragma: no cover
    lo = math.inf
    hi = -math.inf
    for bits in range(first, last):
        xs = i32_as_f32(np.int32(bits))
        if integer_third:
            r = np.float64(_inverse_cbrt_f32_integer_third(np.int64(bits)))
        else:
            r = np.float64(_inverse_cbrt_f32(xs))
        e = np.float64(xs) * r * r * r - 1.0
        lo = min(lo, e)
        hi = max(hi, e)
    return lo, hi


def e_range(integer_third: bool = False) -> tuple[float, float]:
    """The least and largest ``xs r^3 - 1`` over every positive normal float32.

    ``integer_third`` measures the CUDA kernels' step 1 instead of the CPU's.

    ``xs r^3`` is evaluated in float64 from the float32 ``xs`` and ``r``: three
    roundings of 2^-53, far inside the margins it is used with.
    """
    return _e_range(0x00800000, 0x7F800000, integer_third)


def fit(lo: float, hi: float) -> tuple[np.ndarray, float]:
    """Coefficients ``(P0, P1, P2)`` and largest relative error of the minimax quadratic."""
    if not -0.5 < lo < hi < 0.5:
        raise ValueError(f"need -0.5 < LO < HI < 0.5, got LO={lo!r}, HI={hi!r}")
    u = 1.0 + np.linspace(lo, hi, 20001)
    f = u ** (-2.0 / 3.0)
    basis = np.vander(u, 3, increasing=True) / f[:, None]
    coefficients = lawson(basis, np.ones(u.size))
    return coefficients, max_error(coefficients, lo, hi)


def max_error(coefficients: Any, lo: float, hi: float) -> float:
    """The largest relative error of ``P0 + P1 u + P2 u^2`` against ``u^(-2/3)``, by mpmath."""
    import mpmath

    mpmath.mp.dps = 60
    c0, c1, c2 = (mpmath.mpf(float(c)) for c in coefficients)
    worst = mpmath.mpf(0)
    for e in np.linspace(lo, hi, 2001):
        u = 1 + mpmath.mpf(float(e))
        worst = max(worst, abs((c0 + c1 * u + c2 * u * u) * u ** (mpmath.mpf(2) / 3) - 1))
    return float(worst)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    commands = parser.add_subparsers(dest="command", required=True)
    ranging = commands.add_parser("range", help="e = xs r^3 - 1 over every normal float32")
    ranging.add_argument(
        "--integer-third", action="store_true", help="the CUDA kernels' step 1 (integer third)"
    )
    fitting = commands.add_parser("fit", help="the minimax quadratic on [1 + LO, 1 + HI]")
    fitting.add_argument("lo", type=float)
    fitting.add_argument("hi", type=float)
    args = parser.parse_args(argv)
    if args.command == "range":
        lo, hi = e_range(args.integer_third)
        print(f"e = xs r^3 - 1 over every positive normal float32: [{lo!r}, {hi!r}]")
        return 0
    coefficients, worst = fit(args.lo, args.hi)
    for name, c in zip(("_P0", "_P1", "_P2"), coefficients, strict=True):
        print(f"{name} = {float(c)!r}")
    print(
        f"largest relative error on [1 + {args.lo!r}, 1 + {args.hi!r}]: "
        f"{worst:.4g} = 2^{math.log2(worst):.2f}"
    )
    kernel = max_error(_KERNEL_COEFFICIENTS, args.lo, args.hi)
    print(f"the kernel's coefficients there: {kernel:.4g} = 2^{math.log2(kernel):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
