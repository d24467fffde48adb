"""numpy ufuncs whose inner loops are cbrtgrad's own block functions.

``numba.vectorize`` builds a ufunc whose inner loop calls the scalar kernel
once per element, so a kernel cannot look at a block of results before it
returns. The correctly rounded kernels need that: their branch-free fast paths
leave a few lanes undecided (about one in 10^7 for the float64 cube root, one
in 2^28 for the float32 gradient), and a second pass over just those lanes
(:func:`cbrtgrad.kernels.cpu.blocks.forward_block_f64`,
:func:`cbrtgrad.kernels.cpu.grad_blocks.grad_block`) keeps the vector loop free of
branches. A ufunc here has, per dtype, an inner loop (a ``numba.cfunc`` with
numpy's loop signature) and a *block entry*: the block function over
contiguous operands given by address, compiled as a C function of its own
whose address numpy hands the loop as its ``data``. The ufunc is made from
them as numba's own ufunc builder makes its ufuncs
(``numba.np.ufunc._internal.fromfunc``).

NOTE: the loop calls the entry through that address rather than linking
the block function's code: numba links a callee's optimised LLVM module into
every caller and optimises and compiles the whole again, so the loop
recompiled the block function and its formulas, about a quarter of the first
float64 ``cbrt``'s compile, for no speed (docs/cache.md). The address comes
at run time, so the loop has no constant address in it and numba caches it
as any kernel.

The loop hands contiguous operands to the entry as they are (and a broadcast
first operand of a binary ufunc as a buffer of its value); strided ones (any
step, negative, zero or unaligned, as numpy may pass) are gathered into a
buffer of ``BUFFER`` elements per block, and a strided output scattered back
from one, while the contiguous operands of the same call are read and written
in place; the same entry runs on every block, so every layout gives the same
bits.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic, overload
from numba.np import numpy_support

from ...build import compile as _compile
from ..internal_jit import WITHOUT_ENTRIES

#: Elements gathered per step of the strided path.
BUFFER = 1024

#: numpy's inner-loop signature: (args, dimensions, steps, data).
LOOP_SIGNATURE = types.void(
    types.CPointer(types.voidptr),
    types.CPointer(types.intp),
    types.CPointer(types.intp),
    types.voidptr,
)


def _element_access(numba_type: Any, llvm_type: Any) -> tuple[Any, Any]:
    """Intrinsics loading and storing one element at a byte offset from a void pointer."""

    def address(builder: Any, pointer: Any, offset: Any) -> Any:
        byte = builder.gep(pointer, [offset])
        return builder.bitcast(byte, llvm_type.as_pointer())

    @intrinsic
    def load(typingctx, pointer, offset):  # type: ignore[no-untyped-def]
        def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
            # align=1: numpy may pass unaligned strided operands.
            return builder.load(address(builder, *args), align=1)

        return numba_type(types.voidptr, types.intp), codegen

    @intrinsic
    def store(typingctx, pointer, offset, value):  # type: ignore[no-untyped-def]
        def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
            builder.store(args[2], address(builder, args[0], args[1]), align=1)
            return context.get_dummy_value()

        return types.void(types.voidptr, types.intp, numba_type), codegen

    return load, store


_ACCESS = {
    np.dtype(np.float32): _element_access(types.float32, ir.FloatType()),
    np.dtype(np.float64): _element_access(types.float64, ir.DoubleType()),
}


@numba.njit(**_compile.SCALAR_OPTIONS)
def _overlaps_elsewhere(a, b, size):  # type: ignore[no-untyped-def]
    # Whether the ``size`` bytes at ``a`` and at ``b`` (two operands' memory,
    # as addresses) overlap without starting at the same byte. NOTE: numpy
    # passes such operands uncopied where its loop, reading each element
    # before writing it and in order, would be right (``out`` starting
    # before an input: ``out=a[:-1]`` for ``a[1:]``); the block functions
    # read a block's inputs again after writing it (the exact and nan
    # passes), so such a call takes the buffered path, which reads each
    # buffer's inputs before it writes, in order. The same start (in place)
    # the block functions handle themselves.
    return a != b and a < b + size and b < a + size


@intrinsic
def pointer_address(typingctx, pointer):  # type: ignore[no-untyped-def]
    """A void pointer as an integer (numba code only: numba compares no pointers)."""

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        return builder.ptrtoint(args[0], ir.IntType(64))

    return types.int64(types.voidptr), codegen


@intrinsic
def data_pointer(typingctx, array):  # type: ignore[no-untyped-def]
    """The address of an array's first element, as a void pointer (numba code only).

    The array must outlive every use of the address (:func:`keep_alive`).
    """
    if not isinstance(array, types.Array):
        return None

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        return builder.bitcast(data, ir.IntType(8).as_pointer())

    return types.voidptr(array), codegen


@intrinsic
def keep_alive(typingctx, first, second):  # type: ignore[no-untyped-def]
    """Nothing, but numba keeps both arrays until this call (it frees one after its last use)."""

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        return context.get_dummy_value()

    return types.none(first, second), codegen


@intrinsic
def offset_pointer(typingctx, pointer, offset):  # type: ignore[no-untyped-def]
    """``pointer`` moved by ``offset`` bytes, as a void pointer (numba code only)."""

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        return builder.gep(args[0], [args[1]])

    return types.voidptr(types.voidptr, types.intp), codegen


def _call_at(result: Any) -> Any:
    """An intrinsic ``call(function, operands)``: the C function at the void pointer
    ``function`` called with the tuple ``operands``, returning ``result``
    (``types.none`` for a function that returns nothing)."""

    def call(typingctx, function, operands):  # type: ignore[no-untyped-def]
        if not isinstance(operands, types.BaseTuple):
            return None

        def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
            values = [builder.extract_value(args[1], i) for i in range(len(operands))]
            returns = ir.VoidType() if result == types.none else context.get_value_type(result)
            c_type = ir.FunctionType(returns, [context.get_value_type(t) for t in operands])
            called = builder.call(builder.bitcast(args[0], c_type.as_pointer()), values)
            return context.get_dummy_value() if result == types.none else called

        return result(types.voidptr, operands), codegen

    return intrinsic(call)


#: ``call_void_at(function, operands)`` and ``call_int64_at(function, operands)``:
#: a block entry (a ``numba.cfunc`` over addresses, its address in the
#: ufunc loop's ``data``) called from the loop.
call_void_at = _call_at(types.none)
call_int64_at = _call_at(types.int64)


def _block_operand(
    pointer: Any, step: Any, direct: Any, buffer: Any, start: Any, gathered: Any
) -> Any:
    """The address the block entry takes for one operand's block (numba code only)."""
    raise NotImplementedError("_block_operand is only callable from numba-compiled code")


@overload(_block_operand, jit_options=WITHOUT_ENTRIES)
def _overload_block_operand(pointer, step, direct, buffer, start, gathered):  # type: ignore[no-untyped-def]
    load, _ = _ACCESS[numpy_support.as_dtype(buffer.dtype)]

    def operand(pointer, step, direct, buffer, start, gathered):  # type: ignore[no-untyped-def]
        # A contiguous operand's own memory from ``start``, or else its
        # buffer, into which its first ``gathered`` elements are read first
        # (0 for an output, or for a broadcast value already in it). NOTE:
        # only the strided operands are copied: copying every operand when one
        # is strided would cost a contiguous y and out copies of their own.
        if direct:
            return offset_pointer(pointer, start * step)
        for i in range(gathered):
            buffer[i] = load(pointer, (start + i) * step)
        return data_pointer(buffer)

    return operand


def unary_address_loop(entry: Any, args: Any, dims: Any, steps: Any, like: Any) -> None:
    """The inner loop ``y = f(x)`` around the block entry at ``entry``, for ``like``'s dtype.

    numba code only: a ufunc inner loop (numpy's ``(args, dims, steps, data)``)
    calls it with its ``data``, the address of the C function
    ``entry(x, y, n)`` that runs the kernel's block function over ``n``
    contiguous elements given by address (``cpu_ufuncs.forward_f64_at``
    and the like).
    """
    raise NotImplementedError("unary_address_loop is only callable from numba-compiled code")


# NOTE: the two loops out of line (a function of their own that the ufunc's
# loop calls): numba compiles an inlined overload on its own and again in its
# caller. Inlined, they cost the first float64 cbrt 0.6 to 0.9 s of about 4 s
# and the first float64 cbrt_grad 1.4 s of about 8.7, and inlining only their
# contiguous case kept most of it; out of line, the one-element calls of the
# ufuncs take the same time (docs/cache.md). So are
# _block_operand and _call_entry, which they call (0.3 s less on average
# over six rounds, within the machine's spread; the same time per call).
@overload(unary_address_loop, jit_options=WITHOUT_ENTRIES)
def _overload_unary_address_loop(entry, args, dims, steps, like):  # type: ignore[no-untyped-def]
    dtype = numpy_support.as_dtype(like)
    load, store = _ACCESS[dtype]
    itemsize = dtype.itemsize
    numpy_type = dtype.type

    def loop(entry, args, dims, steps, like):  # type: ignore[no-untyped-def]
        n = dims[0]
        x_direct = steps[0] == itemsize
        if x_direct and _overlaps_elsewhere(
            pointer_address(args[0]), pointer_address(args[1]), n * itemsize
        ):
            x_direct = False  # the buffered path (see _overlaps_elsewhere)
        y_direct = steps[1] == itemsize
        if x_direct and y_direct:
            call_void_at(entry, (args[0], args[1], n))
            return
        # Only the strided operands go through a buffer (see _block_operand).
        x_buffer = np.empty(0 if x_direct else BUFFER, numpy_type)
        y_buffer = np.empty(0 if y_direct else BUFFER, numpy_type)
        for start in range(0, n, BUFFER):
            count = min(BUFFER, n - start)
            x_at = _block_operand(args[0], steps[0], x_direct, x_buffer, start, count)
            y_at = _block_operand(args[1], steps[1], y_direct, y_buffer, start, 0)
            call_void_at(entry, (x_at, y_at, count))
            if not y_direct:
                for i in range(count):
                    store(args[1], (start + i) * steps[1], y_buffer[i])
        keep_alive(x_buffer, y_buffer)

    return loop


def _call_entry(entry: Any, a: Any, b: Any, z: Any, n: Any, state: Any) -> Any:
    """``entry(a, b, z, n)`` for a ``state`` of None, else the new state ``entry(..., state)``."""
    raise NotImplementedError("_call_entry is only callable from numba-compiled code")


@overload(_call_entry, jit_options=WITHOUT_ENTRIES)
def _overload_call_entry(entry, a, b, z, n, state):  # type: ignore[no-untyped-def]
    if isinstance(state, types.NoneType):

        def stateless(entry, a, b, z, n, state):  # type: ignore[no-untyped-def]
            call_void_at(entry, (a, b, z, n))
            return state

        return stateless
    return lambda entry, a, b, z, n, state: call_int64_at(entry, (a, b, z, n, state))


def binary_address_loop(entry: Any, args: Any, dims: Any, steps: Any, like: Any, state: Any) -> Any:
    """The inner loop ``z = f(a, b)`` around the block entry at ``entry``; returns the last state.

    numba code only, as :func:`unary_address_loop`, for an entry
    ``entry(a, b, z, n)`` (a ``state`` of None) or ``state = entry(a, b, z,
    n, state)``, which carries a state from one call to the next in one
    inner-loop call (the float64 gradient's IEEE flags: read once per call,
    kernels/cpu/grad_flags.py). A first operand of stride 0 (a broadcast value:
    the gradient of a sum) is copied once into a buffer that the entry reads
    again for every ``BUFFER`` elements of ``b``: the same code as for an
    array ``a``, so the same bits (nan payloads included).
    """
    raise NotImplementedError("binary_address_loop is only callable from numba-compiled code")


@overload(binary_address_loop, jit_options=WITHOUT_ENTRIES)
def _overload_binary_address_loop(entry, args, dims, steps, like, state):  # type: ignore[no-untyped-def]
    dtype = numpy_support.as_dtype(like)
    load, store = _ACCESS[dtype]
    itemsize = dtype.itemsize
    numpy_type = dtype.type

    def loop(entry, args, dims, steps, like, state):  # type: ignore[no-untyped-def]
        n = dims[0]
        z_at = pointer_address(args[2])
        size = n * itemsize
        a_direct = steps[0] == itemsize
        if a_direct and _overlaps_elsewhere(pointer_address(args[0]), z_at, size):
            a_direct = False  # the buffered path (see _overlaps_elsewhere)
        b_direct = steps[1] == itemsize
        if b_direct and _overlaps_elsewhere(pointer_address(args[1]), z_at, size):
            b_direct = False
        z_direct = steps[2] == itemsize
        if a_direct and b_direct and z_direct:
            return _call_entry(entry, args[0], args[1], args[2], n, state)
        # Only the strided operands go through a buffer (see _block_operand); a
        # broadcast a (stride 0: the gradient of a sum) fills its buffer once.
        a_once = steps[0] == 0 and n > 0
        if a_once:
            a_buffer = np.full(min(n, BUFFER), load(args[0], 0), numpy_type)
        else:
            a_buffer = np.empty(0 if a_direct else BUFFER, numpy_type)
        b_buffer = np.empty(0 if b_direct else BUFFER, numpy_type)
        z_buffer = np.empty(0 if z_direct else BUFFER, numpy_type)
        for start in range(0, n, BUFFER):
            count = min(BUFFER, n - start)
            gathered = 0 if a_once else count
            a_at = _block_operand(args[0], steps[0], a_direct, a_buffer, start, gathered)
            b_at = _block_operand(args[1], steps[1], b_direct, b_buffer, start, count)
            z_at_block = _block_operand(args[2], steps[2], z_direct, z_buffer, start, 0)
            state = _call_entry(entry, a_at, b_at, z_at_block, count, state)
            if not z_direct:
                for i in range(count):
                    store(args[2], (start + i) * steps[2], z_buffer[i])
        keep_alive(a_buffer, b_buffer)
        keep_alive(z_buffer, z_buffer)
        return state

    return loop


def ufunc_from_loops(name: str, doc: str, nin: int, loops: dict[np.dtype, Any]) -> np.ufunc:
    """A numpy ufunc with one output from compiled inner loops and their block entries, per dtype.

    Parameters
    ----------
    name, doc : str
        The ufunc's ``__name__`` and ``__doc__``.
    nin : {1, 2}
        The number of inputs.
    loops : dict
        ``{dtype: (loop, entry)}``: ``loop`` a compiled ``numba.cfunc`` of
        numpy's inner-loop signature (:data:`LOOP_SIGNATURE`), ``entry`` the
        compiled block entry it calls, whose address numpy hands the loop as
        its ``data``; registered in this order (numpy picks the first that
        fits). The ufunc keeps both alive.

    Returns
    -------
    numpy.ufunc
    """
    if nin not in (1, 2):
        raise ValueError(f"nin must be 1 or 2, got {nin!r}")
    from numba.np.ufunc import _internal, ufuncbuilder  # type: ignore[attr-defined]

    pointers = [loop.address for loop, _ in loops.values()]
    entries = [entry.address for _, entry in loops.values()]
    type_numbers = [[dtype.num] * (nin + 1) for dtype in loops]
    # NOTE: numba's own ufunc builder makes its ufuncs through this call
    # (numba.np.ufunc.ufuncbuilder.UFuncBuilder.build_ufunc); a numba that
    # moved it fails here, at the first use of the kernels, and in the tests.
    ufunc: np.ufunc = _internal.fromfunc(
        name,
        doc,
        pointers,
        type_numbers,
        nin,
        1,
        entries,
        [compiled for pair in loops.values() for compiled in pair],
        ufuncbuilder.parse_identity(None),
    )
    return ufunc
