"""Bit-level primitives the scalar formulas need, as numba CPU intrinsics.

The formulas in :mod:`cbrtgrad.kernels.formulas.scalar` are written against a small
namespace of primitives (multiply, add and subtract rounded once each, exact
fused multiply-adds and four bit casts) so
that one source serves every target: this module supplies them for numba's CPU
target, :mod:`cbrtgrad.kernels.cuda.primitives` for CUDA and the simulator.

NOTE: ``fma`` must be the exact IEEE operation, not a contraction LLVM may or
may not perform: the error-free transformations in the formulas depend on it.
``llvm.fma.f64`` is exact by definition and LLVM vectorises it to ``vfmadd``.
Conversely ``mul``, ``add`` and ``sub`` must each be rounded on their own:
the proofs count every rounding, and a compiler that fused a product into a
following sum would change the bits (numba's CPU target never does; NVVM
does by default, see :mod:`cbrtgrad.kernels.cuda.primitives`).
"""

from __future__ import annotations

from types import SimpleNamespace

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

_F64 = ir.DoubleType()


@intrinsic
def fma(typingctx, a, b, c):  # type: ignore[no-untyped-def]
    """Exact fused multiply-add ``a * b + c`` with one rounding (float64)."""
    sig = types.float64(types.float64, types.float64, types.float64)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        fnty = ir.FunctionType(_F64, [_F64, _F64, _F64])
        fn = builder.module.declare_intrinsic("llvm.fma", [_F64], fnty)
        return builder.call(fn, args)

    return sig, codegen


@intrinsic
def fma32(typingctx, a, b, c):  # type: ignore[no-untyped-def]
    """Exact fused multiply-add ``a * b + c`` with one rounding (float32)."""
    sig = types.float32(types.float32, types.float32, types.float32)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        f32 = ir.FloatType()
        fnty = ir.FunctionType(f32, [f32, f32, f32])
        fn = builder.module.declare_intrinsic("llvm.fma", [f32], fnty)
        return builder.call(fn, args)

    return sig, codegen


def _rounded(op, numba_type):  # type: ignore[no-untyped-def]
    """Make an intrinsic for one IEEE operation ``a op b``, rounded to nearest once.

    On the CPU these are exactly numba's own ``*``, ``+`` and ``-`` (the same
    LLVM instruction, which numba never contracts); the formulas call them by
    name so that the CUDA target can use operations that cannot be fused
    (:mod:`cbrtgrad.kernels.cuda.primitives`).
    """

    @intrinsic
    def rounded(typingctx, a, b):  # type: ignore[no-untyped-def]
        def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
            return getattr(builder, op)(args[0], args[1])

        return numba_type(numba_type, numba_type), codegen

    return rounded


mul = _rounded("fmul", types.float64)
add = _rounded("fadd", types.float64)
sub = _rounded("fsub", types.float64)
mul32 = _rounded("fmul", types.float32)


def _bitcast(src, dst, llvm_type):  # type: ignore[no-untyped-def]
    """Make an intrinsic reinterpreting the bits of ``src`` as ``dst``."""

    @intrinsic
    def cast(typingctx, value):  # type: ignore[no-untyped-def]
        def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
            return builder.bitcast(args[0], llvm_type)

        return dst(src), codegen

    return cast


f64_as_i64 = _bitcast(types.float64, types.int64, ir.IntType(64))
i64_as_f64 = _bitcast(types.int64, types.float64, _F64)
f32_as_i32 = _bitcast(types.float32, types.int32, ir.IntType(32))
i32_as_f32 = _bitcast(types.int32, types.float32, ir.FloatType())

CPU_PRIMITIVES = SimpleNamespace(
    mul=mul,
    add=add,
    sub=sub,
    mul32=mul32,
    fma=fma,
    fma32=fma32,
    f64_as_i64=f64_as_i64,
    i64_as_f64=i64_as_f64,
    f32_as_i32=f32_as_i32,
    i32_as_f32=i32_as_f32,
)
