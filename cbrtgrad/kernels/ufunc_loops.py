"""numpy ufuncs whose inner loops are cbrtgrad's own block functions.

``numba.vectorize`` builds a ufunc whose inner loop calls the scalar kernel
once per element, so a kernel cannot look at a block of results before it
returns. The correctly rounded kernels need that: their branch-free fast paths
leave a few lanes undecided (about one in 10^7 for the float64 cube root, one
in 2^28 for the float32 gradient), and a second pass over just those lanes
(:func:`cbrtgrad.kernels.blocks.forward_block_f64`,
:func:`cbrtgrad.kernels.grad_blocks.grad_block`) keeps the vector loop free of
branches. This module compiles such a block function into a ufunc inner loop
(a ``numba.cfunc`` with numpy's loop signature) and makes the ufunc from the
loops, as numba's own ufunc builder does (``numba.np.ufunc._internal.fromfunc``).

The loop hands contiguous operands to the block function as they are (and a
broadcast first operand of a binary ufunc as a buffer of its value); strided
ones (any step, negative, zero or unaligned, as numpy may pass) are gathered into a
buffer of ``BUFFER`` elements, run through the same block function and
scattered back, so every layout gives the same bits.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba import carray, types
from numba.extending import intrinsic, overload
from numba.np import numpy_support

from .. import _compile

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


def unary_block_loop(block: Any, args: Any, dims: Any, steps: Any, like: Any) -> None:
    """The inner loop ``y = f(x)`` around ``block(x, y)``, for elements of ``like``'s type.

    numba code only: a ufunc inner loop (numpy's ``(args, dims, steps, data)``)
    calls it with its block function and a scalar of its dtype
    (:func:`cbrtgrad.kernels.cpu_ufuncs.forward_loop_f64` and the like).
    """
    raise NotImplementedError("unary_block_loop is only callable from numba-compiled code")


@overload(unary_block_loop, inline="always")
def _overload_unary_block_loop(block, args, dims, steps, like):  # type: ignore[no-untyped-def]
    dtype = numpy_support.as_dtype(like)
    load, store = _ACCESS[dtype]
    itemsize = dtype.itemsize
    numpy_type = dtype.type

    def loop(block, args, dims, steps, like):  # type: ignore[no-untyped-def]
        n = dims[0]
        if steps[0] == itemsize and steps[1] == itemsize:
            x, y = pointer_address(args[0]), pointer_address(args[1])
            if not _overlaps_elsewhere(x, y, n * itemsize):
                block(carray(args[0], (n,), numpy_type), carray(args[1], (n,), numpy_type))
                return
        x_buffer = np.empty(BUFFER, numpy_type)
        y_buffer = np.empty(BUFFER, numpy_type)
        for start in range(0, n, BUFFER):
            count = min(BUFFER, n - start)
            for i in range(count):
                x_buffer[i] = load(args[0], (start + i) * steps[0])
            block(x_buffer[:count], y_buffer[:count])
            for i in range(count):
                store(args[1], (start + i) * steps[1], y_buffer[i])

    return loop


def binary_block_loop(
    block: Any, args: Any, dims: Any, steps: Any, like: Any, block_at: Any = None
) -> None:
    """The inner loop ``z = f(a, b)`` around ``block(a, b, z)``, for elements of ``like``'s type.

    numba code only, as :func:`unary_block_loop`. A first operand of stride 0
    (a broadcast value: the gradient of a sum) is copied once into a buffer
    that the contiguous block function reads again for every ``BUFFER``
    elements of ``b``: the block is the same code as for an array ``a``, so
    the same bits (nan payloads included). ``block_at``, where given, is
    ``block`` over contiguous operands given by address, ``block_at(a, b, z, n)``
    (:func:`binary_state_loop`).
    """
    raise NotImplementedError("binary_block_loop is only callable from numba-compiled code")


@overload(binary_block_loop, inline="always")
def _overload_binary_block_loop(block, args, dims, steps, like, block_at=None):  # type: ignore[no-untyped-def]
    def loop(block, args, dims, steps, like, block_at=None):  # type: ignore[no-untyped-def]
        binary_state_loop(block, args, dims, steps, like, None, block_at)

    return loop


def _run_block(block: Any, a: Any, b: Any, z: Any, state: Any) -> Any:
    """``block(a, b, z)`` for a ``state`` of None, else ``block(a, b, z, state)``, its new state."""
    raise NotImplementedError("_run_block is only callable from numba-compiled code")


@overload(_run_block, inline="always")
def _overload_run_block(block, a, b, z, state):  # type: ignore[no-untyped-def]
    if isinstance(state, types.NoneType):

        def stateless(block, a, b, z, state):  # type: ignore[no-untyped-def]
            block(a, b, z)
            return state

        return stateless
    return lambda block, a, b, z, state: block(a, b, z, state)


def _run_block_at(block_at: Any, args: Any, n: Any, state: Any) -> Any:
    """:func:`_run_block` for a block function over ``n`` elements at ``args``' addresses."""
    raise NotImplementedError("_run_block_at is only callable from numba-compiled code")


@overload(_run_block_at, inline="always")
def _overload_run_block_at(block_at, args, n, state):  # type: ignore[no-untyped-def]
    if isinstance(state, types.NoneType):

        def stateless(block_at, args, n, state):  # type: ignore[no-untyped-def]
            block_at(args[0], args[1], args[2], n)
            return state

        return stateless
    return lambda block_at, args, n, state: block_at(args[0], args[1], args[2], n, state)


def binary_state_loop(
    block: Any, args: Any, dims: Any, steps: Any, like: Any, state: Any, block_at: Any = None
) -> Any:
    """:func:`binary_block_loop` around ``state = block(a, b, z, state)``; returns the last state.

    For a block function that carries a state from one call to the next in
    one inner-loop call (the float64 gradient's IEEE flags: read once per
    call, kernels/grad_flags.py); a ``state`` of None calls ``block(a, b, z)``.
    ``block_at``, where given, is ``block`` over contiguous operands given by
    address, ``state = block_at(a, b, z, n, state)`` (``block_at(a, b, z, n)``
    for a ``state`` of None), called for them instead (no arrays passed: no
    reference counts, see :func:`cbrtgrad.kernels.grad_blocks.grad_f64_at`).
    """
    raise NotImplementedError("binary_state_loop is only callable from numba-compiled code")


@overload(binary_state_loop, inline="always")
def _overload_binary_state_loop(block, args, dims, steps, like, state, block_at=None):  # type: ignore[no-untyped-def]
    dtype = numpy_support.as_dtype(like)
    load, store = _ACCESS[dtype]
    itemsize = dtype.itemsize
    numpy_type = dtype.type
    by_address = block_at is not None and not isinstance(block_at, (types.NoneType, types.Omitted))

    def loop(block, args, dims, steps, like, state, block_at=None):  # type: ignore[no-untyped-def]
        n = dims[0]
        z_at = pointer_address(args[2])
        size = n * itemsize
        contiguous = steps[1] == itemsize and steps[2] == itemsize
        if contiguous and _overlaps_elsewhere(pointer_address(args[1]), z_at, size):
            contiguous = False  # the buffered path (see _overlaps_elsewhere)
        if contiguous and steps[0] == itemsize:
            if _overlaps_elsewhere(pointer_address(args[0]), z_at, size):
                contiguous = False
        if contiguous and by_address and steps[0] == itemsize:
            return _run_block_at(block_at, args, n, state)
        if contiguous:
            b = carray(args[1], (n,), numpy_type)
            z = carray(args[2], (n,), numpy_type)
            if steps[0] == itemsize:
                return _run_block(block, carray(args[0], (n,), numpy_type), b, z, state)
            if steps[0] == 0:
                value = np.full(min(n, BUFFER), load(args[0], 0), numpy_type)
                for start in range(0, n, BUFFER):
                    stop = min(start + BUFFER, n)
                    state = _run_block(
                        block, value[: stop - start], b[start:stop], z[start:stop], state
                    )
                return state
        a_buffer = np.empty(BUFFER, numpy_type)
        b_buffer = np.empty(BUFFER, numpy_type)
        z_buffer = np.empty(BUFFER, numpy_type)
        for start in range(0, n, BUFFER):
            count = min(BUFFER, n - start)
            for i in range(count):
                a_buffer[i] = load(args[0], (start + i) * steps[0])
                b_buffer[i] = load(args[1], (start + i) * steps[1])
            state = _run_block(block, a_buffer[:count], b_buffer[:count], z_buffer[:count], state)
            for i in range(count):
                store(args[2], (start + i) * steps[2], z_buffer[i])
        return state

    return loop


def ufunc_from_loops(name: str, doc: str, nin: int, loops: dict[np.dtype, Any]) -> np.ufunc:
    """A numpy ufunc with one output from compiled inner loops, one per dtype.

    Parameters
    ----------
    name, doc : str
        The ufunc's ``__name__`` and ``__doc__``.
    nin : {1, 2}
        The number of inputs.
    loops : dict
        ``{dtype: loop}`` with ``loop`` a compiled ``numba.cfunc`` of numpy's
        inner-loop signature (:data:`LOOP_SIGNATURE`), registered in this
        order (numpy picks the first that fits); the ufunc keeps them alive.

    Returns
    -------
    numpy.ufunc
    """
    if nin not in (1, 2):
        raise ValueError(f"nin must be 1 or 2, got {nin!r}")
    from numba.np.ufunc import _internal, ufuncbuilder  # type: ignore[attr-defined]

    pointers = [loop.address for loop in loops.values()]
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
        [None] * len(pointers),
        list(loops.values()),
        ufuncbuilder.parse_identity(None),
    )
    return ufunc
