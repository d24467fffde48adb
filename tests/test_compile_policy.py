"""Compile policy and environment flags: vectorised loops, fast-math warning."""

import functools
import os
import re
import subprocess
import sys

import pytest

from cbrtgrad import _config
from cbrtgrad.build import compile as _compile


def test_ufunc_loops_are_vectorised():
    # The loops around the scalar formulas must use SIMD registers (ymm or
    # zmm); a scalar libm-style loop would be 5x slower. Both ufuncs' loops
    # call cbrtgrad's own block functions through their block entries
    # (kernels/cpu/ufunc_loops.py), which hold the vector code.
    loops = _kernel_loop_assembly()
    # Two entries (float32, float64) each.
    assert sorted(loops) == [
        "forward_f32_at",
        "forward_f64_at",
        "grad_f32_at",
        "grad_f64_at",
    ]
    for name, text in loops.items():
        assert re.search(r"%[yz]mm\d+", text), f"{name} is not vectorised"
        if name.startswith("forward"):
            # The exact fma of the error-free transformations, as vector instructions.
            assert re.search(r"vf(n)?m(add|sub)\d+[ps]d\s+%[yz]mm", text), name
        else:
            # The quotient: a vector division, not one per element.
            assert re.search(r"vdivpd\s+(\S+, )?%[yz]mm", text), name


def _has_avx512() -> bool:
    # The CPU numba compiles for: the host's, or the one NUMBA_CPU_NAME and
    # NUMBA_CPU_FEATURES name (another CPU's code path, run here).
    from cbrtgrad.build import isa as _isa

    return _isa.host_isa().name == "AVX-512"


@functools.cache
def _kernel_loop_assembly() -> dict[str, str]:
    """The assembly of the ufuncs' four block entries as the kernel cache holds them.

    What a process loads and runs, with no compile of its own: the kernels
    are built here (compiled once by whichever test process needs them
    first, loaded by the others). NOTE: numba's cache internals, as
    numba reads them for cache=True: a cache entry holds the library's
    object code and its optimised LLVM module (for linking); that module
    assembled by numba's own target machine gives the object code's
    instructions (``objdump -d`` of it shows the same registers) with no
    disassembler needed.
    """
    import llvmlite.binding as ll
    from numba.core import sigutils
    from numba.core.caching import FunctionCache
    from numba.core.registry import cpu_target
    from numba.core.typing import signature

    from cbrtgrad.build import locator as _locator
    from cbrtgrad.kernels.cpu import ufuncs as cpu_ufuncs

    cpu_ufuncs.ufuncs()
    codegen = cpu_target.target_context.codegen()
    assembly = {}
    for entries in cpu_ufuncs.ENTRIES.values():
        for dtype, (function, c_signature) in entries.items():
            args, result = sigutils.normalize_signature(c_signature)
            marked = _locator.kernel_function(function, dtype)
            if marked is None:
                pytest.skip("reads the kernel cache, which is off here (CBRTGRAD_CACHE=0)")
            cache = FunctionCache(marked)  # the cache numba's cache=True gives the kernel
            entry = cache._cache_file.load(cache._index_key(signature(result, *args), codegen))
            assert entry is not None, f"{function.__name__} is not in the kernel cache"
            _, kind, (_, bitcode) = entry[0]  # the library's (name, kind, data)
            assert kind == "object"
            text = str(codegen._tm.emit_assembly(ll.parse_bitcode(bitcode)))
            assembly[function.__name__] = text
    return assembly


#: A user's own numba loop (compiled with numba's defaults, in a process
#: that built cbrtgrad's kernels or in one that never imported cbrtgrad).
_USER_LOOP = """
import numba

@numba.njit("void(float64[::1], float64[::1])")
def user_loop(a, out):
    for i in range(a.size):
        out[i] = a[i] * 3.0 + 1.0

assembly = "\\n".join(user_loop.inspect_asm().values())
"""


def _user_loop_assembly_here() -> str:
    namespace: dict[str, object] = {}
    exec(_USER_LOOP, namespace)
    return str(namespace["assembly"])


@functools.cache
def _user_loop_assembly_alone() -> str:
    script = _USER_LOOP + "\nprint(assembly)"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    return done.stdout


_ASM_OF_THE_FLOAT64_FORWARD = """
import numpy as np
from cbrtgrad.kernels.cpu import catalog as cpu
cpu.ufunc("cube_root", np.float64)
"""


@functools.cache
def _assembly(env_extra: tuple[tuple[str, str], ...], script: str) -> tuple[str, ...]:
    # The assembly of every function a fresh process compiles for ``script``,
    # by section. NOTE: CBRTGRAD_CACHE=0: a kernel loaded from the on-disk
    # cache is not compiled, so numba would print no assembly for it.
    env = dict(os.environ, NUMBA_DUMP_ASSEMBLY="1", CBRTGRAD_CACHE="0", **dict(env_extra))
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return tuple(re.split(r"-{5,}ASSEMBLY ", done.stdout))


def _widest_register(text: str) -> int:
    for bits, register in ((512, "zmm"), (256, "ymm"), (128, "xmm")):
        if re.search(rf"%{register}\d+", text):
            return bits
    return 0


@pytest.mark.skipif(not _has_avx512(), reason="needs an AVX-512 CPU")
def test_kernels_use_512_bit_vectors_and_other_numba_code_keeps_its_default():
    for name, text in _kernel_loop_assembly().items():
        assert re.search(r"%zmm\d+", text), f"{name} is not 512-bit"
    # A user's loop compiled after the kernels were built in this process.
    # NOTE: numba's own default differs between AVX-512 CPUs: LLVM's tuning
    # of Intel's (skx, icelake, ...) prefers 256-bit vectors, AMD Zen 4's does
    # not. So the user's loop is compared with the same loop compiled in a
    # process that never imported cbrtgrad.
    here, alone = _user_loop_assembly_here(), _user_loop_assembly_alone()
    assert _widest_register(here) == _widest_register(alone) > 0


@pytest.mark.skipif(not _has_avx512(), reason="needs an AVX-512 CPU")
def test_vector_width_256_makes_the_float64_loops_256_bit(monkeypatch):
    # The float64 forward's loop compiled under the setting (each loop is
    # compiled on its own first use; the gradient's would add 10 s of
    # compile). NOTE: the float32 loops use zmm whatever the setting: LLVM
    # picks 8 lanes from the float32 width, and their float64 arithmetic
    # fills zmm.
    env = (("CBRTGRAD_VECTOR_WIDTH", "256"),)
    sections = _assembly(env, _ASM_OF_THE_FLOAT64_FORWARD)
    (loop,) = [s for s in sections if s.startswith("forward_f64_at")]
    assert re.search(r"%ymm\d+", loop) and not re.search(r"%zmm\d+", loop)
    # Every float64 loop takes its width from the one setting, by the same
    # function the compiled forward's took it from.
    from cbrtgrad.kernels.cpu import prange_loops
    from cbrtgrad.kernels.cpu import ufuncs as cpu_ufuncs

    monkeypatch.setenv("CBRTGRAD_VECTOR_WIDTH", "256")
    _config.settings.cache_clear()
    try:
        for kernel in ("forward", "grad"):
            assert cpu_ufuncs.ufunc_loop_shape("float64", kernel).width == 256
        for name, (signatures, _) in prange_loops.LOOPS.items():
            for signature in signatures:
                assert prange_loops.parallel_loop_shape(name, signature).width <= 256
    finally:
        monkeypatch.delenv("CBRTGRAD_VECTOR_WIDTH")
        _config.settings.cache_clear()
    assert cpu_ufuncs.ufunc_loop_shape("float64", "grad").width == 512


@pytest.mark.parametrize("raw", ["128", "wide"])
def test_bad_vector_width_is_a_value_error(monkeypatch, raw):
    monkeypatch.setenv("CBRTGRAD_VECTOR_WIDTH", raw)
    _config.settings.cache_clear()
    try:
        with pytest.raises(ValueError, match="CBRTGRAD_VECTOR_WIDTH"):
            _config.settings()
    finally:
        monkeypatch.delenv("CBRTGRAD_VECTOR_WIDTH")
        _config.settings.cache_clear()


def test_preferred_vector_width_rejects_other_widths():
    with pytest.raises(ValueError, match="bits must be 128, 256 or 512"):
        with _compile.preferred_vector_width(1024):
            pass


def test_fastmath_flag_warns(monkeypatch):
    monkeypatch.setenv("CBRTGRAD_FASTMATH", "1")
    _config.settings.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="fast-math"):
            options = _compile.cpu_options()
        assert options["fastmath"] is True
    finally:
        monkeypatch.delenv("CBRTGRAD_FASTMATH")
        _config.settings.cache_clear()
    assert _compile.cpu_options()["fastmath"] is False


@pytest.mark.parametrize("raw", ["many", "-5", "1.5"])
def test_bad_parallel_min_is_a_value_error(monkeypatch, raw):
    monkeypatch.setenv("CBRTGRAD_PARALLEL_MIN", raw)
    _config.settings.cache_clear()
    try:
        with pytest.raises(ValueError, match="CBRTGRAD_PARALLEL_MIN"):
            _config.settings()
    finally:
        monkeypatch.delenv("CBRTGRAD_PARALLEL_MIN")
        _config.settings.cache_clear()


def test_preferred_vector_width_warns_when_numba_internals_moved(monkeypatch):
    from numba.core import codegen

    monkeypatch.delattr(codegen, "CPUCodeLibrary")
    with pytest.warns(RuntimeWarning, match="default SIMD width"):
        with _compile.preferred_vector_width(512):
            pass


@pytest.mark.parametrize("interleave", [-1, 17, 1.5])
def test_preferred_vector_width_rejects_bad_interleave(interleave):
    with pytest.raises(ValueError, match="interleave must be an integer"):
        with _compile.preferred_vector_width(256, interleave=interleave):
            pass


@pytest.mark.parametrize(
    ("cpu", "features", "machine", "isa", "width"),
    [
        (
            "skx",
            {"avx512f": True, "avx512dq": True, "avx2": True, "fma": True},
            "x86_64",
            "AVX-512",
            512,
        ),
        ("znver3", {"avx2": True, "fma": True, "avx": True}, "x86_64", "AVX2", 256),
        ("sandybridge", {"avx": True}, "x86_64", "AVX", 256),
        ("x86-64", {"sse2": True}, "x86_64", "SSE2", 128),
        ("apple-m1", {"neon": True}, "arm64", "NEON", 128),
        ("neoverse-v1", {"neon": True, "sve": True}, "aarch64", "SVE", 128),
    ],
)
def test_loop_shape_never_exceeds_the_cpus_vectors(cpu, features, machine, isa, width):
    from cbrtgrad.build.isa import classify

    host = classify(cpu, features, machine)
    assert host.name == isa
    shape = _compile.loop_shape(512, host)
    # The 512-bit preference reaches only a CPU with AVX-512.
    assert shape.width == min(width, _compile.default_vector_width())
    assert _compile.loop_shape(256, host).width == min(256, width)


@pytest.mark.skipif(_has_avx512(), reason="checks a CPU without AVX-512")
def test_no_512_bit_instructions_without_avx512():
    # On AVX2 (or older) CPUs every kernel loop is 256 bits or narrower.
    for text in (*_kernel_loop_assembly().values(), _user_loop_assembly_here()):
        assert not re.search(r"%zmm\d+", text)


def _features_without_avx512() -> str:
    # What an AVX2 CPU with this host's other features offers: a Zen 1's
    # target, as .ci/run compiles for it (tools/zen1_target.py).
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "tools" / "zen1_target.py"
    spec = importlib.util.spec_from_file_location("zen1_target", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(module.zen1_features())


_ISA_AND_SHAPE = """
from cbrtgrad.build import isa as _isa, compile as _compile
isa = _isa.host_isa()
print(isa.cpu, isa.name, isa.vector_bits, isa.configured, _compile.loop_shape(512).width)
print(isa.describe())
"""


@pytest.mark.skipif(
    "+avx2" not in _features_without_avx512().split(","), reason="needs an x86 CPU with AVX2"
)
def test_the_kernels_follow_numbas_target_not_the_host():
    # NUMBA_CPU_NAME/NUMBA_CPU_FEATURES make numba compile for another CPU:
    # the kernels' SIMD shape follows that target (a Zen 1's code path, run
    # on whatever x86 CPU runs the suite), not the silicon under it.
    env = (("NUMBA_CPU_NAME", "znver1"), ("NUMBA_CPU_FEATURES", _features_without_avx512()))
    done = subprocess.run(
        [sys.executable, "-c", _ISA_AND_SHAPE],
        capture_output=True,
        text=True,
        env=dict(os.environ, **dict(env)),
        check=True,
    )
    first, described = done.stdout.splitlines()
    assert first.split() == ["znver1", "AVX2", "256", "True", "256"]
    assert "compiling for znver1" in described
    # The float64 forward as numba compiles it for that target: 256-bit.
    sections = _assembly(env, _ASM_OF_THE_FLOAT64_FORWARD)
    (loop,) = [s for s in sections if s.startswith("forward_f64_at")]
    assert re.search(r"%ymm\d+", loop) and not re.search(r"%zmm\d+", loop)


def test_a_malformed_numba_cpu_features_is_a_value_error():
    from cbrtgrad.build.isa import parse_features

    assert parse_features("+avx2, -avx512f,") == {"avx2": True, "avx512f": False}
    with pytest.raises(ValueError, match="NUMBA_CPU_FEATURES must be"):
        parse_features("+avx2,fma")


def test_functions_only_numba_calls_have_no_python_entry_and_refuse_python():
    # kernels/internal_jit.py: compiled without numba's Python and C
    # wrappers (compile time), so a Python call would jump to an entry that
    # does not exist; it must be a TypeError, never a crash.
    import numpy as np

    from cbrtgrad.kernels.cpu import blocks, grad_blocks, grad_flags
    from cbrtgrad.kernels.internal_jit import NumbaOnlyDispatcher

    helpers = {
        "formula": blocks.FORMULAS.cube_root_f64_exact,
        "block": blocks.forward_block_f64,
        "second pass": blocks._redo_hard_lanes_f64,
        "gradient by address": grad_blocks.grad_f64_at,
        "flag audit": grad_flags.audit,
    }
    for name, helper in helpers.items():
        assert isinstance(helper, NumbaOnlyDispatcher), name
        assert helper.targetoptions["no_cpython_wrapper"], name
        with pytest.raises(TypeError, match="compiled for numba code only"):
            helper(np.ones(2), np.ones(2))
    # The kernels built on them still run: the float64 forward through its
    # exact path (2^-900 is tiny: always redone there).
    import cbrtgrad

    assert cbrtgrad.cbrt(np.array([2.0**-900, 27.0]), backend="cpu").tolist() == [2.0**-300, 3.0]
