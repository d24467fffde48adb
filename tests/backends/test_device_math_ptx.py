"""The device-math kernels as a GPU compiles them, checked without one.

The simulator runs :mod:`cbrtgrad.kernels.cuda_elementwise` as Python, so it
never types or compiles them. Here they are compiled to PTX for sm_90 with
libNVVM, in a subprocess with the simulator off and a stand-in for the
current device (as tests/backends/test_cuda_ptx.py does for the cbrt
kernels), for representative dtypes and operand kinds, and checked for what
their bit-exactness rests on: every float add, subtract, multiply, divide
and square root carries an explicit rounding (``.rn``, which ptxas never
fuses) and no kernel but ``power`` (libdevice's ``pow``) has an fma.
"""

from __future__ import annotations

import re

import pytest

from ._ptx import compile_in_subprocess

pytest.importorskip("numba_cuda", reason="numba-cuda is not installed")

_COMPILE = r"""
import json, os, sys
os.environ["NUMBA_ENABLE_CUDASIM"] = "0"
from types import SimpleNamespace
import numpy as np
import numba.cuda.dispatcher as dispatcher
# NOTE: a compile asks numba-cuda for the current device's compute
# capability; there is no GPU here, so stand one in.
dispatcher.get_current_device = lambda: SimpleNamespace(compute_capability=(9, 0))
from numba import cuda, from_dtype, types
from cbrtgrad.kernels import cuda_elementwise as k

f16, f32, f64 = (np.dtype(t) for t in ("float16", "float32", "float64"))
i64 = types.int64

def T(n):
    return types.UniTuple(i64, n)

def A(d):
    return types.Array(from_dtype(d), 1, "C")

def S(d):
    return from_dtype(d)

cases = []
for op in k.BINARY:
    for d in (f32, f64):
        sig = (A(d), A(d), A(d), i64, T(2), T(2), T(2))
        cases.append((f"binary_{op}_{d}", k.binary(op, d, True, True), sig))
sig = (A(f16), S(f32), A(f16), i64, T(1), T(1), T(1))
cases.append(("binary_add_float16_scalar", k.binary("add", f16, True, False), sig))
sig = (S(f32), A(f16), A(f32), i64, T(3), T(3), T(3))
cases.append(("binary_divide_scalar_float16", k.binary("divide", f32, False, True), sig))
sig = (A(f16), S(f32), A(f16), i64, T(1), T(1))
cases.append(("negative_float16", k.unary("negative", f16), sig))
for d in (f16, f32, f64):
    sig = (A(d), S(k.compute_dtype(d)), A(d), i64, T(1), T(1))
    cases.append((f"power_{d}", k.unary("power", d), sig))
for src, dst in ((f64, f16), (f16, f32), (f32, f64), (f64, f32)):
    cases.append((f"cast_{src}_{dst}", k.cast_kernel(dst), (A(src), A(dst), i64, T(2), T(2))))
cases.append(("fill_float16", k.fill(f16), (A(f16), S(f32), i64)))
for data, acc, out in ((f32, f64, f32), (f16, f32, f16), (f64, f64, f64), (f32, f64, f64)):
    sig = (A(data), A(out), i64, i64, i64, T(1), T(1), T(2), T(2))
    cases.append((f"sum_{data}_{out}", k.reduce_sum(acc, out), sig))
cases.append(("all_finite_float16", k.all_finite(), (A(f16), A(f32), i64)))
out = {}
for name, kernel, sig in cases:
    out[name] = cuda.compile_ptx(kernel.py_func, sig, cc=(9, 0))[0]
json.dump(out, sys.stdout)
"""


@pytest.fixture(scope="module")
def compiled() -> dict[str, str]:
    return compile_in_subprocess(_COMPILE)  # type: ignore[no-any-return]


_FLOAT_OP = re.compile(r"\b(mul|add|sub|div|sqrt|fma)((?:\.\w+)*)\.(f16|f32|f64)\b")


def _ops(ptx: str) -> list[tuple[str, str, str]]:
    return _FLOAT_OP.findall(ptx)


def test_every_kernel_compiles_for_a_gpu(compiled):
    assert len(compiled) == 24


def test_every_float_operation_is_rounded_on_its_own(compiled):
    for name, ptx in compiled.items():
        if name.startswith("power_"):
            continue  # libdevice's pow: its own fmas and unrounded steps
        for op, modifiers, _ in _ops(ptx):
            assert op != "fma", name
            assert ".rn" in modifiers, (name, op, modifiers)


def test_each_kernel_does_its_one_operation(compiled):
    expected = {
        "binary_add_float32": "add.rn.f32",
        "binary_subtract_float32": "sub.rn.f32",
        "binary_multiply_float64": "mul.rn.f64",
        "binary_divide_float64": "div.rn.f64",
        "binary_add_float16_scalar": "add.rn.f32",
        "sum_float32_float32": "add.rn.f64",
        "sum_float16_float16": "add.rn.f32",
    }
    for name, op in expected.items():
        assert op in compiled[name], name
    # numpy's fast exponents: a square, a square root and a reciprocal, each
    # rounded once (NVVM may write 1 / x as rcp.rn, also IEEE's correctly
    # rounded reciprocal); float16 goes through powf only, as numpy's half loop.
    for name in ("power_float32", "power_float64"):
        width = name[-2:]
        ptx = compiled[name]
        assert f"mul.rn.f{width}" in ptx and f"sqrt.rn.f{width}" in ptx, name
        assert f"div.rn.f{width}" in ptx or f"rcp.rn.f{width}" in ptx, name
    # float64 to float16 is one conversion, not two through float32.
    assert "cvt.rn.f16.f64" in compiled["cast_float64_float16"]
    assert "cvt.rn.f32.f64" not in compiled["cast_float64_float16"]
