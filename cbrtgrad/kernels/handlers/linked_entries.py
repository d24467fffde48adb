"""The block entries by name: how a C function with a fixed signature calls them.

A ufunc's loop gets its block entry's address from numpy, as its ``data``
(``cpu_ufuncs.block_entry``). The XLA FFI handlers and the MLX loops cannot
take an address: their callers (XLA, MLX's primitive) pass them a fixed set
of arguments. So they, and the ``prange`` loops with them (one mechanism
rather than an address argument for some and a name for the others), call
each entry by a symbol name, which LLVM's dynamic linker resolves when the
loop is compiled or loaded from the kernel cache, to the address
:func:`link_entry` registered for it in this process
(``llvmlite.binding.add_symbol``, as numba does for its own C helpers).

NOTE: by name, not by linking the block functions' code: numba would
optimise and compile that again inside every handler, at the handler's SIMD
shape (a threaded float64 gradient's handler took 9.6 s to compile, with the
entry 1 s; docs/cache.md). A handler's vector code is then its entry's, the
ufunc's, and so are its bits.

NOTE: a handler that names an entry must never be compiled or loaded before
:func:`link_entry` has run for it in this process: LLVM's linker aborts the
process on a symbol it cannot find. The loops' builders
(``xla_ffi.handler``, ``buffer_loops.loop``, ``prange_loops.parallel_loop``)
call it first.
"""

from __future__ import annotations

from typing import Any

import numba
from llvmlite import binding, ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ...build import compile as _compile
from ..cpu import lazy
from ..cpu.fpstatus import FENV_MASK, raised_flags
from ..cpu.ufuncs import block_entry


def entry_symbol(kernel: str, dtype: str) -> str:
    """The symbol the block entry of ``kernel`` for ``dtype`` is linked by.

    Examples
    --------
    >>> entry_symbol("grad", "float64")
    'cbrtgrad_block_entry_grad_float64'
    """
    return f"cbrtgrad_block_entry_{kernel}_{dtype}"


def link_entry(kernel: str, dtype: str) -> int:
    """Compile or load the block entry, and register its address under its symbol.

    Once per process, before any handler that names it is compiled or loaded.

    Returns
    -------
    int
        The entry's address.

    Examples
    --------
    >>> from cbrtgrad.kernels.cpu.ufuncs import block_entry
    >>> link_entry("forward", "float32") == block_entry("forward", "float32").address
    True
    """

    def build() -> int:
        address: int = block_entry(kernel, dtype).address
        binding.add_symbol(entry_symbol(kernel, dtype), address)
        return address

    linked: int = lazy.once(f"linked_entry.{kernel}.{dtype}", build)
    return linked


def _entry_of(kernel: str) -> Any:
    """An intrinsic ``entry(array)``: the linked block entry of ``kernel`` for the array's dtype."""

    def entry(typingctx, array):  # type: ignore[no-untyped-def]
        if not isinstance(array, types.Array) or not isinstance(array.dtype, types.Float):
            return None
        symbol = entry_symbol(kernel, str(array.dtype))

        def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
            # Declared with no parameters: run_forward_entry and
            # run_grad_entry cast the pointer to the entry's own type.
            declared = ir.FunctionType(ir.VoidType(), [])
            function = cgutils.get_or_insert_function(builder.module, declared, symbol)
            return builder.bitcast(function, ir.IntType(8).as_pointer())

        return types.voidptr(array), codegen

    return intrinsic(entry)


#: ``forward_entry_of(x)`` and ``grad_entry_of(y)`` (numba code only): the
#: forward's and the gradient's block entry for the array's dtype, as the
#: ``entry`` of ``cpu_ufuncs.run_forward_entry`` and ``run_grad_entry``.
forward_entry_of = _entry_of("forward")
grad_entry_of = _entry_of("grad")


@numba.njit(**_compile.SCALAR_OPTIONS)
def flags_now():  # type: ignore[no-untyped-def]
    # The <fenv.h> flags set now: the ``before`` of run_grad_entry for a
    # caller that reads no flags (XLA, MLX). The float64 gradient's entry then
    # keeps them, and audits no block for flags that were set before it ran.
    return raised_flags(FENV_MASK)
