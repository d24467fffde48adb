"""The numba types :mod:`cbrtgrad.numba`'s functions take, and the TypingErrors that say so.

Each overload asks for the one float kind of its scalar or array arguments
(:func:`scalar_kind`, :func:`array_kind`); anything else is a
``TypingError`` naming the function, what it takes and what it got, with a
hint where one helps (an integer to convert, an array to pass to the
``_into`` forms).
"""

from __future__ import annotations

from typing import Any

from numba import types
from numba.core.errors import TypingError

#: What a scalar argument may be, for the error messages.
SCALAR_TYPES = "a float32 or float64 scalar"


def float_kind(numba_type: Any) -> str | None:
    """``"float32"`` or ``"float64"`` for those numba scalar types, else None."""
    if numba_type == types.float32:
        return "float32"
    if numba_type == types.float64:
        return "float64"
    return None


def scalar_kind(function: str, **arguments: Any) -> str:
    """The one float kind of scalar ``arguments``, or a TypingError naming ``function``."""
    kinds = {float_kind(t) for t in arguments.values()}
    if len(kinds) == 1 and None not in kinds:
        return kinds.pop()  # type: ignore[return-value]
    got = ", ".join(f"{name}: {t}" for name, t in arguments.items())
    takes = SCALAR_TYPES if len(arguments) == 1 else "float32 or float64 scalars of one type"
    hint = ""
    if any(isinstance(t, types.Integer | types.Boolean) for t in arguments.values()):
        hint = " Integers are not converted: write np.float64(n) or np.float32(n)."
    elif any(isinstance(t, types.Array) for t in arguments.values()):
        hint = " Over arrays, call cbrtgrad.numba.cbrt_into or cbrt_grad_into."
    elif len(kinds - {None}) > 1:
        hint = " Convert one of them: np.float64(v) or np.float32(v)."
    raise TypingError(f"{function} takes {takes}; got {got}.{hint}")


def array_kind(function: str, **arguments: Any) -> str:
    """The one float dtype of array ``arguments`` (the last one written), or a TypingError."""
    values = list(arguments.values())
    kinds = {float_kind(t.dtype) if isinstance(t, types.Array) else None for t in values}
    ndims = {t.ndim if isinstance(t, types.Array) else None for t in values}
    out = values[-1]
    writable = isinstance(out, types.Array) and out.mutable
    if len(kinds) == 1 and None not in kinds and len(ndims) == 1 and writable:
        return kinds.pop()  # type: ignore[return-value]
    got = ", ".join(f"{name}: {t}" for name, t in arguments.items())
    raise TypingError(
        f"{function} takes float32 or float64 arrays of one dtype and one number of "
        f"dimensions, the last one writable; got {got}."
    )
