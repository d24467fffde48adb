"""What each library's device math implements (:mod:`cbrtgrad.backends.device_math`).

:class:`~cbrtgrad.backends.device_math.DeviceMath` checks the arguments and
applies numpy's dtype and shape rules; the hooks compute, with arguments
already checked: arrays of the library, C-contiguous, float16/32/64.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np


class Hooks(ABC):
    """The computing half of a library's device math.

    Examples
    --------
    >>> from cbrtgrad.backends._device_math_numba import NumbaMath
    >>> issubclass(NumbaMath, Hooks)
    True
    """

    def _adopt(self, value: Any) -> Any:
        """``value`` as this library's array type (no copy)."""
        return value

    @abstractmethod
    def _device(self, value: Any) -> Any:
        """The device id of an array (``None`` where all are in one context)."""
        raise NotImplementedError

    @abstractmethod
    def _map2(self, op: str, a: Any, b: Any, dtype: np.dtype, shape: tuple[int, ...]) -> Any:
        """``op(a, b)`` in ``dtype``: arrays, or numpy scalars of ``dtype``."""
        raise NotImplementedError

    @abstractmethod
    def _map1(self, op: str, a: Any, p: Any, dtype: np.dtype) -> Any:
        """``-a`` or ``a ** p`` in ``dtype`` (``p`` a numpy scalar of ``dtype``)."""
        raise NotImplementedError

    @abstractmethod
    def _cast(self, a: Any, dtype: np.dtype, shape: tuple[int, ...]) -> Any:
        """A new C-contiguous array: ``a`` broadcast to ``shape``, in ``dtype``."""
        raise NotImplementedError

    @abstractmethod
    def _sum(self, a: Any, axes: tuple[int, ...], shape: tuple[int, ...], dtype: np.dtype) -> Any:
        """The sum over the sorted, non-empty ``axes``, of ``shape``, rounded once to ``dtype``."""
        raise NotImplementedError

    @abstractmethod
    def _reshape(self, a: Any, shape: tuple[int, ...]) -> Any:
        raise NotImplementedError

    @abstractmethod
    def _full(self, shape: tuple[int, ...], value: Any, dtype: np.dtype, like: Any) -> Any:
        raise NotImplementedError

    @abstractmethod
    def _all_finite(self, a: Any) -> bool:
        raise NotImplementedError

    @abstractmethod
    def _to_host(self, a: Any) -> np.ndarray:
        raise NotImplementedError

    @abstractmethod
    def _from_host(self, array: np.ndarray, like: Any) -> Any:
        raise NotImplementedError
