"""Fixtures for the backend tests: the stand-in vForce library."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

# The same ABI as Apple's vForce.h; libm's cbrt/cbrtf do the arithmetic. The
# call counter lets the tests check how the binding chunks long arrays.
_SOURCE = r"""
#include <math.h>
int standin_calls = 0;
int standin_largest = 0;
static void count(int n) { standin_calls++; if (n > standin_largest) standin_largest = n; }
void vvcbrtf(float *y, const float *x, const int *n) {
    count(*n);
    for (int i = 0; i < *n; i++) y[i] = cbrtf(x[i]);
}
void vvcbrt(double *y, const double *x, const int *n) {
    count(*n);
    for (int i = 0; i < *n; i++) y[i] = cbrt(x[i]);
}
"""


@pytest.fixture(scope="session")
def vforce_library(tmp_path_factory):
    """Compile the stand-in library; skip (saying why) without a C compiler."""
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        pytest.skip("no C compiler (cc, gcc or clang) to build the stand-in vForce library")
    folder = tmp_path_factory.mktemp("vforce")
    source = folder / "standin_vforce.c"
    source.write_text(_SOURCE)
    path = folder / "libstandin_vforce.so"
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O2", "-o", str(path), str(source), "-lm"],
        check=True,
        capture_output=True,
    )
    library = ctypes.CDLL(str(path))
    calls = ctypes.c_int.in_dll(library, "standin_calls")
    largest = ctypes.c_int.in_dll(library, "standin_largest")

    def reset() -> None:
        calls.value = 0
        largest.value = 0

    return SimpleNamespace(
        path=Path(path), calls=lambda: calls.value, largest=lambda: largest.value, reset=reset
    )
