"""XLA FFI handlers for the CPU kernels, as numba ``cfunc``s: cbrtgrad inside ``jax.jit``.

An XLA FFI handler is a C function ``XLA_FFI_Error* handler(XLA_FFI_CallFrame*)``
that XLA calls with its buffers (``xla/ffi/api/c_api.h``, shipped with jaxlib
under ``jax.ffi.include_dir()``). The C API is a plain C ABI of structs, so a
numba ``cfunc`` can be that function: it reads the call frame with the
offsets below (x86-64 and ARM64 are both LP64: 8-byte pointers and
``size_t``, 4-byte enums padded to 8), and runs the ufuncs' block entries on
the buffers in place, linked by name (:mod:`cbrtgrad.kernels.handlers.linked_entries`),
so the bits are the ufuncs' and the ``prange`` loops'. Nothing is compiled by a C compiler and
nothing of jax is imported here: :mod:`cbrtgrad.jax` registers the handlers'
addresses with ``jax.ffi.register_ffi_target``; they are compiled, or loaded
from the kernel cache, on first use, like every other kernel.

What a handler does (one per kernel, dtype and threading):

* A metadata query (XLA asks a handler which FFI version it was built for
  through an extension of the call frame) is answered as the C++ API's
  ``PopulateMetadata`` answers it: version ``XLA_FFI_API_MAJOR.MINOR`` of the
  headers these offsets are from, no traits.
* Any stage but ``EXECUTE`` does nothing (the handlers keep no state).
* Otherwise it checks the buffers (count, dtype, element counts) and, on a
  mismatch, returns an ``INVALID_ARGUMENT`` error made by the API's own
  ``XLA_FFI_Error_Create``: :mod:`cbrtgrad.jax` never sends one, but an error
  is better than writing past a buffer.
* It runs with subnormals kept (:mod:`cbrtgrad.kernels.cpu.denormals`): XLA's
  threads flush them, and the kernels' results for subnormal operands and
  results would otherwise be wrong. The threaded handlers set the mode in
  every block (a worker thread may have been started by a flushing thread),
  and every thread gets its mode back when its work is done.

The threaded handlers are ``prange`` loops over blocks of ``PARALLEL_BLOCK``
elements, as :mod:`cbrtgrad.kernels.cpu.prange_loops`; :mod:`cbrtgrad.jax` picks
them only for arrays of at least ``CBRTGRAD_JAX_PARALLEL_MIN`` elements (by
default never: inside ``jax.jit`` numba's threads compete with XLA's own
thread pool, docs/jax.md has the figures).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from ...build import compile as _compile
from ..cpu import lazy
from ..cpu.denormals import keep_subnormals, restore_mode
from ..cpu.prange_loops import PARALLEL_BLOCK
from ..cpu.ufuncs import run_forward_entry, run_grad_entry, ufunc_loop_shape
from .linked_entries import flags_now, forward_entry_of, grad_entry_of, link_entry

# -- the C API's layout (c_api.h, XLA FFI API 0.3) -----------------------------------

#: The FFI API version the layout below is read from (``XLA_FFI_API_MAJOR/MINOR``).
API_VERSION = (0, 3)
_EXTENSION_METADATA = 1  # XLA_FFI_Extension_Metadata
_STAGE_EXECUTE = 3  # XLA_FFI_ExecutionStage_EXECUTE
_INVALID_ARGUMENT = 3  # XLA_FFI_Error_Code_INVALID_ARGUMENT
#: XLA_FFI_DataType codes of the dtypes the handlers take.
DATA_TYPES = {"float32": 11, "float64": 12}

# XLA_FFI_CallFrame: struct_size, extension_start, api, ctx, stage, args, rets, ...
_FRAME_EXTENSION, _FRAME_API, _FRAME_STAGE, _FRAME_ARGS, _FRAME_RETS = 8, 16, 32, 40, 80
# XLA_FFI_Args / XLA_FFI_Rets: struct_size, extension_start, size, types, args
_LIST_SIZE, _LIST_ITEMS = 16, 32
# XLA_FFI_Buffer: struct_size, extension_start, dtype, data, rank, dims
_BUFFER_DTYPE, _BUFFER_DATA, _BUFFER_RANK, _BUFFER_DIMS = 16, 24, 32, 40
# XLA_FFI_Extension_Base: struct_size, type, next; XLA_FFI_Metadata_Extension adds metadata
_EXTENSION_TYPE, _EXTENSION_METADATA_POINTER = 8, 24
# XLA_FFI_Metadata: struct_size, api_version {struct_size, extension_start, major,
# minor}, traits, state_type_id
_META_VERSION_SIZE, _META_VERSION_EXT, _META_MAJOR, _META_MINOR = 8, 16, 24, 28
_META_TRAITS, _META_STATE = 32, 40
_API_VERSION_STRUCT_SIZE = 24  # XLA_FFI_Api_Version_STRUCT_SIZE
# XLA_FFI_Api: struct_size, extension_start, api_version (24 bytes), internal_api,
# then the functions, XLA_FFI_Error_Create first.
_API_ERROR_CREATE = 48
_ERROR_ARGS_STRUCT_SIZE = 28  # XLA_FFI_Error_Create_Args_STRUCT_SIZE

_MESSAGE = (
    "cbrtgrad: an XLA FFI handler got buffers of another count, dtype or size than "
    "its kernel takes (cbrtgrad.jax sends only matching ones)"
)


@intrinsic
def _load(typingctx, address, width):  # type: ignore[no-untyped-def]
    # The integer of ``width`` bits (a literal) at an address (an int64).
    bits = width.literal_value if isinstance(width, types.IntegerLiteral) else None
    if not isinstance(address, types.Integer) or bits not in (32, 64):
        return None

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        pointer = builder.inttoptr(args[0], ir.IntType(bits).as_pointer())
        value = builder.load(pointer)
        return builder.sext(value, ir.IntType(64)) if bits == 32 else value

    return types.int64(address, width), codegen


@intrinsic
def _store(typingctx, address, value, width):  # type: ignore[no-untyped-def]
    # Store the low ``width`` bits (a literal) of ``value`` at an address.
    bits = width.literal_value if isinstance(width, types.IntegerLiteral) else None
    if not isinstance(address, types.Integer) or bits not in (32, 64):
        return None

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        pointer = builder.inttoptr(args[0], ir.IntType(bits).as_pointer())
        stored = args[1]
        if stored.type.width > bits:
            stored = builder.trunc(stored, ir.IntType(bits))
        builder.store(stored, pointer)
        return context.get_dummy_value()

    return types.none(address, value, width), codegen


@intrinsic
def _pointer(typingctx, address, like):  # type: ignore[no-untyped-def]
    # A pointer to elements of ``like``'s type at an address, for numba.carray.
    if not isinstance(address, types.Integer) or not isinstance(like, types.Float):
        return None
    pointer = types.CPointer(like)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        return builder.inttoptr(args[0], context.get_value_type(pointer))

    return pointer(address, like), codegen


@intrinsic
def _error(typingctx, frame):  # type: ignore[no-untyped-def]
    # api->XLA_FFI_Error_Create({size, NULL, message, INVALID_ARGUMENT}), as an int64.
    if not isinstance(frame, types.Integer):
        return None

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        i8p = ir.IntType(8).as_pointer()
        i64 = ir.IntType(64)
        api = builder.load(
            builder.inttoptr(builder.add(args[0], ir.Constant(i64, _FRAME_API)), i64.as_pointer())
        )
        slot = builder.add(api, ir.Constant(i64, _API_ERROR_CREATE))
        create_type = ir.FunctionType(i8p, [i8p])
        create = builder.load(builder.inttoptr(slot, create_type.as_pointer().as_pointer()))
        request = builder.alloca(ir.ArrayType(i64, 4))
        words = builder.bitcast(request, i64.as_pointer())
        message = context.insert_const_string(builder.module, _MESSAGE)
        builder.store(ir.Constant(i64, _ERROR_ARGS_STRUCT_SIZE), words)
        builder.store(ir.Constant(i64, 0), builder.gep(words, [ir.Constant(i64, 1)]))
        builder.store(builder.ptrtoint(message, i64), builder.gep(words, [ir.Constant(i64, 2)]))
        builder.store(
            ir.Constant(i64, _INVALID_ARGUMENT), builder.gep(words, [ir.Constant(i64, 3)])
        )
        error = builder.call(create, [builder.bitcast(request, i8p)])
        return builder.ptrtoint(error, i64)

    return types.int64(frame), codegen


@numba.njit(**_compile.SCALAR_OPTIONS)
def _metadata(frame):  # type: ignore[no-untyped-def]
    # Answers a metadata query (returns True), as the C++ API's PopulateMetadata.
    extension = _load(frame + _FRAME_EXTENSION, 64)
    if extension == 0 or _load(extension + _EXTENSION_TYPE, 32) != _EXTENSION_METADATA:
        return False
    metadata = _load(extension + _EXTENSION_METADATA_POINTER, 64)
    _store(metadata + _META_VERSION_SIZE, _API_VERSION_STRUCT_SIZE, 64)
    _store(metadata + _META_VERSION_EXT, 0, 64)
    _store(metadata + _META_MAJOR, API_VERSION[0], 32)
    _store(metadata + _META_MINOR, API_VERSION[1], 32)
    _store(metadata + _META_TRAITS, 0, 32)
    _store(metadata + _META_STATE, 0, 64)  # XLA_FFI_UNKNOWN_TYPE_ID: no state
    return True


@numba.njit(**_compile.SCALAR_OPTIONS)
def _buffer(frame, which, index):  # type: ignore[no-untyped-def]
    # (data address, element count, dtype code) of argument or result ``index``.
    buffers = _load(frame + which + _LIST_ITEMS, 64)
    buffer = _load(buffers + 8 * index, 64)
    rank = _load(buffer + _BUFFER_RANK, 64)
    dims = _load(buffer + _BUFFER_DIMS, 64)
    n = 1
    for axis in range(rank):
        n *= _load(dims + 8 * axis, 64)
    return _load(buffer + _BUFFER_DATA, 64), n, _load(buffer + _BUFFER_DTYPE, 32)


@numba.njit(**_compile.SCALAR_OPTIONS)
def _count(frame, which):  # type: ignore[no-untyped-def]
    return _load(frame + which + _LIST_SIZE, 64)


# -- the loops: the block functions with subnormals kept --------------------------------


@numba.njit(**_compile.SCALAR_OPTIONS)
def _forward_serial(x, y):  # type: ignore[no-untyped-def]
    old = keep_subnormals()
    run_forward_entry(forward_entry_of(x), x, y)
    restore_mode(old)


@numba.njit(**_compile.SCALAR_OPTIONS)
def _grad_serial(g, y, dx):  # type: ignore[no-untyped-def]
    old = keep_subnormals()
    run_grad_entry(grad_entry_of(y), g, y, dx, flags_now())
    restore_mode(old)


@numba.njit(**{**_compile.CPU_OPTIONS, "parallel": True})
def _forward_threads(x, y):  # type: ignore[no-untyped-def]
    n = x.shape[0]
    blocks = (n + PARALLEL_BLOCK - 1) // PARALLEL_BLOCK
    for block in numba.prange(blocks):
        old = keep_subnormals()
        start = block * PARALLEL_BLOCK
        stop = min(start + PARALLEL_BLOCK, n)
        run_forward_entry(forward_entry_of(x), x[start:stop], y[start:stop])
        restore_mode(old)


@numba.njit(**{**_compile.CPU_OPTIONS, "parallel": True})
def _grad_threads(g, y, dx):  # type: ignore[no-untyped-def]
    n = y.shape[0]
    blocks = (n + PARALLEL_BLOCK - 1) // PARALLEL_BLOCK
    for block in numba.prange(blocks):
        old = keep_subnormals()
        start = block * PARALLEL_BLOCK
        stop = min(start + PARALLEL_BLOCK, n)
        run_grad_entry(grad_entry_of(y), g[start:stop], y[start:stop], dx[start:stop], flags_now())
        restore_mode(old)


@numba.njit(**_compile.SCALAR_OPTIONS)
def _forward(frame, like, code, loop):  # type: ignore[no-untyped-def]
    # ``like`` (a zero of the dtype) and ``code`` (its XLA_FFI_DataType) pick
    # the dtype, ``loop`` the threading.
    if _metadata(frame):
        return 0
    if _load(frame + _FRAME_STAGE, 32) != _STAGE_EXECUTE:
        return 0
    if _count(frame, _FRAME_ARGS) != 1 or _count(frame, _FRAME_RETS) != 1:
        return _error(frame)
    x_data, n, x_code = _buffer(frame, _FRAME_ARGS, 0)
    y_data, m, y_code = _buffer(frame, _FRAME_RETS, 0)
    if x_code != code or y_code != code or m != n:
        return _error(frame)
    loop(numba.carray(_pointer(x_data, like), n), numba.carray(_pointer(y_data, like), n))
    return 0


@numba.njit(**_compile.SCALAR_OPTIONS)
def _grad(frame, like, code, loop):  # type: ignore[no-untyped-def]
    if _metadata(frame):
        return 0
    if _load(frame + _FRAME_STAGE, 32) != _STAGE_EXECUTE:
        return 0
    if _count(frame, _FRAME_ARGS) != 2 or _count(frame, _FRAME_RETS) != 1:
        return _error(frame)
    g_data, k, g_code = _buffer(frame, _FRAME_ARGS, 0)
    y_data, n, y_code = _buffer(frame, _FRAME_ARGS, 1)
    dx_data, m, dx_code = _buffer(frame, _FRAME_RETS, 0)
    if g_code != code or y_code != code or dx_code != code or k != n or m != n:
        return _error(frame)
    g = numba.carray(_pointer(g_data, like), n)
    y = numba.carray(_pointer(y_data, like), n)
    loop(g, y, numba.carray(_pointer(dx_data, like), n))
    return 0


# NOTE: one module-level function per handler (no closures), so that each is
# cached on its own (_compile.compile_cfunc); the dtype is a typed zero and
# the loop a dispatcher, both constants of the handler.
_F32, _F64 = DATA_TYPES["float32"], DATA_TYPES["float64"]


def forward_f32(frame):  # type: ignore[no-untyped-def]
    return _forward(frame, np.float32(0), _F32, _forward_serial)


def forward_f64(frame):  # type: ignore[no-untyped-def]
    return _forward(frame, np.float64(0), _F64, _forward_serial)


def forward_f32_threads(frame):  # type: ignore[no-untyped-def]
    return _forward(frame, np.float32(0), _F32, _forward_threads)


def forward_f64_threads(frame):  # type: ignore[no-untyped-def]
    return _forward(frame, np.float64(0), _F64, _forward_threads)


def grad_f32(frame):  # type: ignore[no-untyped-def]
    return _grad(frame, np.float32(0), _F32, _grad_serial)


def grad_f64(frame):  # type: ignore[no-untyped-def]
    return _grad(frame, np.float64(0), _F64, _grad_serial)


def grad_f32_threads(frame):  # type: ignore[no-untyped-def]
    return _grad(frame, np.float32(0), _F32, _grad_threads)


def grad_f64_threads(frame):  # type: ignore[no-untyped-def]
    return _grad(frame, np.float64(0), _F64, _grad_threads)


#: The handlers by (kernel, dtype, threaded).
HANDLERS: dict[tuple[str, str, bool], Any] = {
    ("forward", "float32", False): forward_f32,
    ("forward", "float64", False): forward_f64,
    ("forward", "float32", True): forward_f32_threads,
    ("forward", "float64", True): forward_f64_threads,
    ("grad", "float32", False): grad_f32,
    ("grad", "float64", False): grad_f64,
    ("grad", "float32", True): grad_f32_threads,
    ("grad", "float64", True): grad_f64_threads,
}

#: ``XLA_FFI_Error* handler(XLA_FFI_CallFrame*)``, both pointers as integers.
SIGNATURE = types.int64(types.int64)


def handler(kernel: str, dtype: Any, threaded: bool) -> Any:
    """One XLA FFI handler, compiled (or loaded from the kernel cache) on first use.

    Parameters
    ----------
    kernel : str
        ``"forward"`` (one argument ``x``, one result ``y``) or ``"grad"``
        (arguments ``g`` and ``y`` of one size, result ``dx``).
    dtype : dtype
        float32 or float64: the dtype of every buffer.
    threaded : bool
        Whether the handler runs its blocks on numba's threads (``prange``).

    Returns
    -------
    numba.core.ccallback.CFunc
        Its ``address`` is the C function XLA calls.

    Examples
    --------
    >>> handler("forward", "float32", False).address > 0
    True
    """
    dt = lazy.dtype_name(dtype)
    key = (kernel, dt, bool(threaded))
    if key not in HANDLERS:
        raise ValueError(f"cbrtgrad: no XLA FFI handler for {key}")
    if threaded:
        # NOTE: numba starts its thread pool, and makes the pool's symbols
        # (allocate_sched, ...) known to LLVM, when it compiles a prange loop
        # or loads a cached njit one, but not when it loads a cached cfunc
        # holding one: without this, loading fails with "LLVM ERROR: Symbol
        # not found: allocate_sched" (and the process aborts).
        from numba.np.ufunc.parallel import _launch_threads

        _launch_threads()
    # The ufunc's SIMD shape: the handler's vector code is the ufunc's block entry.
    shape = ufunc_loop_shape(dt, kernel)
    suffix = " threads" if threaded else ""
    tag = dt + suffix.replace(" ", "_")

    def build() -> Any:
        link_entry(kernel, dt)  # before the handler that names it is compiled or loaded
        return _compile.compile_cfunc(
            HANDLERS[key], SIGNATURE, shape, f"XLA FFI {kernel} {dt}{suffix}", tag
        )

    return lazy.once(f"xla_ffi.{kernel}.{dt}{suffix.replace(' ', '.')}", build)
