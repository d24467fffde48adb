"""Vector-ABI functions of shared libraries (libmvec, SLEEF), called from numba.

libmvec and SLEEF functions take and return a whole vector register
(``ymm0``, or ``zmm0`` for the AVX-512 variants: the x86 vector function
ABI), so ``ctypes`` cannot call them. They are called from numba instead:
the library is loaded into the process with
``llvmlite.binding.load_library_permanently`` (which is also where the JIT
resolves symbols), and an ``@intrinsic`` declares
``<4 x double> @_ZGVdN4v_cbrt(<4 x double>)`` and calls it on a vector load
from the array. The numba function is compiled for the host CPU (and, for
the 512-bit variants, with 512-bit vectors preferred, without which LLVM's
tuning for Intel's AVX-512 CPUs would pass a 512-bit vector as two 256-bit
halves), so LLVM passes that vector in the register the callee expects; on
hosts without AVX2 the peer is absent.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from cbrtgrad.build.compile import preferred_vector_width


def vector_kernel(symbol: str, lanes: int, dtype: np.dtype) -> Callable[..., None]:
    """A numba function ``apply(x, out)`` over 1-D contiguous arrays calling ``symbol``.

    ``symbol`` must already resolve in this process (a library loaded with
    ``load_library_permanently``): the JIT links the call against it.
    """
    from llvmlite import ir
    from numba import njit, types
    from numba.core import cgutils
    from numba.extending import intrinsic

    element = types.float64 if dtype == np.float64 else types.float32

    @intrinsic
    def vector_call(typingctx, src, dst, start):  # type: ignore[no-untyped-def]
        # dst[start:start+lanes] = symbol(src[start:start+lanes]), one call on
        # one vector register; the caller keeps start + lanes <= size.
        def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
            src_ty, dst_ty, _ = signature.args
            src_ary = context.make_array(src_ty)(context, builder, args[0])
            dst_ary = context.make_array(dst_ty)(context, builder, args[1])
            vector = ir.VectorType(context.get_value_type(element), lanes)
            fnty = ir.FunctionType(vector, [vector])
            fn = cgutils.get_or_insert_function(builder.module, fnty, symbol)
            src_ptr = builder.bitcast(builder.gep(src_ary.data, [args[2]]), vector.as_pointer())
            result = builder.call(fn, [builder.load(src_ptr, align=1)])
            dst_ptr = builder.bitcast(builder.gep(dst_ary.data, [args[2]]), vector.as_pointer())
            builder.store(result, dst_ptr, align=1)
            return context.get_dummy_value()

        return types.void(src, dst, start), codegen

    def apply(x, out):  # type: ignore[no-untyped-def]
        n = x.size
        full = n - n % lanes
        for i in range(0, full, lanes):
            vector_call(x, out, i)
        if full < n:
            # The tail goes through a padded vector of its own: a full-width
            # load from x itself would read past its end.
            pad = np.ones(lanes, x.dtype)
            res = np.empty(lanes, x.dtype)
            for j in range(n - full):
                pad[j] = x[full + j]
            vector_call(pad, res, 0)
            for j in range(n - full):
                out[full + j] = res[j]

    bits = lanes * element.bitwidth
    signature = types.void(element[::1], element[::1])
    # NOTE: compiled eagerly for its one signature inside the width context:
    # a 512-bit vector argument stays one zmm register only where the caller
    # prefers 512-bit vectors (see the module's docstring).
    with preferred_vector_width(bits):
        return njit(signature, nogil=True)(apply)  # type: ignore[no-any-return]


@functools.cache
def load(candidates: tuple[str, ...]) -> tuple[str, str]:
    """Load the first library of ``candidates`` into the process: (name, error)."""
    import llvmlite.binding as llvm

    errors = []
    for name in candidates:
        try:
            llvm.load_library_permanently(name)
        except RuntimeError as exc:
            errors.append(str(exc).strip() or name)
        else:
            return name, ""
    return "", "; ".join(errors)
