"""``cbrtgrad verify``: accuracy of every available backend, as a table.

For each backend and dtype: the forward's max error in ulp against the exact
cube root, the share of correctly rounded results, how often it differs from
``scipy.special.cbrt``, the special values that are wrong (zeros,
infinities and exact cubes not bit for bit the roots known in advance, nan
not nan, extremes and subnormals beyond the bar), and the gradient's max
error against the exact derivative ``g / (3 x^(2/3))`` at the input and
against ``g / (3 y^2)`` for the saved output it was given (the kernel's own
error). cbrtgrad's own kernels must meet the bars of
:data:`cbrtgrad.verification.cases.BARS`; other backends (numpy, Accelerate)
are measured and reported, with no bar.

Every error is measured against the vectorised double-double reference of
:mod:`cbrtgrad.verification.reference` (within ``2^-100`` relative; errors
within ``2^-46`` ulp, the correctly-rounded decision exact). mpmath at 200
bits checks it independently on a sample of each row
(:data:`cbrtgrad.verification.cases.MPMATH_CHECK_SIZE` random elements and
the largest errors of each kind): a disagreement above
:data:`MPMATH_TOLERANCE` ulp fails the row, whatever the backend.
"""

from __future__ import annotations

import warnings
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import scipy.special

from .. import api
from ..backends import _registry
from . import cases, reference, ulp
from . import text as _text

#: Backends that run cbrtgrad's own formula and must meet the bars.
BACKENDS_WITH_BARS = ("cpu", "parallel", "cuda")

#: Largest disagreement, in ulp, allowed between the vectorised reference and
#: mpmath (relative to the error itself above 1 ulp).
MPMATH_TOLERANCE = 1e-6

#: The largest errors of each kind that the mpmath check always includes.
_CHECK_LARGEST = 8


@dataclass
class Row:
    """One line of the verify table."""

    backend: str
    dtype: str
    n: int
    forward_max_ulp: float
    correctly_rounded_share: float
    differs_from_scipy: int
    special_mismatches: int
    grad_max_ulp: float
    grad_given_y_max_ulp: float
    has_bars: bool
    passed: bool
    mpmath_checked: int = 0
    mpmath_max_diff: float = 0.0

    @property
    def reference_agrees(self) -> bool:
        """Whether mpmath confirmed the vectorised reference on this row's sample."""
        return self.mpmath_max_diff <= MPMATH_TOLERANCE


def _special_mismatches(backend: str, dtype: np.dtype) -> int:
    x = cases.special_values(dtype)
    got = _run(backend, x)
    # Exact results known in advance (zeros, infinities, exact cubes), bit for
    # bit; never a libm's (see cases.expected_special).
    want = cases.expected_special(dtype)
    exact = ~np.isnan(want)
    same_bits = got.view(np.uint8).reshape(x.size, -1) == want.view(np.uint8).reshape(x.size, -1)
    bad = exact & ~same_bits.all(axis=1)
    # nan stays nan (its payload may change).
    bad |= np.isnan(x) & ~np.isnan(got)
    # Non-exact specials (extremes, subnormals) must be within the bar, checked in ulp.
    inexact = ~exact & np.isfinite(x)
    errors = ulp.mpmath_ulp_errors(x[inexact], got[inexact], ulp.cbrt_exact)
    bar = cases.BARS[dtype].forward_max_ulp
    return int(bad.sum() + (errors > bar).sum())


def _to_host(value: Any) -> np.ndarray:
    copy = getattr(value, "copy_to_host", None)
    return np.asarray(copy() if copy is not None else value)


def _run(backend: str, x: np.ndarray) -> np.ndarray:
    if backend == "cuda":
        from numba import cuda

        return _to_host(api.cbrt(cuda.to_device(x), backend=backend))
    return np.asarray(api.cbrt(x, backend=backend))


def _run_grad(backend: str, g: np.ndarray, y: np.ndarray) -> np.ndarray:
    if backend == "cuda":
        from numba import cuda

        return _to_host(api.cbrt_grad(cuda.to_device(g), cuda.to_device(y), backend=backend))
    return np.asarray(api.cbrt_grad(g, y, backend=backend))


def verify_backend(backend: str, dtype: np.dtype, n: int, seed: int = 0) -> Row:
    """Measure one backend on one dtype with ``n`` random inputs.

    Parameters
    ----------
    backend : str
        A backend name (see :func:`cbrtgrad.backends.known`).
    dtype : numpy.dtype
        float32 or float64.
    n : int
        Random inputs (``cbrtgrad.verification.cases.random_inputs``),
        measured against the double-double reference
        (:func:`cbrtgrad.verification.reference.ulp_errors`); mpmath at 200
        bits rechecks a sample (:func:`mpmath_check`).
    seed : int, default 0
        Seed of the inputs (and of the sample mpmath rechecks).

    Returns
    -------
    Row
        One line of the table; ``passed`` says whether the bars were met
        (always True for a backend without bars) and mpmath agreed with the
        reference to ``MPMATH_TOLERANCE`` (1e-6 ulp) on the sample.

    Examples
    --------
    >>> row = verify_backend("cpu", np.dtype(np.float32), 200)
    >>> row.passed, row.forward_max_ulp <= 0.5
    (True, True)
    """
    x = cases.random_inputs(dtype, n, seed)
    y = _run(backend, x)
    errors = reference.ulp_errors(x, y, "cbrt")
    scipy_y = scipy.special.cbrt(x)
    g = np.ones_like(x)
    # Gradients are checked where they are finite in the dtype.
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        dx = _run_grad(backend, g, y)
    finite = np.isfinite(dx) & (dx != 0)
    xf, yf, dxf = x[finite], y[finite], dx[finite]
    grad_errors = reference.ulp_errors(xf, dxf, "grad")
    given_y = reference.ulp_errors(yf, dxf, "grad_given_y")
    rng = np.random.default_rng([seed, zlib.crc32(backend.encode()), dtype.itemsize])
    checks = [
        mpmath_check(x, y, errors, ulp.cbrt_exact, rng),
        mpmath_check(xf, dxf, grad_errors, ulp.grad_exact(1.0), rng),
        mpmath_check(yf, dxf, given_y, ulp.grad_from_output(1.0), rng),
    ]
    checked = sum(c[0] for c in checks)
    max_diff = max(c[1] for c in checks)
    bar = cases.BARS[dtype]
    has_bars = backend in BACKENDS_WITH_BARS
    specials = _special_mismatches(backend, dtype)
    fwd_max = float(errors.max(initial=0.0))
    grad_max = float(grad_errors.max(initial=0.0))
    given_max = float(given_y.max(initial=0.0))
    within_bars = (
        fwd_max <= bar.forward_max_ulp
        and grad_max <= bar.grad_max_ulp
        and given_max <= bar.grad_given_y_max_ulp
        and specials == 0
    )
    passed = (within_bars or not has_bars) and max_diff <= MPMATH_TOLERANCE
    return Row(
        backend=backend,
        dtype=str(dtype),
        n=n,
        forward_max_ulp=fwd_max,
        correctly_rounded_share=float(np.mean(errors <= 0.5)),
        differs_from_scipy=int(np.sum(scipy_y != y)),
        special_mismatches=specials,
        grad_max_ulp=grad_max,
        grad_given_y_max_ulp=given_max,
        has_bars=has_bars,
        passed=passed,
        mpmath_checked=checked,
        mpmath_max_diff=max_diff,
    )


def mpmath_check(
    x: np.ndarray,
    y: np.ndarray,
    errors: np.ndarray,
    exact: Callable[[Any], Any],
    rng: np.random.Generator,
    size: int = cases.MPMATH_CHECK_SIZE,
) -> tuple[int, float]:
    """Compare errors from the vectorised reference with mpmath's on a sample.

    The sample is ``size`` random elements plus the largest errors (those
    the table reports).

    Parameters
    ----------
    x, y : ndarray
        Inputs and results, as given to
        :func:`cbrtgrad.verification.reference.ulp_errors`.
    errors : ndarray
        Its errors in ulp, of the shape of ``x``.
    exact : callable
        The mpmath function of ``cbrtgrad.verification.ulp`` for the same kind
        (``cbrt_exact``, ``grad_exact(g)`` or ``grad_from_output(g)``).
    rng : numpy.random.Generator
        Draws the sample.
    size : int, default ``cases.MPMATH_CHECK_SIZE``
        Random elements in the sample.

    Returns
    -------
    checked : int
        Elements compared.
    max_diff : float
        Largest ``|errors - mpmath| / max(1, mpmath)``; inf where only one of
        them is nan.

    Examples
    --------
    >>> x = np.array([2.0, 27.0]); y = np.array([1.2599210498948732, 3.0000000000000004])
    >>> errors = reference.ulp_errors(x, y)
    >>> checked, diff = mpmath_check(x, y, errors, ulp.cbrt_exact, np.random.default_rng(0))
    >>> checked, diff < 1e-12
    (2, True)
    """
    count = errors.size
    if count == 0:
        return 0, 0.0
    sample = rng.choice(count, min(size, count), replace=False)
    largest = np.argsort(np.nan_to_num(errors, nan=np.inf))[-_CHECK_LARGEST:]
    index = np.union1d(sample, largest)
    theirs = ulp.mpmath_ulp_errors(x[index], y[index], exact)
    ours = errors[index]
    with np.errstate(invalid="ignore"):
        diff = np.abs(ours - theirs) / np.maximum(1.0, np.abs(theirs))
    both_nan = np.isnan(ours) & np.isnan(theirs)
    same_inf = np.isinf(ours) & (ours == theirs)
    diff = np.where(both_nan | same_inf, 0.0, np.nan_to_num(diff, nan=np.inf))
    return int(index.size), float(diff.max())


def verify(n: int = cases.VERIFY_SIZE, backends: list[str] | None = None) -> list[Row]:
    """Measure every available backend (or those given) on both dtypes.

    One call of :func:`~cbrtgrad.verification.report.verify_backend` per
    backend and dtype.

    Parameters
    ----------
    n : int
        Random inputs per backend and dtype.
    backends : list of str, optional
        Backend names (default: every available backend).

    Returns
    -------
    list of Row
        One per backend and dtype, in that order.

    Examples
    --------
    >>> rows = verify(100, ["cpu", "numpy"])
    >>> [r.backend for r in rows]
    ['cpu', 'cpu', 'numpy', 'numpy']
    """
    names = _registry.available() if backends is None else backends
    rows = []
    for name in names:
        for dtype in cases.DTYPES:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                rows.append(verify_backend(name, dtype, n))
    return rows


HEADER = (
    "backend",
    "dtype",
    "n",
    "max ulp",
    "CR share",
    "!= scipy",
    "specials",
    "grad ulp",
    "given y",
    "result",
)


def format_rows(rows: list[Row]) -> str:
    """The table as text (one line per backend and dtype)."""
    cells: list[tuple[object, ...]] = []
    for r in rows:
        verdict = ("pass" if r.passed else "FAIL") if r.has_bars else "(no bar)"
        if not r.reference_agrees:
            verdict = "FAIL: reference and mpmath disagree"
        cells.append(
            (r.backend, r.dtype, r.n, r.forward_max_ulp, r.correctly_rounded_share)
            + (r.differs_from_scipy, r.special_mismatches, r.grad_max_ulp)
            + (r.grad_given_y_max_ulp, verdict)
        )
    formats = ("", "", "d", ".4f", ".4%", "d", "d", ".4f", ".4f", "")
    table = _text.table(HEADER, cells, formats)
    if not rows:
        return table
    checked = min(r.mpmath_checked for r in rows)
    worst = max(r.mpmath_max_diff for r in rows)
    return (
        f"{table}\n\nErrors are against a double-double reference (2^-100 relative); "
        f"mpmath at 200 bits rechecked at least {checked} of them per row and agrees "
        f"to {worst:.1e} ulp (a row fails above {MPMATH_TOLERANCE:g})."
    )


def rows_as_dicts(rows: list[Row]) -> list[dict[str, Any]]:
    """The rows as JSON-ready dicts."""
    return [asdict(r) for r in rows]
