"""Bit patterns for the tests that compare results bit for bit (the PyTorch bridge's routes)."""

from __future__ import annotations

import numpy as np

from cbrtgrad.verification.cases import special_values

UINT = {np.dtype(np.float32): np.uint32, np.dtype(np.float64): np.uint64}


def bits(a: np.ndarray) -> np.ndarray:
    """The array's elements as unsigned integers of their width (contiguous)."""
    return np.ascontiguousarray(a).view(UINT[a.dtype])


def tensor_bits(t) -> np.ndarray:
    """:func:`bits` of a CPU tensor (detached)."""
    return bits(t.detach().numpy())


def patterns(dtype: np.dtype, n: int, seed: int) -> np.ndarray:
    """Random bit patterns, the specials, subnormals, nans (quiet, signalling) with payloads."""
    uint = UINT[dtype]
    bits = np.random.default_rng(seed).integers(0, np.iinfo(uint).max, n, uint, endpoint=True)
    exponent = np.array(np.inf, dtype).view(uint)
    quiet = uint(1) << uint(np.finfo(dtype).nmant - 1)
    sign = uint(1) << uint(8 * dtype.itemsize - 1)
    low = np.arange(1, 64, dtype=uint)  # the smallest subnormals
    nans = np.array([exponent | 1, exponent | (quiet - uint(1)), exponent | quiet | 5], uint)
    edges = np.concatenate([low, nans, quiet - low, exponent - low])
    edges = np.concatenate([edges, edges | sign]).view(dtype)
    return np.concatenate([bits.view(dtype), special_values(dtype), edges])
