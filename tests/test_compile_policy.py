"""Compile policy and environment flags: vectorised loops, fast-math warning."""

import functools
import os
import re
import subprocess
import sys

import pytest

from cbrtgrad import _compile, _config


def test_ufunc_loops_are_vectorised():
    # The loops around the scalar formulas must use SIMD registers (ymm or
    # zmm); a scalar libm-style loop would be 5x slower. Both ufuncs' loops
    # are cbrtgrad's own block functions (kernels/ufunc_loops.py).
    sections = _assembly(())
    forward = [s for s in sections if s.startswith("forward_loop_f")]
    gradient = [s for s in sections if s.startswith("grad_loop_f")]
    # Two loops (float32, float64) each.
    assert len(forward) == 2 and len(gradient) == 2
    for text in forward + gradient:
        assert re.search(r"%[yz]mm\d+", text), "ufunc loop is not vectorised"
    for text in forward:
        # The exact fma of the error-free transformations, as vector instructions.
        assert re.search(r"vf(n)?m(add|sub)\d+[ps]d\s+%[yz]mm", text)
    for text in gradient:
        # The quotient: a vector division, not one per element.
        assert re.search(r"vdivpd\s+(\S+, )?%[yz]mm", text)


def _has_avx512() -> bool:
    import llvmlite.binding as ll

    return "+avx512f" in ll.get_host_cpu_features().flatten().split(",")


_ASM_OF_KERNELS_AND_A_USER_LOOP = """
import numba
from cbrtgrad.kernels.cpu import ufuncs
ufuncs()
numba.vectorize(["float64(float64)"])(lambda v: v * 3.0 + 1.0)
"""

_ASM_OF_THE_FLOAT64_FORWARD = """
import numpy as np
from cbrtgrad.kernels import cpu
cpu.ufunc("cube_root", np.float64)
"""

_USER_LOOP_ALONE = """
import numba
numba.vectorize(["float64(float64)"])(lambda v: v * 3.0 + 1.0)
"""


@functools.cache
def _assembly(
    env_extra: tuple[tuple[str, str], ...], script: str = _ASM_OF_KERNELS_AND_A_USER_LOOP
) -> tuple[str, ...]:
    # The assembly of every function a fresh process compiles for the kernels
    # and a user's loop (or for ``script``), by section. NOTE: cached: each
    # run compiles all the kernels (about 30 s on a 2-core machine), and the
    # tests of one environment read the same sections.
    # NOTE: CBRTGRAD_CACHE=0: a kernel loaded from the on-disk cache is not
    # compiled, so numba would print no assembly for it.
    env = dict(os.environ, NUMBA_DUMP_ASSEMBLY="1", CBRTGRAD_CACHE="0", **dict(env_extra))
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return tuple(re.split(r"-{5,}ASSEMBLY ", done.stdout))


def _wrapper_asm(env_extra: dict[str, str]) -> list[str]:
    sections = _assembly(tuple(sorted(env_extra.items())))
    # In compile order: the forward's own loops (float32, float64), the
    # gradient's own loops (float32, float64), then the user's loop.
    loops = ("forward_loop_f", "grad_loop_f", "ufunc_wrapper")
    return [s for s in sections if s.startswith(loops)]


def _widest_register(text: str) -> int:
    for bits, register in ((512, "zmm"), (256, "ymm"), (128, "xmm")):
        if re.search(rf"%{register}\d+", text):
            return bits
    return 0


@pytest.mark.skipif(not _has_avx512(), reason="needs an AVX-512 CPU")
def test_kernels_use_512_bit_vectors_and_other_numba_code_keeps_its_default():
    wrappers = _wrapper_asm({})
    # four kernel loops, then the user's loop compiled after them
    assert len(wrappers) == 5
    for text in wrappers[:4]:
        assert re.search(r"%zmm\d+", text), "kernel loop is not 512-bit"
    # NOTE: numba's own default differs between AVX-512 CPUs: LLVM's tuning
    # of Intel's (skx, icelake, ...) prefers 256-bit vectors, AMD Zen 4's does
    # not. So the user's loop is compared with the same loop compiled in a
    # process that never compiled a cbrtgrad kernel.
    (default,) = [s for s in _assembly((), _USER_LOOP_ALONE) if s.startswith("ufunc_wrapper")]
    assert _widest_register(wrappers[4]) == _widest_register(default) > 0


@pytest.mark.skipif(not _has_avx512(), reason="needs an AVX-512 CPU")
def test_vector_width_256_makes_the_float64_loops_256_bit(monkeypatch):
    # The float64 forward's loop compiled under the setting (each loop is
    # compiled on its own first use; the gradient's would add 10 s of
    # compile). NOTE: the float32 loops use zmm whatever the setting: LLVM
    # picks 8 lanes from the float32 width, and their float64 arithmetic
    # fills zmm.
    env = (("CBRTGRAD_VECTOR_WIDTH", "256"),)
    sections = _assembly(env, _ASM_OF_THE_FLOAT64_FORWARD)
    (loop,) = [s for s in sections if s.startswith("forward_loop_f")]
    assert re.search(r"%ymm\d+", loop) and not re.search(r"%zmm\d+", loop)
    # Every float64 loop takes its width from the one setting, by the same
    # function the compiled forward's took it from.
    from cbrtgrad.kernels import cpu_ufuncs, prange_loops

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
    from cbrtgrad._isa import classify

    host = classify(cpu, features, machine)
    assert host.name == isa
    shape = _compile.loop_shape(512, host)
    # The 512-bit preference reaches only a CPU with AVX-512.
    assert shape.width == min(width, _compile.default_vector_width())
    assert _compile.loop_shape(256, host).width == min(256, width)


@pytest.mark.skipif(_has_avx512(), reason="checks a CPU without AVX-512")
def test_no_512_bit_instructions_without_avx512():
    # On AVX2 (or older) CPUs every kernel loop is 256 bits or narrower.
    for text in _wrapper_asm({}):
        assert not re.search(r"%zmm\d+", text)
