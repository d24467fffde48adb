"""cbrtgrad.numba: the cube root and its gradient in a user's own numba code.

Every check compares bits with ``cbrtgrad.cbrt``/``cbrtgrad.cbrt_grad`` (the
ufuncs). The user functions are module-level, so each is compiled once for
the whole file (a numba compile costs seconds on a small machine), and the
assembly checks read the loops the bits checks compiled. Speed is measured
by ``python tools/measure.py numba`` and asv, never here.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numba
import numpy as np
import pytest
from numba import cuda
from numba.core.errors import TypingError

import cbrtgrad
from cbrtgrad.numba import cbrt, cbrt_grad, cbrt_grad_into, cbrt_into
from cbrtgrad.verification.cases import special_values

DATA = Path(__file__).parent / "data"
DTYPES = [np.float32, np.float64]
_BITS = {np.dtype(np.float32): np.uint32, np.dtype(np.float64): np.uint64}


# -- The user's code ------------------------------------------------------------------


@numba.njit
def forward_loop(x, y):
    for i in range(x.size):
        y[i] = cbrt(x[i])


@numba.njit
def grad_loop(g, y, dx):
    for i in range(y.size):
        dx[i] = cbrt_grad(g[i], y[i])


@numba.njit(parallel=True)
def parallel_both(x, g, y, dx):
    for i in numba.prange(x.size):
        y[i] = cbrt(x[i])
        dx[i] = cbrt_grad(g[i], y[i])


@numba.njit(fastmath=True)
def fastmath_loop(x, y):
    # The user's fast-math does not reach the formulas (it would break them).
    for i in range(x.size):
        y[i] = cbrt(x[i])


@numba.njit
def forward_into(x, out):
    return cbrt_into(x, out)


@numba.njit
def grad_into(g, y, out):
    return cbrt_grad_into(g, y, out)


@numba.vectorize
def vectorized_cbrt(x):
    return cbrt(x)


@numba.guvectorize("(n),(n)->(n)")
def guvectorized_grad(g, y, dx):
    for i in range(y.shape[0]):
        dx[i] = cbrt_grad(g[i], y[i])


@numba.njit
def call_cbrt(x):
    return cbrt(x)


@numba.njit
def call_cbrt_grad(g, y):
    return cbrt_grad(g, y)


# -- Inputs ---------------------------------------------------------------------------


def _hard_f64() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The float64 inputs that take the exact paths: forward x, gradient (g, y)."""

    def rows(name: str) -> np.ndarray:
        lines = (DATA / name).read_text().splitlines()
        return np.array([[float.fromhex(v) for v in s.split()] for s in lines if s[:1] != "#"])

    x = rows("cbrt_f64_hard.txt")[:, 0]
    pairs = rows("grad_f64_hard.txt")
    # cbrt(8^k x) = 2^k cbrt(x): the same hard cases in other binades, both signs.
    large, small = np.abs(x) > 2.0**-800, np.abs(x) < 2.0**800
    x = np.concatenate([x, -x[large] * 8.0**-50, x[small] * 8.0**60])
    return x, pairs[:, 0].copy(), pairs[:, 1].copy()


def _random_bits(dtype: np.dtype, n: int, seed: int) -> np.ndarray:
    bits = _BITS[np.dtype(dtype)]
    info = np.iinfo(bits)
    rng = np.random.default_rng(seed)
    return rng.integers(0, info.max, n, dtype=bits, endpoint=True).view(dtype)


def _inputs(dtype: np.dtype, n: int = 10**6) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x, g, y): random bit patterns, the special values and (float64) the hard cases."""
    specials = special_values(np.dtype(dtype))
    x = np.concatenate([_random_bits(dtype, n, 1), specials])
    g = np.concatenate([_random_bits(dtype, n, 2), np.ones_like(specials), specials])
    y = np.concatenate(
        [_random_bits(dtype, n, 3), reference(cbrtgrad.cbrt, specials), specials[::-1]]
    )
    if dtype == np.float64:
        hard_x, hard_g, hard_y = _hard_f64()
        x, g, y = (
            np.concatenate([x, hard_x]),
            np.concatenate([g, hard_g]),
            np.concatenate([y, hard_y]),
        )
    return x, g, y


_CACHED_INPUTS: dict[type, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def inputs(dtype: type) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if dtype not in _CACHED_INPUTS:
        _CACHED_INPUTS[dtype] = _inputs(np.dtype(dtype))
    return _CACHED_INPUTS[dtype]


def reference(function, *args):
    """``function(*args)`` on the cpu backend's ufuncs (10^6 elements would
    take the parallel backend, whose loops the file would compile only for this)."""
    with np.errstate(all="ignore"):
        return function(*args, backend="cpu")


def expected(dtype: type) -> tuple[np.ndarray, np.ndarray]:
    x, g, y = inputs(dtype)
    return reference(cbrtgrad.cbrt, x), reference(cbrtgrad.cbrt_grad, g, y)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return bool((a.view(_BITS[a.dtype]) == b.view(_BITS[b.dtype])).all())


# -- Bits ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_scalar_forms_in_a_user_loop_give_the_ufuncs_bits(dtype):
    # 10^6 random bit patterns per dtype (every kind of float, nans with
    # payloads), the special values and the float64 exact-path cases.
    x, g, y = inputs(dtype)
    want_y, want_dx = expected(dtype)
    got = np.empty_like(x)
    forward_loop(x, got)
    assert same_bits(got, want_y)
    got = np.empty_like(y)
    grad_loop(g, y, got)
    assert same_bits(got, want_dx)


@pytest.mark.parametrize(
    ("kernel", "dtype"),
    [
        ("forward", np.float32),
        ("forward", np.float64),
        ("grad", np.float32),
        # NOTE: its block function is the costliest to compile (about 5 s on
        # 2 cores), and the same code as the float32 one's around other formulas.
        pytest.param("grad", np.float64, marks=pytest.mark.slow),
    ],
)
def test_block_forms_give_the_ufuncs_bits(kernel, dtype):
    x, g, y = inputs(dtype)
    want_y, want_dx = expected(dtype)
    if kernel == "forward":
        out = np.empty_like(x)
        assert forward_into(x, out) is out and same_bits(out, want_y)
    else:
        out = np.empty_like(y)
        assert grad_into(g, y, out) is out and same_bits(out, want_dx)


def test_block_forms_take_any_layout_in_place_and_overlapping():
    x, g, y = (a[:6000] for a in inputs(np.float32))
    want_y, want_dx = (a[:6000] for a in expected(np.float32))
    # Non-contiguous: a strided read-only input, the output a transposed
    # view (copied in, written back element by element).
    frozen = x.reshape(60, 100).copy()
    frozen.flags.writeable = False
    out = np.empty((100, 60), np.float32).T
    forward_into(frozen[:, ::2], out[:, :50])
    assert same_bits(out[:, :50], want_y.reshape(60, 100)[:, ::2])
    # In place, and the gradient's output its y.
    work = x.copy()
    forward_into(work, work)
    assert same_bits(work, want_y)
    work = y.copy()
    grad_into(g, work, work)
    assert same_bits(work, want_dx)
    # A partial overlap is read before it is written, as numpy's ufuncs do.
    work = x.copy()
    forward_into(work[:-1], work[1:])
    assert same_bits(work[1:], want_y[:-1])


def test_block_forms_check_shapes():
    # float32: the signatures the bits tests compiled.
    ones = np.ones(4, np.float32)
    with pytest.raises(ValueError, match=r"cbrtgrad.numba.cbrt_into\(x, out\): x and out"):
        forward_into(ones[:3], ones)
    with pytest.raises(ValueError, match="g, y and out must have one shape"):
        grad_into(ones, ones, ones[:2])


def test_parallel_prange_and_fastmath_loops_give_the_same_bits():
    x, g, y = (a[-20000:] for a in inputs(np.float64))  # the specials and hard cases
    want_y, _ = (a[-20000:] for a in expected(np.float64))
    got_y, got_dx = np.empty_like(x), np.empty_like(x)
    parallel_both(x, g, got_y, got_dx)
    assert same_bits(got_y, want_y)
    assert same_bits(got_dx, reference(cbrtgrad.cbrt_grad, g, want_y))
    x32, _, _ = inputs(np.float32)
    got = np.empty_like(x32)
    fastmath_loop(x32, got)
    assert same_bits(got, expected(np.float32)[0])


def test_user_vectorize_and_guvectorize():
    x, g, y = (a[:50000] for a in inputs(np.float32))
    assert same_bits(vectorized_cbrt(x), expected(np.float32)[0][:50000])
    x, g, y = (a[-5000:] for a in inputs(np.float64))
    got = np.empty_like(y)
    with np.errstate(all="ignore"):  # numpy reports a gufunc's IEEE flags (y = 0)
        guvectorized_grad(g, y, got)
    assert same_bits(got, reference(cbrtgrad.cbrt_grad, g, y))


def test_from_python_the_names_are_the_api():
    assert cbrt(-27.0) == -3.0 and cbrt(np.float32(8)).dtype == np.float32
    assert same_bits(cbrt(np.array([[8.0, -1.0]])), np.array([[2.0, -1.0]]))
    assert cbrt(64) == 4.0  # as cbrtgrad.cbrt: integers in float64
    assert cbrt_grad(3.0, 1.0) == 1.0
    out = np.empty(2, np.float32)
    assert cbrt_into(np.float32([8, 27]), out) is out and out.tolist() == [2.0, 3.0]
    assert cbrt_grad_into(np.ones(2), np.array([1.0, -1.0]), np.empty(2)).tolist() == [
        1 / 3,
        1 / 3,
    ]


# -- Vectorisation, by the assembly ---------------------------------------------------


def _compiled(dispatcher, *args, llvm: bool = False) -> str:
    """The assembly (or LLVM IR) of a user function compiled for ``args``."""
    signature = tuple(numba.typeof(a) for a in args)
    return dispatcher.inspect_llvm(signature) if llvm else dispatcher.inspect_asm(signature)


def _bodies(llvm_ir: str) -> dict[str, str]:
    """The LLVM IR functions of a module, by name."""
    found = re.findall(r"^define [^@]*@\"?([\w.]+)\"?\(.*?^}", llvm_ir, re.M | re.S)
    bodies = re.split(r"^define ", llvm_ir, flags=re.M)[1:]
    return dict(zip(found, bodies, strict=True))


@pytest.mark.skipif(not re.search(r"x86|amd64", platform.machine().lower()), reason="x86 assembly")
def test_float32_loop_is_vectorised_and_float64_keeps_its_exact_path_out_of_line():
    # The loops the bits tests compiled (compiled here if this test runs alone).
    x32, x64 = np.ones(4, np.float32), np.ones(4)
    forward_loop(x32, x32.copy())
    forward_loop(x64, x64.copy())
    forward_into(x64, x64.copy())
    packed_fma = r"vfn?m(add|sub)\d+pd\s+[^\n]*%[yz]mm"
    # float32: the formulas inlined in the user's loop and vectorised (their
    # float64 arithmetic in packed 256- or 512-bit registers).
    assert re.search(packed_fma, _compiled(forward_loop, x32, x32)), "float32 loop is scalar"
    # cbrt_into: a call of the ufunc's block function (whose vector loops
    # tests/test_compile_policy.py checks), compiled out of line.
    block = r"call [^\n]*@\"?_ZN8cbrtgrad7kernels3cpu6blocks17forward_block_f64"
    assert re.search(block, _compiled(forward_into, x64, x64, llvm=True))
    # float64: the scalar form calls the rare paths (the exact one, the
    # specials') as functions of their own.
    bodies = _bodies(_compiled(forward_loop, x64, x64, llvm=True))
    (scalar,) = [body for name, body in bodies.items() if "_cbrt_cpu" in name]
    for rare in ("_hard_f64", "_unusual_f64"):
        assert re.search(rf"call [^\n]*@\"?\w*{rare}", scalar), f"{rare} is not a call"


def test_out_of_line_marks_the_kernel_and_nothing_it_calls():
    # The block functions and rare paths are compiled noinline; the formulas
    # they call, which the library's vector loops link too, must not be.
    from llvmlite import ir

    from cbrtgrad.build import simd as _simd
    from cbrtgrad.kernels.cpu import blocks

    module = ir.Module()
    kinds = ir.FunctionType(ir.VoidType(), [])
    for name in ("blocks17forward_block_f64B2v1", "formulas12cube_root_f64B2v1"):
        function = ir.Function(module, kinds, f"_ZN8cbrtgrad7kernels3cpu6{name}")
        ir.IRBuilder(function.append_basic_block()).ret_void()
    prefix = _simd._mangled_prefix(blocks.forward_block_f64.py_func)
    _simd._mark_functions(module, "noinline", prefix)
    assert ["noinline" in f.attributes for f in module.functions] == [True, False]


# -- Clear errors ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        ((3,), "Integers are not converted"),
        ((1 + 2j,), "got x: complex128"),
        ((np.ones(2),), "Over arrays, call cbrtgrad.numba.cbrt_into"),
    ],
    ids=["int", "complex", "array"],
)
def test_cbrt_of_another_type_is_a_typing_error_naming_it(args, hint):
    with pytest.raises(TypingError) as caught:
        call_cbrt(*args)
    message = str(caught.value)
    assert "cbrtgrad.numba.cbrt(x) takes a float32 or float64 scalar" in message
    assert hint in message


@pytest.mark.parametrize(
    ("g", "y", "hint"),
    [
        (np.float32(1), 2.0, "got g: float32, y: float64. Convert one"),
        (1, 2, "Integers are not converted"),
    ],
    ids=["mixed", "int"],
)
def test_cbrt_grad_of_other_types_is_a_typing_error_naming_them(g, y, hint):
    with pytest.raises(TypingError, match="cbrtgrad.numba.cbrt_grad") as caught:
        call_cbrt_grad(g, y)
    assert "float32 or float64 scalars of one type" in str(caught.value)
    assert hint in str(caught.value)


def test_block_forms_of_other_types_are_typing_errors():
    frozen = np.ones(2)
    frozen.flags.writeable = False
    wrong = [
        (np.ones(2, np.int64), np.ones(2)),
        (np.ones(2), frozen),
        (np.ones(2), np.ones((1, 2))),
    ]
    for x, out in wrong:
        with pytest.raises(TypingError, match=r"cbrtgrad.numba.cbrt_into\(x, out\) takes float32"):
            forward_into(x, out)


# -- CUDA -----------------------------------------------------------------------------


@cuda.jit
def cuda_both(x, g, y, dx):
    i = cuda.grid(1)
    if i < x.size:
        y[i] = cbrt(x[i])
        dx[i] = cbrt_grad(g[i], y[i])


@cuda.jit
def cuda_of_an_int(y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = cbrt(i)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_kernel_gives_the_ufuncs_bits(dtype):
    # Under numba's simulator (tests/conftest.py) the kernel is Python and runs
    # the device functions the library's kernels run, as Python.
    x, g, y = inputs(dtype)
    pick = np.r_[0:40, -600:0]  # random patterns, the specials and (float64) hard cases
    x, g = x[pick], g[pick]
    got_y, got_dx = np.empty_like(x), np.empty_like(x)
    cuda_both[4, 160](x, g, got_y, got_dx)
    assert same_bits(got_y, reference(cbrtgrad.cbrt, x))
    assert same_bits(got_dx, reference(cbrtgrad.cbrt_grad, g, got_y))


def test_cuda_kernel_with_an_int_fails_as_a_gpu_compile_would():
    with pytest.raises(TypeError, match=r"cbrtgrad.numba.cbrt\(x\) takes a float32 or float64"):
        cuda_of_an_int[1, 4](np.empty(4))


_PTX = r"""
import json, os, re, sys
os.environ["NUMBA_ENABLE_CUDASIM"] = "0"
from types import SimpleNamespace
import numba.cuda.dispatcher as dispatcher
dispatcher.get_current_device = lambda: SimpleNamespace(compute_capability=(9, 0))
from numba import cuda, types
from cbrtgrad.numba import cbrt, cbrt_grad
def kernel(x, g, y, dx):
    i = cuda.grid(1)
    if i < x.size:
        y[i] = cbrt(x[i])
        dx[i] = cbrt_grad(g[i], y[i])
# float32 only: the float64 device functions' PTX is checked with the
# library's kernels (tests/backends/test_cuda_ptx.py); this is the overload.
ptx, _ = cuda.compile_ptx(kernel, (types.float32[::1],) * 4, cc=(9, 0))
json.dump({"float32": ptx}, sys.stdout)
"""


def test_cuda_overloads_compile_for_a_gpu():
    # The real CUDA target (not the simulator): a user's kernel compiled to
    # PTX for sm_90 in a subprocess, every float operation rounded on its own
    # as the library's kernels are (tests/backends/test_cuda_ptx.py).
    from .backends._ptx import compile_in_subprocess

    pytest.importorskip("numba_cuda", reason="numba-cuda is not installed")
    compiled = compile_in_subprocess(_PTX)
    for name, ptx in compiled.items():
        ops = re.findall(r"\b(mul|add|sub|fma)((?:\.\w+)*)\.(f32|f64)\b", ptx)
        assert any(op == "fma" for op, _, _ in ops), name
        assert all(".rn" in modifiers for _, modifiers, _ in ops), name


# -- numba's cache --------------------------------------------------------------------

_CACHED_USER = """
import sys
import numba, numpy as np
from cbrtgrad.numba import cbrt

@numba.njit(cache=True)
def roots(x, y):
    for i in range(x.size):
        y[i] = cbrt(x[i])

x = np.random.default_rng(0).integers(0, 2**32, 100000, dtype=np.uint64).astype(np.uint32)
x = x.view(np.float32)
y = np.empty_like(x)
roots(x, y)
hits = roots.stats.cache_hits.get(roots.signatures[0], 0)
sys.stdout.write(f"{hits} {y.view(np.uint32).sum(dtype=np.uint64)}")
"""


def test_a_cached_user_function_loads_in_a_fresh_process(tmp_path):
    module = tmp_path / "user_roots.py"
    module.write_text(textwrap.dedent(_CACHED_USER))
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba-cache"))
    runs = [
        subprocess.run(
            [sys.executable, str(module)], capture_output=True, text=True, env=env, check=True
        ).stdout.split()
        for _ in range(2)
    ]
    assert runs[0][0] == "0" and int(runs[1][0]) >= 1, runs  # compiled, then loaded
    x = np.random.default_rng(0).integers(0, 2**32, 100000, dtype=np.uint64).astype(np.uint32)
    want = reference(cbrtgrad.cbrt, x.view(np.float32)).view(np.uint32).sum(dtype=np.uint64)
    assert runs[0][1] == runs[1][1] == str(want)


# -- python tools/measure.py numba -------------------------------------------------------


def test_measure_numba_prints_and_writes_its_rows(tmp_path, capsys, monkeypatch):
    # The subcommand's wiring, with stand-in rows: numba_rows itself is run by
    # its doctest (each of its loops costs a compile).
    from tools import measure
    from tools.measuring import numba_loops

    row = {"dtype": "float64", "kernel": "forward", "case": "@njit loop: cbrt(x[i])"}
    row |= {"seconds": 2e-3, "ratio": 6.0, "max_ulp": 0.5}
    monkeypatch.setattr(numba_loops, "numba_rows", lambda repeat: [row])
    out = tmp_path / "bench.json"
    assert measure.main(["numba", "--repeat", "1", "--json", str(out)]) == 0
    assert "@njit loop: cbrt(x[i])" in capsys.readouterr().out
    assert json.loads(out.read_text())["numba"] == [row]
