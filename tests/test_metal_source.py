"""The Metal kernel's source, generated from formulas_f32_fma.py, compiled as C++ on the CPU.

The generated statements (cbrtgrad/kernels/handlers/metal_source.py) with a shim for
the Metal names are compiled by the C++ compiler with no fast math and no
contraction, and compared bit for bit with cbrtgrad's float32 kernel (which
computes in float64): on 10^6 random bit patterns and the specials in every
run, on all 2^32 inputs under the slow marker. No Metal GPU is here: this is
the check of the arithmetic, not of Apple's compiler.
"""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess

import numpy as np
import pytest

import cbrtgrad
from cbrtgrad.kernels.handlers import metal_source

CXX = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
pytestmark = pytest.mark.skipif(CXX is None, reason="no C++ compiler to check the source with")


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    folder = tmp_path_factory.mktemp("metal_source")
    source = folder / "cube_root.cpp"
    source.write_text(metal_source.cpp_source())
    library = folder / "libcube_root.so"
    flags = ["-O3", "-std=c++17", "-ffp-contract=off", "-fno-fast-math", "-shared", "-fPIC"]
    # The CPU's own fma instruction where the compiler knows the CPU (else libm's fmaf,
    # exact too, slower); never contraction: -ffp-contract=off.
    for extra in (["-march=native"], []):
        done = subprocess.run([CXX, *flags, *extra, str(source), "-o", str(library)],
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        if done.returncode == 0:
            break
    assert done.returncode == 0, done.stderr
    function = ctypes.CDLL(str(library)).cbrtgrad_metal_cube_root
    function.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]

    def run(x):
        x = np.ascontiguousarray(x, np.float32)
        y = np.empty_like(x)
        function(x.ctypes.data, y.ctypes.data, x.size)
        return y

    return run


def _mismatches(got, x):
    expected = cbrtgrad.cbrt(x, backend="cpu")
    return np.flatnonzero(got.view(np.uint32) != expected.view(np.uint32))


def test_random_bits_and_specials(kernel):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 2**32, 10**6, dtype=np.uint64).astype(np.uint32).view(np.float32)
    sub = np.arange(1, 1 << 23, 997, dtype=np.uint32).view(np.float32)
    nans = np.array([0x7FC00000, 0x7F800001, 0x7FA00005], np.uint32).view(np.float32)
    edges = np.float32([0.0, np.inf, 1.0, 8.0, 27.0, 2.0, 1e-45, 1.1754942e-38, 3.4028235e38])
    cubes = (np.arange(1, 1 << 8, dtype=np.float32) ** 3).astype(np.float32)  # exact cubes
    values = np.concatenate([x, sub, nans, edges, cubes])
    values = np.concatenate([values, -values])
    bad = _mismatches(kernel(values), values)
    assert bad.size == 0, f"{bad.size} differ, first inputs {values[bad[:5]]}"


def test_the_source_is_float32_and_fma_only():
    # One operation per statement, no float64 or half type, no division or
    # library call on floats but fma and fabs; constants as exact bit patterns.
    body = metal_source.metal_body()
    assert not re.search(r"\b(double|half|long)\b", body)
    for line in body.splitlines()[2:-1]:
        match = re.fullmatch(r"(float|uint|bool) v\d+ = (.*);", line)
        assert match, line
        kind, expression = match.groups()
        if kind == "float":
            assert re.fullmatch(
                r"(\w+ [-+*] \w+|metal::fma\(\w+, \w+, \w+\)|metal::fabs\(\w+\)|"
                r"as_type<float>\(\w+\)|float\(\w+\)|\w+ \? \w+ : \w+)",
                expression,
            ), line
    assert body.endswith("out[elem] = " + metal_source._statements()[1] + ";\n")


@pytest.mark.slow
def test_every_float32_input(kernel):
    # All 2^32 bit patterns (a few minutes on 2 cores).
    chunk = 1 << 24
    x = np.empty(chunk, np.uint32)
    total = 0
    for start in range(0, 1 << 32, chunk):
        x[:] = np.arange(start, start + chunk, dtype=np.uint64)
        total += _mismatches(kernel(x.view(np.float32)), x.view(np.float32)).size
    assert total == 0
