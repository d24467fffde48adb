"""The case table every backend runs: special values and random inputs per dtype."""

from __future__ import annotations

import numpy as np

DTYPES = (np.float32, np.float64)


def special_values(dtype: type) -> np.ndarray:
    """±0, ±inf, nan, the subnormal and normal extremes, perfect cubes, neighbours of 1."""
    info = np.finfo(dtype)
    one = dtype(1)
    values = [
        0.0,
        -0.0,
        np.inf,
        -np.inf,
        np.nan,
        info.smallest_subnormal,
        -info.smallest_subnormal,
        info.smallest_normal,
        -info.smallest_normal,
        info.smallest_normal - info.smallest_subnormal,
        info.max,
        -info.max,
        info.eps,
        info.epsneg,
        np.nextafter(one, dtype(2)),
        np.nextafter(one, dtype(0)),
        1.0,
        -1.0,
        8.0,
        -27.0,
        0.125,
        1e-30,
        -1e30,
        3.0,
        7.0,
        1000.0,
        2.0**-100,
    ]
    return np.array(values, dtype=dtype)


def random_values(dtype: type, n: int, seed: int = 0) -> np.ndarray:
    """Random bit patterns (all exponents, both signs) plus finite-range normals."""
    rng = np.random.default_rng(seed)
    itype = np.int32 if np.dtype(dtype).itemsize == 4 else np.int64
    bits = rng.integers(np.iinfo(itype).min, np.iinfo(itype).max, n // 2, dtype=itype)
    patterns = bits.view(dtype)
    normal = (rng.standard_normal(n - n // 2) * 10.0 ** rng.integers(-20, 20, n - n // 2)).astype(
        dtype
    )
    return np.concatenate([patterns, normal])


def cases(dtype: type, n: int = 400) -> np.ndarray:
    return np.concatenate([special_values(dtype), random_values(dtype, n)])


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return bool(
        np.array_equal(
            np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8)
        )
    )
