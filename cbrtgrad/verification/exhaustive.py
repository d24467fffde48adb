"""Exhaustive proof that the float32 cube root is correctly rounded.

Every one of the 2^32 bit patterns is run through the kernel (the CPU's, or
the CUDA kernels' float32 form compiled for the CPU: ``form="cuda"``) and
checked with
exact arithmetic that does not share the kernel's decision logic: a finite,
nonzero result ``y`` is correctly rounded iff ``x`` lies strictly between the
cubes of the two midpoints around ``|y|``,

    ((|y| - u/2)^3 < |x| < (|y| + u/2)^3),   u = ulp(|y|),

and each midpoint cube is exact as ``hi + lo`` in float64 (the midpoint has
25 significant bits, its square 50, so ``m*m`` is exact and ``fma`` gives the
rest). Ties cannot occur (a midpoint's cube needs 73 bits or more). Signs and
special values are checked bit for bit: ``cbrt(-x) = -cbrt(x)``, ``±0``,
``±inf`` and nan map to themselves.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TextIO

import numba
import numpy as np

from ..kernels.cpu.blocks import FORMULAS
from ..kernels.cpu.catalog import cube_root
from ..kernels.formulas.primitives import f32_as_i32, fma, i32_as_f32
from . import progress as _progress

TOTAL = 1 << 32
CHUNK = 1 << 26
_MAX_REPORTED = 16


@numba.njit(inline="always")
def _above_cube(x, m):  # type: ignore[no-untyped-def]
    # Exact sign of x - m^3 for a 25-bit m with m^3 within a factor 2 of x.
    m2 = m * m
    hi = m2 * m
    lo = fma(m2, m, -hi)
    return ((x - hi) - lo) > 0.0


@numba.njit
def check_bits(bits, yb):  # type: ignore[no-untyped-def]  # pragma: no cover - jitted
    """Whether float32 bits ``yb`` are the correctly rounded cube root of ``bits``."""
    ax_bits = bits & np.int32(0x7FFFFFFF)
    ay_bits = yb & np.int32(0x7FFFFFFF)
    if ax_bits > np.int32(0x7F800000):  # nan -> nan
        return ay_bits > np.int32(0x7F800000)
    if ax_bits == np.int32(0x7F800000) or ax_bits == 0:  # ±inf, ±0 unchanged
        return yb == bits
    if (yb & np.int32(-0x80000000)) != (bits & np.int32(-0x80000000)):
        return False
    if ay_bits == 0 or ay_bits >= np.int32(0x7F800000):
        return False
    ax = np.float64(i32_as_f32(ax_bits))
    ay = np.float64(i32_as_f32(ay_bits))
    lower_mid = (ay + np.float64(i32_as_f32(ay_bits - np.int32(1)))) * 0.5
    upper_mid = (ay + np.float64(i32_as_f32(ay_bits + np.int32(1)))) * 0.5
    return _above_cube(ax, lower_mid) and not _above_cube(ax, upper_mid)


def _make_sweep(root):  # type: ignore[no-untyped-def]
    """The parallel sweep of one float32 cube root, a scalar numba function."""

    @numba.njit(parallel=True)
    def sweep_of(start: int, count: int, bad: np.ndarray) -> int:  # pragma: no cover - jitted
        nblocks = bad.shape[0]
        per = (count + nblocks - 1) // nblocks
        failures = np.zeros(nblocks, np.int64)
        for b in numba.prange(nblocks):
            lo_i = start + b * per
            hi_i = min(start + (b + 1) * per, start + count)
            for k in range(lo_i, hi_i):
                bits = np.int32(np.uint32(k))
                yb = f32_as_i32(root(i32_as_f32(bits)))
                if not check_bits(bits, yb):
                    failures[b] += 1
                    slot = failures[b] - 1
                    if slot < bad.shape[1]:
                        bad[b, slot] = k
        return int(failures.sum())

    return sweep_of


#: What the sweep can check: the CPU kernel (the ufunc every CPU backend's
#: float32 loop computes) and the CUDA kernels' float32 forward, the same
#: formula the GPU compiles (cube_root_f32_branching), compiled for the CPU.
FORMS = ("cpu", "cuda")
_SWEEPS = {"cpu": _make_sweep(cube_root), "cuda": _make_sweep(FORMULAS.cube_root_f32_branching)}


def is_correctly_rounded(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Element-wise exact check that float32 ``y`` is the correctly rounded cbrt of ``x``.

    Parameters
    ----------
    x, y : array_like
        Inputs and claimed cube roots, cast to float32, of the same shape.

    Returns
    -------
    ndarray of bool
        Of the shape of ``x``.

    Raises
    ------
    ValueError
        When the shapes differ.

    Examples
    --------
    >>> x = np.float32([27.0, 2.0]); y = np.float32([3.0, 1.2599211])
    >>> is_correctly_rounded(x, y).tolist()
    [True, True]
    >>> is_correctly_rounded(x, np.nextafter(y, np.float32(9))).tolist()
    [False, False]
    """
    xb = np.ascontiguousarray(x, np.float32).view(np.int32).ravel()
    yb = np.ascontiguousarray(y, np.float32).view(np.int32).ravel()
    if xb.shape != yb.shape:
        raise ValueError(f"x and y must have the same shape, got {np.shape(x)} and {np.shape(y)}")
    return _check_many(xb, yb).reshape(np.shape(x))


@numba.njit
def _check_many(xb: np.ndarray, yb: np.ndarray) -> np.ndarray:  # pragma: no cover - jitted
    out = np.empty(xb.shape[0], np.bool_)
    for i in range(xb.shape[0]):
        out[i] = check_bits(xb[i], yb[i])
    return out


@dataclass
class SweepResult:
    """Outcome of the sweep: how many inputs were checked and which failed."""

    checked: int = 0
    failures: int = 0
    failing_inputs: list[int] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def correctly_rounded(self) -> bool:
        """True when every checked input was correctly rounded."""
        return self.failures == 0 and self.checked > 0


def sweep(
    start: int = 0,
    stop: int = TOTAL,
    *,
    form: str = "cpu",
    progress: bool = True,
    stream: TextIO | None = None,
) -> SweepResult:
    """Check every float32 bit pattern in ``[start, stop)``.

    Parameters
    ----------
    start, stop : int
        Range of bit patterns as unsigned 32-bit integers (default: all).
    form : {"cpu", "cuda"}
        Which float32 cube root: the CPU kernel, or the CUDA kernels' formula
        compiled for the CPU (a GPU's own compile is checked against the CPU
        by ``tools/gpu_check.py``).
    progress : bool
        Draw a progress bar on ``stream``.
    stream : file-like, optional
        Where the progress bar goes (default stderr).

    Returns
    -------
    SweepResult

    Examples
    --------
    >>> r = sweep(0x3F800000, 0x3F800000 + 4096, progress=False)
    >>> r.checked, r.failures
    (4096, 0)
    >>> sweep(0, 4096, form="cuda", progress=False).failures  # zero and subnormals
    0
    """
    if form not in _SWEEPS:
        raise ValueError(f"form must be one of {FORMS}, got {form!r}")
    if not (0 <= start <= stop <= TOTAL):
        raise ValueError(
            f"start and stop must satisfy 0 <= start <= stop <= 2**32, got {start}, {stop}"
        )
    result = SweepResult()
    started = time.perf_counter()  # the sweep's duration, reported (not a benchmark)
    bad = np.full((64, _MAX_REPORTED), -1, np.int64)
    position = start
    with _progress.bar(stop - start, enabled=progress, stream=stream) as advance:
        while position < stop:
            count = min(CHUNK, stop - position)
            bad[:] = -1
            result.failures += _SWEEPS[form](position, count, bad)
            result.failing_inputs.extend(int(v) for v in bad.ravel() if v >= 0)
            position += count
            result.checked += count
            advance(count)
    result.seconds = time.perf_counter() - started
    del result.failing_inputs[_MAX_REPORTED:]
    return result
