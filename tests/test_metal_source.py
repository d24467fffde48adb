"""The float32-only cube root and its Metal translation, against cbrtgrad's float32 bits.

No Apple GPU is here: the generated Metal body is compiled as C++ by the
host's compiler (a small header maps Metal's names; ``-fno-fast-math
-ffp-contract=off``, so that only the explicit ``fma`` fuse), run on the CPU
and compared bit for bit with ``cbrtgrad.cbrt``. So is the numba form of the
same formula. The default run takes 745,870 inputs (every special and
subnormal class, the edges of every binade and of the reduction's three
binades, random patterns); ``-m slow`` takes all 2^32.
"""

from __future__ import annotations

import ast
import ctypes
import os
import shutil
import subprocess
import time
from typing import Any

import numba
import numpy as np
import pytest

import cbrtgrad
from cbrtgrad.kernels import metal_source
from cbrtgrad.kernels.blocks import FORMULAS

# Metal's names in C++: the types, the bit view and the float fma. Metal is
# C++14 with these as built-ins; everything else in the body is plain C++.
_SHIM = """
#include <cmath>
#include <cstdint>
#include <cstring>
typedef unsigned int uint;
typedef unsigned long ulong;
static_assert(sizeof(uint) == 4 && sizeof(ulong) == 8, "Metal's integer widths");
struct uint3 { uint x, y, z; };
template <class T, class F> static inline T as_type(F from) {
  static_assert(sizeof(T) == sizeof(F), "as_type keeps the size");
  T to;
  std::memcpy(&to, &from, sizeof to);
  return to;
}
static inline float fma(float a, float b, float c) { return std::fma(a, b, c); }
extern "C" void metal_body(const float* x, float* y, uint n) {
  for (uint i = 0; i < n; ++i) {
    const uint3 thread_position_in_grid = {i, 0, 0};
    BODY
  }
}
"""


def _compiler() -> str | None:
    return shutil.which(os.environ.get("CXX", "g++"))


@pytest.fixture(scope="module")
def metal_body(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The generated Metal body, compiled as C++ into a function over n floats."""
    compiler = _compiler()
    if compiler is None:
        pytest.skip("no C++ compiler (g++ or $CXX) to compile the Metal body on the CPU")
    folder = tmp_path_factory.mktemp("metal")
    source = folder / "metal_body.cpp"
    source.write_text(_SHIM.replace("BODY", metal_source.metal_kernel_source()))
    library = folder / "metal_body.so"
    # C++14, the base of the Metal language, so the body uses nothing newer.
    flags = ["-std=c++14", "-O2", "-fno-fast-math", "-ffp-contract=off", "-shared", "-fPIC"]
    subprocess.run([compiler, *flags, "-o", str(library), str(source)], check=True)
    function = ctypes.CDLL(str(library)).metal_body
    function.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint]
    function.restype = None

    def run(x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, np.float32)
        y = np.empty_like(x)
        function(x.ctypes.data, y.ctypes.data, x.size)
        return y

    return run


# A module global: numba reads globals as constants, not a Python object's attributes.
_cube_root_f32_single = FORMULAS.cube_root_f32_single


_cube_root_f32_single_near = FORMULAS.cube_root_f32_single_near


@numba.njit
def _near_error(first: int, stop: int) -> float:  # pragma: no cover - jitted
    # The largest |y - w^(1/3)| in units of 2^-23 over the float32 patterns
    # [first, stop), against the float64 root (libm's, within 3 float64 ulp).
    worst = 0.0
    for bits in range(first, stop):
        w = np.uint32(bits).view(np.float32)
        y = np.float64(_cube_root_f32_single_near(w))
        worst = max(worst, abs(y - np.cbrt(np.float64(w))) * 2.0**23)
    return worst


@numba.njit
def _numba_form(x: np.ndarray) -> np.ndarray:  # pragma: no cover - jitted
    y = np.empty_like(x)
    for i in range(x.shape[0]):
        y[i] = _cube_root_f32_single(x[i])
    return y


def _sample() -> np.ndarray:
    """745,870 float32 patterns: the specials, subnormals, binade edges, random bits."""
    edges = []
    # Every binade's first and last 64 patterns (powers of two, the reduction's
    # cut between its three binades), both signs: zeros, the least subnormals,
    # the least normals, the largest floats, the infinities and first nans.
    for field in range(256):
        start = field << 23
        edges += [np.arange(start, start + 64), np.arange(start - 64, start) % (1 << 23)]
    edges.append(np.arange(0x7F800000 - 64, 0x7F800000 + 64))
    # Nans with payloads: quiet and signaling, the last ones.
    edges.append(np.array([0x7F800001, 0x7FBFFFFF, 0x7FC00000, 0x7FC00001, 0x7FFFFFFF]))
    # Subnormals: the first 2^16 patterns and every pattern near a power of two.
    edges.append(np.arange(0, 1 << 16))
    edges.append(np.array([(1 << k) + d for k in range(23) for d in (-1, 0, 1)]))
    # The exact cubes of small integers and their neighbours (roots on the grid).
    cubes = np.float32(np.arange(1, 4096, dtype=np.float64) ** 3).view(np.uint32)
    edges += [cubes - 1, cubes, cubes + 1]
    positive = np.concatenate(edges).astype(np.uint32)
    rng = np.random.default_rng(20261207)
    random = rng.integers(0, 1 << 32, size=1 << 19, dtype=np.uint32)
    bits = np.concatenate([positive, positive | np.uint32(0x80000000), random])
    return bits.view(np.float32)


def _mismatches(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    expected = cbrtgrad.cbrt(x)
    return np.flatnonzero(y.view(np.uint32) != expected.view(np.uint32))


def test_metal_body_matches_cbrtgrad_float32_on_a_sample(metal_body: Any) -> None:
    x = _sample()
    bad = _mismatches(x, metal_body(x))
    assert bad.size == 0, [hex(b) for b in x.view(np.uint32)[bad[:8]]]


def test_numba_form_matches_cbrtgrad_float32_on_a_sample() -> None:
    x = _sample()
    bad = _mismatches(x, _numba_form(x))
    assert bad.size == 0, [hex(b) for b in x.view(np.uint32)[bad[:8]]]


def test_the_comparison_sees_a_one_ulp_difference(metal_body: Any) -> None:
    # The check above compares bits: a root one ulp off is a mismatch.
    x = np.float32([27.0, -2.0])
    y = metal_body(x)
    assert _mismatches(x, y).size == 0
    assert _mismatches(x, np.nextafter(y, np.float32(0))).tolist() == [0, 1]


def test_nans_keep_sign_and_payload_quieted(metal_body: Any) -> None:
    bits = np.uint32([0x7F800001, 0xFFA00001, 0x7FC12345, 0xFFFFFFFF])
    y = metal_body(bits.view(np.float32)).view(np.uint32)
    assert y.tolist() == (bits | np.uint32(0x00400000)).tolist()


def test_generated_source_is_float32_with_explicit_fma() -> None:
    source = metal_source.metal_kernel_source("inp", "out")
    assert "double" not in source and "fma(" in source
    assert "inp[cr_index]" in source and source.rstrip().endswith(
        "out[cr_index] = as_type<float>(cr_result);"
    )


@pytest.mark.parametrize(
    ("python", "complaint"),
    [
        ("def f(x):\n    return mul32(x, x) + x\n", "float arithmetic goes through"),
        ("def f(x):\n    a = x < x\n    return x\n", "only integers"),
        ("def f(x):\n    for i in x:\n        pass\n    return x\n", "only `name = expression`"),
        ("def f(x):\n    return np.sqrt(x)\n", "call of np.sqrt"),
        ("def f(x):\n    y = helper(x)\n    return y\n", "no function 'helper'"),
    ],
)
def test_translation_refuses_what_it_does_not_know(python: str, complaint: str) -> None:
    node = ast.parse(python).body[0]
    assert isinstance(node, ast.FunctionDef)
    translation = metal_source._Translation("x", "x[i]")
    with pytest.raises(ValueError, match=complaint):
        translation.statements(node.body, "y[i]")


@pytest.mark.slow
def test_metal_body_and_numba_form_on_every_float32(metal_body: Any) -> None:
    # All 2^32 patterns in chunks, each against cbrtgrad.cbrt (whose float32
    # is checked correctly rounded on all of them by `cbrtgrad verify
    # --exhaustive`), bit for bit.
    chunk = 1 << 24
    started = time.perf_counter()
    mismatches = {"metal": 0, "numba": 0}
    for start in range(0, 1 << 32, chunk):
        x = np.arange(start, start + chunk, dtype=np.uint64).astype(np.uint32).view(np.float32)
        expected = cbrtgrad.cbrt(x).view(np.uint32)
        mismatches["metal"] += int(np.count_nonzero(metal_body(x).view(np.uint32) != expected))
        mismatches["numba"] += int(np.count_nonzero(_numba_form(x).view(np.uint32) != expected))
    seconds = time.perf_counter() - started
    print(f"all 2^32 float32: {mismatches} mismatches in {seconds:.0f} s")
    assert mismatches == {"metal": 0, "numba": 0}


def test_statements_follow_the_formula_line_by_line() -> None:
    # The body is the formula's own statements, read from its file: one
    # Metal statement per Python one, in order, with the same names (the
    # call of its step 2 inlined in a block of its own).
    node = metal_source._function_node(metal_source.FUNCTION)
    python = [s for s in node.body if isinstance(s, ast.Assign | ast.Return)]
    metal = metal_source.metal_statements("x[i]", "y[i]")
    top = [line for line in metal if not line.startswith((" ", "{", "}"))]
    assert len(top) == len(python)
    for statement, line in zip(python, top, strict=True):
        if isinstance(statement, ast.Assign):
            name = statement.targets[0]
            assert isinstance(name, ast.Name)
            assert f"cr_{name.id} = " in line or line.endswith(f" cr_{name.id};"), line
    assert sum(line.startswith("    ") for line in metal) == 9  # step 2's statements


def test_step_two_is_within_its_bound_on_every_w() -> None:
    # The docstring's figure: cube_root_f32_single_near is within 0.516 ulp
    # (2^-23, the spacing in [1, 2)) of w^(1/3) for every float32 w in [1, 8);
    # step 3 needs less than 1.
    assert 0.5 < _near_error(0x3F800000, 0x41000000) <= 0.516
