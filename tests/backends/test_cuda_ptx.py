"""What only a GPU would show, checked without one: compiled code, names, toolchain.

The simulator runs the kernels as Python, so it never compiles them, reads a
device attribute or launches through the driver. Here the real kernels are
compiled for an H100/H200 (sm_90) with libNVVM, NVRTC, ptxas and cuobjdump
from the CUDA toolkit wheels (the test extra installs them), in a subprocess
with the simulator off and a stand-in for the current device (the only thing
a compile asks of one), and checked for what the proofs assume: every float
multiply, add and subtract rounded on its own, nothing fused that the CPU
kernels do not fuse, whatever the ptxas version.
"""

from __future__ import annotations

import re
import struct
import subprocess
import sys
from typing import Any

import pytest

from ._ptx import compile_in_subprocess

pytest.importorskip("numba_cuda", reason="numba-cuda is not installed")

_COMPILE = r"""
import json, os, re, sys
os.environ["NUMBA_ENABLE_CUDASIM"] = "0"
from types import SimpleNamespace
import numpy as np
import numba.cuda.dispatcher as dispatcher
# NOTE: a device-function compile asks numba-cuda for the current device's
# compute capability; there is no GPU here, so stand one in.
dispatcher.get_current_device = lambda: SimpleNamespace(compute_capability=(9, 0))
from numba.cuda.compiler import _compile_pyfunc_with_fixup
from numba import cuda, types
from cbrtgrad.kernels.cuda import elementwise as kernels
out = {}
f16, f32, f64 = (np.dtype(t) for t in ("float16", "float32", "float64"))
for name, compute, inputs, scalar_g in [
    ("forward", f32, (f32,), False), ("forward", f64, (f64,), False),
    ("forward", f32, (f16,), False),
    ("grad", f32, (f32, f32), False), ("grad", f64, (f64, f64), False),
    ("fused", f32, (f32, f32), False), ("fused", f64, (f64, f64), False),
    ("grad", f32, (f32, f32), True), ("fused", f64, (f64, f64), True),
]:
    fn = kernels.python_kernel(name, compute, inputs, scalar_g=scalar_g)
    sig = kernels.signature(name, compute, inputs)
    # One compile for both: the LLVM IR handed to libNVVM (the kernel and
    # every device function it links) and the PTX libNVVM makes of it, as
    # cuda.compile_ptx compiles it (a kernel, numba's ABI, optimised).
    library, _ = _compile_pyfunc_with_fixup(fn, sig, device=False, cc=(9, 0), abi="numba")
    ir = "\n".join(str(m) for m in library.modules)
    (ptx,) = library.get_asm_strs(cc=(9, 0))
    key = f"{name}_{compute}_{'_'.join(map(str, inputs))}" + ("_scalar_g" if scalar_g else "")
    out[key] = {"ptx": ptx, "ir": ir}
# The float32 forward's common path alone, as a kernel of its own.
normal = kernels._formulas().cube_root_f32_normal
def common_path(bits, roots):
    roots[0] = normal(bits[0])
pointer = types.CPointer(types.int64)
ptx, _ = cuda.compile_ptx(common_path, types.void(pointer, pointer), cc=(9, 0))
json.dump({"kernels": out, "float32_common_path": ptx}, sys.stdout)
"""


@pytest.fixture(scope="module")
def compiled_all() -> dict[str, Any]:
    return compile_in_subprocess(_COMPILE)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def compiled(compiled_all) -> dict[str, dict[str, str]]:
    return compiled_all["kernels"]  # type: ignore[no-any-return]


_FLOAT_OP = re.compile(r"=\s*(fmul|fadd|fsub)\b[^\n]*?\b(double|float|half)\b([^\n]*)")


def test_no_float_operation_nvvm_could_contract(compiled):
    # The LLVM IR handed to libNVVM (kernel and every device function it
    # links): no fmul, fadd or fsub on floats, which NVVM's default contraction
    # could fuse into an fma, only libdevice's _rn calls; an fsub from -0.0
    # is a negation (exact, and nothing to fuse it with).
    for name, code in compiled.items():
        for op, _, rest in _FLOAT_OP.findall(code["ir"]):
            assert op == "fsub" and rest.strip().startswith("0x8000000000000000,"), (name, rest)
        assert "__nv_dmul_rn" in code["ir"] or "__nv_fmul_rn" in code["ir"], name


def test_every_float_operation_in_the_ptx_is_rounded_on_its_own(compiled):
    # ptxas may fuse a PTX mul.f64 and add.f64 into a DFMA; it never fuses
    # one with an explicit rounding mode (.rn). The fmas are the formulas' own.
    for name, code in compiled.items():
        ops = re.findall(r"\b(mul|add|sub|fma)((?:\.\w+)*)\.(f32|f64)\b", code["ptx"])
        assert ops, name
        for op, modifiers, _ in ops:
            assert ".rn" in modifiers, (name, op, modifiers)


def _tool(name: str) -> str:
    try:
        from cuda.pathfinder import find_nvidia_binary_utility
    except ImportError:
        pytest.skip("cuda-pathfinder is not installed")
    path = find_nvidia_binary_utility(name)
    if path is None:
        pytest.skip(f"{name} (CUDA toolkit wheels) is not installed")
    return str(path)


#: The cubin and the SASS of each (PTX, options) assembled so far: the tests
#: read the same kernels.
_CUBINS: dict[tuple[str, ...], bytes] = {}
_SASS: dict[tuple[str, ...], list[str]] = {}


def _cubin(ptx: str, tmp_path, *options: str) -> bytes:
    key = (ptx, *options)
    if key not in _CUBINS:
        source = tmp_path / "kernel.ptx"
        source.write_text(ptx)
        cubin = tmp_path / "kernel.cubin"
        subprocess.run(
            [_tool("ptxas"), "-arch=sm_90", *options, str(source), "-o", str(cubin)], check=True
        )
        _CUBINS[key] = cubin.read_bytes()
    return _CUBINS[key]


def _sass(ptx: str, tmp_path, *options: str) -> list[str]:
    key = (ptx, *options)
    if key not in _SASS:
        cubin = tmp_path / "kernel.cubin"
        cubin.write_bytes(_cubin(ptx, tmp_path, *options))
        dump = subprocess.run(
            [_tool("cuobjdump"), "-sass", str(cubin)], capture_output=True, text=True, check=True
        ).stdout
        # The instructions alone, without addresses and encodings.
        _SASS[key] = re.findall(r"/\*[0-9a-f]{4,}\*/\s+([^;]*);", dump)
    return _SASS[key]


def _sections_but_notes(cubin: bytes) -> dict[str, bytes]:
    """A cubin's ELF sections by name, less its notes (ptxas writes its command line there)."""
    assert cubin[:5] == b"\x7fELF\x02"  # 64-bit ELF
    (table,) = struct.unpack_from("<Q", cubin, 0x28)
    entry_size, count, names_index = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", cubin, table + i * entry_size) for i in range(count)]
    names = headers[names_index][4]
    sections = {}
    for name, kind, _, _, offset, size in headers:
        label = cubin[names + name : cubin.index(b"\0", names + name)].decode()
        if kind != 7:  # SHT_NOTE
            sections[label] = cubin[offset : offset + size] if kind != 8 else b""  # 8: NOBITS
    return sections


def test_ptxas_fuses_nothing_whatever_its_setting(compiled, tmp_path):
    # The SASS is the same with ptxas's contraction on (its default) and off:
    # nothing in the PTX is left for it to fuse, so the bits cannot depend on
    # the ptxas version the driver or the toolkit brings.
    for name, code in compiled.items():
        default = _sass(code["ptx"], tmp_path)
        assert any(op.startswith(("DFMA", "FFMA")) for op in default), name
        # The same machine code, byte for byte, needs no disassembly (0.4 s a
        # kernel); otherwise the SASS must still be the same, and the
        # assertion shows it.
        off = _cubin(code["ptx"], tmp_path, "--fmad=false")
        if _sections_but_notes(off) != _sections_but_notes(_cubin(code["ptx"], tmp_path)):
            assert default == _sass(code["ptx"], tmp_path, "--fmad=false"), name


_CONVERSIONS = ("F2F", "F2I", "I2F", "I2FP", "F2FP")


def _opcode(instruction: str) -> str:
    # "@!P3 I2FP.F32.S32 R19, R26" -> "I2FP"
    return re.sub(r"^@!?U?P\w+\s+", "", instruction).split()[0].split(".")[0]


def test_the_float32_forward_converts_nothing_on_its_common_path(compiled_all, tmp_path):
    # A finite normal float32 (every input but zeros, subnormals, infs and
    # nans) is computed with no conversion between types: compute capability
    # 9.0 converts at an eighth of its float32 rate, and the select-based
    # cube_root_f32 converts six times per element (docs/kernels.md).
    common = _sass(compiled_all["float32_common_path"], tmp_path)
    assert any(op.startswith("DFMA") for op in common)
    assert not [op for op in common if _opcode(op) in _CONVERSIONS]
    # The control: the whole kernel still has them, on the branch for the specials.
    kernel = _sass(compiled_all["kernels"]["forward_float32_float32"]["ptx"], tmp_path)
    assert [op for op in kernel if _opcode(op) in _CONVERSIONS]


def test_each_thread_addresses_its_elements_by_immediate_offsets(compiled, tmp_path):
    # The block width is a compile-time constant (kernels.threads_per_block),
    # so a thread's elements of a tile lie at constant offsets from its first
    # one: every load and store of a full tile but the first takes its offset
    # as an immediate (LDG [R+0x400]), with no 64-bit integer adds per element.
    from cbrtgrad.kernels.cuda.elementwise import KERNEL_SHAPES

    arrays = {"forward": 2, "grad": 3, "fused": 4}  # inputs and outputs
    for name, code in compiled.items():
        kernel, compute = name.split("_")[:2]
        per_thread = KERNEL_SHAPES[(kernel, compute)][0]
        one_g = name.endswith("_scalar_g")  # g read once, not per element
        sass = _sass(code["ptx"], tmp_path)
        offset = [op for op in sass if re.match(r"(LDG|STG)\S*\s.*\.64\+0x", op)]
        assert len(offset) >= (per_thread - 1) * (arrays[kernel] - one_g), (name, len(offset))


def test_the_sass_check_sees_a_contraction(compiled, tmp_path):
    # The gradient kernel with the rounding modes taken off its multiplies
    # and adds (what NVVM emits for plain * and +): now ptxas fuses some of
    # them (the rounding test's tolerance, 2^-98 |q|, into t + tolerance), and
    # the check above would fail.
    ptx = compiled["grad_float64_float64_float64"]["ptx"]
    plain = re.sub(r"\b(mul|add)\.rn\.f64\b", r"\1.f64", ptx)
    assert _sass(plain, tmp_path) != _sass(plain, tmp_path, "--fmad=false")


_NAMES = """
import os
os.environ["NUMBA_ENABLE_CUDASIM"] = "0"
from cuda.bindings import driver
from cuda.core import LaunchConfig, Stream, launch
from numba import cuda
from numba.cuda.codegen import CUDACodeLibrary
from numba.cuda.dispatcher import _Kernel
from cbrtgrad.kernels.cuda.elementwise import DEVICE_ATTRIBUTES
enum = driver.CUdevice_attribute
print([name for name in DEVICE_ATTRIBUTES if not hasattr(enum, "CU_DEVICE_ATTRIBUTE_" + name)])
print(hasattr(enum, "CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTI_PROCESSOR"))
used = [launch, LaunchConfig, Stream.from_handle, CUDACodeLibrary.get_cufunc]
used += [cuda.external_stream, cuda.current_context, cuda.get_current_device]
used += [_Kernel.launch]  # tools/gpu_check.py --sweep launches compiled kernels with it
print(all(map(callable, used)))
"""


def test_device_attributes_and_driver_names_exist():
    # numba-cuda reads device.NAME as CU_DEVICE_ATTRIBUTE_NAME of
    # cuda.bindings (the simulator has none, so only this sees a wrong name:
    # MAX_THREADS_PER_MULTI_PROCESSOR broke every call on a real H200), and
    # the names the launch path calls exist (cuda.core's launch with bare
    # pointers on a stream made from the caller's handle, the compiled
    # library's kernel, numba-cuda's context and device).
    done = subprocess.run(
        [sys.executable, "-c", _NAMES], capture_output=True, text=True, check=True
    )
    missing, old_name_exists, launch_names = done.stdout.split("\n")[:3]
    assert missing == "[]"
    assert old_name_exists == "False"  # the check would have caught the old name
    assert launch_names == "True"


_PROBE = """
import os, sys
os.environ["NUMBA_ENABLE_CUDASIM"] = "0"
import numpy as np
if sys.argv[1] == "without-row_stack":
    del np.row_stack  # what numpy 2.5 did
from cbrtgrad.backends._cuda_probe import toolchain_problem
from cbrtgrad.backends.cuda import CudaBackend
print(toolchain_problem())
print(CudaBackend().availability())
"""


@pytest.mark.parametrize("numpy_like", ["as-installed", "without-row_stack"])
def test_availability_names_a_numpy_numba_cuda_pair_that_cannot_compile(numpy_like):
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, numpy_like], capture_output=True, text=True, check=True
    )
    problem, status = done.stdout.strip().splitlines()
    if numpy_like == "as-installed":
        assert problem == "None"  # the test extra installs a pair that compiles
        assert "numpy" not in status
    else:
        assert "cannot compile kernels with numpy" in problem and "numpy<2.5" in problem
        assert "issue 907" in problem
        assert status.startswith("Availability(available=False") and "numpy<2.5" in status
