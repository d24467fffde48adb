"""Python's operators on a Tensor: arithmetic, in-place arithmetic and comparisons.

A mixin of :class:`~cbrtgrad.Tensor`. Each arithmetic operator runs the op
function that the op table (op_table.py) holds for its numpy ufunc, so that
``x + y``, ``np.add(x, y)`` and the engine's own recording take one path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Self

import numpy as np

from .op_table import UFUNC_OPS

_UFUNC = UFUNC_OPS


class Operators:
    """The operators of :class:`~cbrtgrad.Tensor` (which holds ``_data``, ``_version``, ...)."""

    __slots__ = ()

    _data: Any
    numpy: Callable[[], np.ndarray]

    def _inplace(self, op: Any, other: Any) -> Self:
        raise NotImplementedError  # Tensor's: it rebinds the data and the node

    def __bool__(self) -> bool:
        # As an ndarray: the value of one element, else an error (never
        # Python's default through __len__, which says True for [0.0]).
        if self._data.size != 1:
            raise ValueError(
                f"cbrtgrad: the truth value of a Tensor of {self._data.size} elements is "
                "ambiguous; use .numpy().any() or .numpy().all()"
            )
        return bool(self.numpy().reshape(()))

    # Comparisons are element-wise, as numpy's, and give a plain bool ndarray
    # (not differentiable). A Tensor stays hashable by identity, as the
    # backward's dicts need (and as a PyTorch tensor is).
    def __eq__(self, other: object) -> Any:  # type: ignore[override]
        return np.equal(np.asarray(self._data), _compared(other))

    def __ne__(self, other: object) -> Any:  # type: ignore[override]
        return np.not_equal(np.asarray(self._data), _compared(other))

    def __lt__(self, other: Any) -> Any:
        return np.less(np.asarray(self._data), _compared(other))

    def __le__(self, other: Any) -> Any:
        return np.less_equal(np.asarray(self._data), _compared(other))

    def __gt__(self, other: Any) -> Any:
        return np.greater(np.asarray(self._data), _compared(other))

    def __ge__(self, other: Any) -> Any:
        return np.greater_equal(np.asarray(self._data), _compared(other))

    __hash__ = object.__hash__

    def __add__(self, other: Any) -> Self:
        return _UFUNC[np.add](self, other)

    def __radd__(self, other: Any) -> Self:
        return _UFUNC[np.add](other, self)

    def __sub__(self, other: Any) -> Self:
        return _UFUNC[np.subtract](self, other)

    def __rsub__(self, other: Any) -> Self:
        return _UFUNC[np.subtract](other, self)

    def __mul__(self, other: Any) -> Self:
        return _UFUNC[np.multiply](self, other)

    def __rmul__(self, other: Any) -> Self:
        return _UFUNC[np.multiply](other, self)

    def __truediv__(self, other: Any) -> Self:
        return _UFUNC[np.true_divide](self, other)

    def __rtruediv__(self, other: Any) -> Self:
        return _UFUNC[np.true_divide](other, self)

    def __neg__(self) -> Self:
        return _UFUNC[np.negative](self)

    def __pos__(self) -> Self:
        return self

    def __pow__(self, exponent: Any) -> Self:
        return _UFUNC[np.power](self, exponent)

    def __rpow__(self, base: Any) -> Self:
        raise TypeError(
            f"cbrtgrad: only Tensor ** scalar is supported; got {type(base).__name__} ** Tensor"
        )

    def __iadd__(self, other: Any) -> Self:
        return self._inplace(_UFUNC[np.add], other)

    def __isub__(self, other: Any) -> Self:
        return self._inplace(_UFUNC[np.subtract], other)

    def __imul__(self, other: Any) -> Self:
        return self._inplace(_UFUNC[np.multiply], other)

    def __itruediv__(self, other: Any) -> Self:
        return self._inplace(_UFUNC[np.true_divide], other)

    def __ipow__(self, exponent: Any) -> Self:
        return self._inplace(_UFUNC[np.power], exponent)


def _compared(other: Any) -> Any:
    return np.asarray(other._data) if isinstance(other, Operators) else other
