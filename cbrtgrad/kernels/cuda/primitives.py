"""The primitives of :mod:`cbrtgrad.kernels.formulas.scalar` for CUDA and its simulator.

On a GPU they are libdevice functions: ``__nv_fma`` and ``__nv_fmaf`` (the
exact ``fma.rn.f64`` and ``fma.rn.f32`` instructions), the four bit casts,
which compile to register moves, and ``__nv_dmul_rn``, ``__nv_dadd_rn`` and
``__nv_fmul_rn`` for every other multiply, add and subtract.

NOTE: with fastmath off numba-cuda passes libNVVM no ``-fma`` option, so
NVVM's default contraction applies: a plain ``a * b + c`` may become one
``fma.rn.f64`` (one rounding instead of two), and a PTX ``mul.f64`` followed
by an ``add.f64`` may still be fused by ptxas. Either would change bits that
the proofs (and the CPU kernels) round twice. The ``_rn`` functions compile to
``mul.rn.f64``/``add.rn.f64``, which neither NVVM nor ptxas fuses whatever its
version; tests/backends/test_cuda_ptx.py checks the LLVM IR, the PTX and the
SASS of every kernel for it.

Under numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) device functions are
plain Python run on numpy scalars, so the primitives are Python too: bit casts
through ``numpy.ndarray.view`` and an exact fused multiply-add through
rational arithmetic. The formulas then execute the same IEEE operations, in
the same order, as on the CPU and the GPU, which is what lets CI check the
CUDA kernels bit for bit without a GPU.

NOTE: numba-cuda's simulator has no ``cuda.fma`` and no libdevice, and its
``cuda.cbrt`` is ``a ** (1/3)`` (nan for negatives); nothing here uses it.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from types import SimpleNamespace
from typing import Any

import numpy as np


@lru_cache(maxsize=1)
def simulating() -> bool:
    """Whether numba's CUDA target is the simulator (``NUMBA_ENABLE_CUDASIM=1``).

    Read once: numba chooses its CUDA target when it is imported, for the
    process (and every GPU call asks, several times: the lookups showed in the
    profile of a call in docs/generated/gpu_check_h200.txt).

    Examples
    --------
    >>> isinstance(simulating(), bool)
    True
    """
    from numba import config

    return bool(getattr(config, "ENABLE_CUDASIM", 0))


def exact_fma(a: Any, b: Any, c: Any) -> np.float64:
    """``a * b + c`` rounded once, to nearest even, in float64 (pure Python).

    NOTE: Python < 3.13 has no ``math.fma``. ``Fraction`` arithmetic is exact
    and ``float(Fraction)`` is correctly rounded (integer true division), so
    the result is the IEEE fused multiply-add. Non-finite operands and exact
    zeros follow IEEE rules explicitly, since ``Fraction`` has neither.

    Examples
    --------
    >>> float(exact_fma(0.1, 10.0, -1.0))  # the rounding error of 0.1 * 10
    5.551115123125783e-17
    >>> str(exact_fma(-0.0, 1.0, -0.0)), str(exact_fma(1.0, 1.0, -1.0))
    ('-0.0', '0.0')
    """
    fa, fb, fc = float(a), float(b), float(c)
    if not (math.isfinite(fa) and math.isfinite(fb) and math.isfinite(fc)):
        with np.errstate(invalid="ignore", over="ignore"):
            return np.float64(fa) * np.float64(fb) + np.float64(fc)
    exact = Fraction(fa) * Fraction(fb) + Fraction(fc)
    if exact == 0:
        # IEEE: an exact zero sum is +0 unless both addends are zeros of the
        # same sign; a*b is then an exact zero, so the float sum is exact.
        return np.float64(0.0) if fc != 0.0 else np.float64(fa * fb + fc)
    try:
        return np.float64(float(exact))
    except OverflowError:
        return np.float64(math.inf if exact > 0 else -math.inf)


def exact_fma32(a: Any, b: Any, c: Any) -> np.float32:
    """``a * b + c`` rounded once, to nearest even, in float32 (pure Python).

    The sum is exact as a ``Fraction``; the float32 nearest to it is one of
    the float32 value of its nearest double and that value's two neighbours
    (rounding through the double alone could round twice), chosen by exact
    distance, a tie to the even significand.

    Examples
    --------
    >>> a = np.float32(1 + 2.0**-12)
    >>> float(exact_fma32(a, a, np.float32(-1.0))) == 2.0**-11 + 2.0**-24  # exact
    True
    >>> str(exact_fma32(-0.0, 1.0, -0.0))
    '-0.0'
    """
    fa, fb, fc = float(np.float32(a)), float(np.float32(b)), float(np.float32(c))
    if not (math.isfinite(fa) and math.isfinite(fb) and math.isfinite(fc)):
        # The product of two finite float32s is exact in float64, so only
        # IEEE's rules for infinities and nans act here.
        with np.errstate(invalid="ignore", over="ignore"):
            return np.float32(np.float64(fa) * np.float64(fb) + np.float64(fc))
    exact = Fraction(fa) * Fraction(fb) + Fraction(fc)
    if exact == 0:
        return np.float32(0.0) if fc != 0.0 else np.float32(fa * fb + fc)
    if abs(exact) >= _FLOAT32_OVERFLOW:
        return np.float32(math.inf if exact > 0 else -math.inf)
    nearest = np.float32(float(exact))
    candidates = [
        np.nextafter(nearest, np.float32(-np.inf)),
        nearest,
        np.nextafter(nearest, np.float32(np.inf)),
    ]
    finite = [v for v in candidates if np.isfinite(v)]

    def distance(v: np.float32) -> tuple[Fraction, int]:
        return abs(Fraction(float(v)) - exact), int(_f32_as_i32(v)) & 1

    return min(finite, key=distance)


#: The least magnitude that rounds to infinity in float32: the largest
#: float32 plus half of its ulp, (2 - 2^-24) 2^127.
_FLOAT32_OVERFLOW = Fraction(2**128 - 2**103)


def _f64_as_i64(x: Any) -> Any:
    return np.array(x, dtype=np.float64).view(np.int64)[()]


def _i64_as_f64(i: Any) -> Any:
    return np.array(i, dtype=np.int64).view(np.float64)[()]


def _f32_as_i32(x: Any) -> Any:
    return np.array(x, dtype=np.float32).view(np.int32)[()]


def _i32_as_f32(i: Any) -> Any:
    return np.array(i, dtype=np.int32).view(np.float32)[()]


def _mul(a: Any, b: Any) -> np.float64:
    return np.float64(a) * np.float64(b)


def _add(a: Any, b: Any) -> np.float64:
    return np.float64(a) + np.float64(b)


def _sub(a: Any, b: Any) -> np.float64:
    return np.float64(a) - np.float64(b)


def _mul32(a: Any, b: Any) -> np.float32:
    return np.float32(a) * np.float32(b)


SIMULATOR_PRIMITIVES = SimpleNamespace(
    mul=_mul,
    add=_add,
    sub=_sub,
    mul32=_mul32,
    fma=exact_fma,
    fma32=exact_fma32,
    f64_as_i64=_f64_as_i64,
    i64_as_f64=_i64_as_f64,
    f32_as_i32=_f32_as_i32,
    i32_as_f32=_i32_as_f32,
)


def device_primitives() -> SimpleNamespace:
    """The libdevice primitives for real CUDA kernels (needs numba-cuda)."""
    from numba import cuda
    from numba.cuda import libdevice

    @cuda.jit(device=True)
    def sub(a, b):  # type: ignore[no-untyped-def]
        # NOTE: numba-cuda binds no __nv_dsub_rn; a - b is a + (-b) in IEEE
        # arithmetic (negation is exact), the same bits for every operand
        # but the sign of a nan coming from b, which no formula lets reach it.
        return libdevice.dadd_rn(a, -b)

    return SimpleNamespace(
        mul=libdevice.dmul_rn,
        add=libdevice.dadd_rn,
        sub=sub,
        mul32=libdevice.fmul_rn,
        fma=libdevice.fma,
        fma32=libdevice.fmaf,
        f64_as_i64=libdevice.double_as_longlong,
        i64_as_f64=libdevice.longlong_as_double,
        f32_as_i32=libdevice.float_as_int,
        i32_as_f32=libdevice.int_as_float,
    )


def cuda_primitives() -> SimpleNamespace:
    """The primitives for the CUDA target in use: the simulator's or libdevice's.

    Examples
    --------
    >>> bool(cuda_primitives().f64_as_i64(1.0) == 0x3FF0000000000000) or not simulating()
    True
    """
    return SIMULATOR_PRIMITIVES if simulating() else device_primitives()
