"""The methods of :func:`cbrtgrad.backends.device_math.namespace`'s objects: argument
checks and numpy's dtype and shape rules, over each library's hooks.

Subclassed per library (``_device_math_numba``, ``_device_math_libraries``);
the module docstring of :mod:`cbrtgrad.backends.device_math` says what each
method computes and how exactly.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._array_kinds import device_dtype
from ._device_math_args import (
    axes_arg,
    check_array,
    check_devices,
    describe,
    float_dtype,
    is_scalar,
    shape_arg,
)
from ._device_math_hooks import Hooks

_F32 = np.dtype(np.float32)


class DeviceMath(Hooks):
    """The engine's array math for one library's device arrays (see :func:`namespace`).

    Subclasses implement the underscored hooks; the public methods check the
    arguments and apply numpy's dtype and shape rules.
    """

    library = ""

    # -- checks ---------------------------------------------------------------

    def _array(self, value: Any, name: str) -> Any:
        """``value``, checked to be a float device array of this library."""
        check_array(value, name, self.library)
        return self._adopt(value)

    def _operand(self, value: Any, name: str) -> Any:
        """A device array of this library, or a real scalar (Python or numpy)."""
        return value if is_scalar(value) else self._array(value, name)

    # -- element-wise ---------------------------------------------------------

    def _binary(self, op: str, a: Any, b: Any) -> Any:
        a, b = self._operand(a, "a"), self._operand(b, "b")
        if is_scalar(a) and is_scalar(b):
            raise TypeError(f"cbrtgrad: {op} takes at least one device array, got two scalars")
        check_devices({n: self._device(x) for n, x in (("a", a), ("b", b)) if not is_scalar(x)})
        # NOTE: numpy's own rules: an array's dtype is strong, a Python scalar
        # weak, a numpy scalar strong (NEP 50).
        dtype = np.result_type(*(x if is_scalar(x) else device_dtype(x) for x in (a, b)))
        shapes = [() if is_scalar(x) else tuple(x.shape) for x in (a, b)]
        try:
            shape = np.broadcast_shapes(*shapes)
        except ValueError:
            raise ValueError(
                f"cbrtgrad: a of shape {shapes[0]} and b of shape {shapes[1]} do not broadcast"
            ) from None
        with np.errstate(over="ignore"):  # a large Python float is inf in float16, as in numpy
            a, b = (dtype.type(x) if is_scalar(x) else x for x in (a, b))
        return self._map2(op, a, b, dtype, shape)

    def add(self, a: Any, b: Any) -> Any:
        """``a + b``: device arrays of this library or real scalars, broadcast.

        Examples
        --------
        >>> import numpy as np
        >>> from numba import cuda
        >>> from cbrtgrad.backends.device_math import namespace
        >>> x = cuda.to_device(np.array([1.0, 2.0], np.float16))
        >>> namespace(x).to_host(namespace(x).add(x, 2**-11))  # 1 + 2**-11: a tie, to even
        array([1., 2.], dtype=float16)
        """
        return self._binary("add", a, b)

    def subtract(self, a: Any, b: Any) -> Any:
        """``a - b`` (see :meth:`add`).

        Examples
        --------
        >>> import numpy as np
        >>> from numba import cuda
        >>> from cbrtgrad.backends.device_math import namespace
        >>> x = cuda.to_device(np.array([1.0, 2.0]))
        >>> namespace(x).to_host(namespace(x).subtract(1.0, x))
        array([ 0., -1.])
        """
        return self._binary("subtract", a, b)

    def multiply(self, a: Any, b: Any) -> Any:
        """``a * b`` (see :meth:`add`).

        Examples
        --------
        >>> import numpy as np
        >>> from numba import cuda
        >>> from cbrtgrad.backends.device_math import namespace
        >>> x = cuda.to_device(np.array([1.0, 2.0], np.float32))
        >>> namespace(x).multiply(x, np.float64(3.0)).dtype  # a numpy scalar is strong
        dtype('float64')
        """
        return self._binary("multiply", a, b)

    def divide(self, a: Any, b: Any) -> Any:
        """``a / b``, IEEE division (see :meth:`add`).

        Examples
        --------
        >>> import numpy as np
        >>> from numba import cuda
        >>> from cbrtgrad.backends.device_math import namespace
        >>> x = cuda.to_device(np.array([1.0, -0.0], np.float32))
        >>> namespace(x).to_host(namespace(x).divide(x, 0.0))
        array([inf, nan], dtype=float32)
        """
        return self._binary("divide", a, b)

    def negative(self, a: Any) -> Any:
        """``-a`` (a sign flip, zeros and nan included).

        Examples
        --------
        >>> import numpy as np
        >>> from numba import cuda
        >>> from cbrtgrad.backends.device_math import namespace
        >>> x = cuda.to_device(np.array([0.0, -2.0], np.float32))
        >>> namespace(x).to_host(namespace(x).negative(x))
        array([-0.,  2.], dtype=float32)
        """
        a = self._array(a, "a")
        dtype = device_dtype(a)
        return self._map1("negative", a, dtype.type(0), dtype)

    def power(self, a: Any, p: Any) -> Any:
        """``a ** p`` for a real scalar ``p``, with the device's ``pow``.

        NOTE: for ``p`` other than 2, 0.5, -1 and 1 (which numpy's float32
        and float64 loops compute as ``x * x``, ``sqrt(x)``, ``1 / x`` and
        ``x``, and so does this), CUDA's ``pow``/``powf`` and numpy's may
        differ in the last bit (neither is correctly rounded). float16 is
        computed with ``powf`` in float32 and rounded once, as numpy's half
        loop does.

        Examples
        --------
        >>> import numpy as np
        >>> from numba import cuda
        >>> from cbrtgrad.backends.device_math import namespace
        >>> x = cuda.to_device(np.array([4.0, 9.0], np.float32))
        >>> namespace(x).to_host(namespace(x).power(x, 0.5))
        array([2., 3.], dtype=float32)
        """
        a = self._array(a, "a")
        if not is_scalar(p):
            raise TypeError(f"cbrtgrad: p must be a real scalar, got {describe(p)}")
        dtype = np.result_type(device_dtype(a), p)
        return self._map1("power", a, dtype.type(p), dtype)

    def astype(self, a: Any, dtype: Any) -> Any:
        """A copy of ``a`` in ``dtype`` (float16, float32 or float64), each value rounded once.

        Examples
        --------
        >>> import numpy as np
        >>> from numba import cuda
        >>> from cbrtgrad.backends.device_math import namespace
        >>> x = cuda.to_device(np.array([1 + 2.0**-11 + 2.0**-40]))  # just above a tie
        >>> namespace(x).to_host(namespace(x).astype(x, np.float16)).view(np.uint16)
        array([15361], dtype=uint16)
        """
        a = self._array(a, "a")
        return self._cast(a, float_dtype(dtype), tuple(a.shape))

    def broadcast_to(self, a: Any, shape: Any) -> Any:
        """``a`` broadcast to ``shape`` as a new C-contiguous array (``a`` itself if it has it).

        Examples
        --------
        >>> import numpy as np
        >>> from numba import cuda
        >>> from cbrtgrad.backends.device_math import namespace
        >>> x = cuda.to_device(np.array([1.0, 2.0]))
        >>> namespace(x).to_host(namespace(x).broadcast_to(x, (2, 2)))
        array([[1., 2.],
               [1., 2.]])
        """
        a = self._array(a, "a")
        shape = shape_arg(shape)
        if tuple(a.shape) == shape:
            return a
        try:
            fits = np.broadcast_shapes(tuple(a.shape), shape) == shape
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(f"cbrtgrad: a of shape {tuple(a.shape)} does not broadcast to {shape}")
        return self._cast(a, device_dtype(a), shape)

    # -- reductions -----------------------------------------------------------

    def _reduce(self, a: Any, axis: Any, keepdims: bool, dtype: np.dtype) -> tuple[Any, int]:
        """``(sum rounded once to dtype, number of elements summed into each)``."""
        shape = tuple(a.shape)
        axes = axes_arg(axis, len(shape))
        count = math.prod(shape[d] for d in axes)
        if keepdims:
            out_shape = tuple(1 if d in axes else n for d, n in enumerate(shape))
        else:
            out_shape = tuple(n for d, n in enumerate(shape) if d not in axes)
        if not axes:  # numpy: a sum over no axis is the array itself
            return self._cast(a, dtype, shape), 1
        if count == 0 or math.prod(out_shape) == 0:  # an empty sum is +0.0
            return self.zeros(out_shape, dtype, a), count
        return self._sum(a, axes, out_shape, dtype), count

    def sum(self, a: Any, axis: Any = None, keepdims: bool = False) -> Any:
        """The sum over ``axis`` (None or a tuple of axes), in ``a``'s dtype.

        float32 and float64 are accumulated in float64, float16 in float32,
        rounded once; the order of the additions is not numpy's, so the last
        bit may differ from ``np.sum``'s.

        Examples
        --------
        >>> import numpy as np
        >>> from numba import cuda
        >>> from cbrtgrad.backends.device_math import namespace
        >>> x = cuda.to_device(np.arange(6.0).reshape(2, 3))
        >>> namespace(x).to_host(namespace(x).sum(x, (0,), keepdims=True))
        array([[3., 5., 7.]])
        """
        a = self._array(a, "a")
        return self._reduce(a, axis, keepdims, device_dtype(a))[0]

    def mean(self, a: Any, axis: Any = None, keepdims: bool = False) -> Any:
        """The mean over ``axis``: :meth:`sum` divided by the count (nan for none).

        As numpy's ``mean`` (and the engine's host code): the sum, rounded to
        ``a``'s dtype (float32 for float16), is divided by the count in
        float64 and the quotient rounded back to that dtype (then, for
        float16, to float16). The quotient is numpy's whenever the sum is.

        Examples
        --------
        >>> import numpy as np
        >>> from numba import cuda
        >>> from cbrtgrad.backends.device_math import namespace
        >>> x = cuda.to_device(np.arange(6.0, dtype=np.float16).reshape(2, 3))
        >>> namespace(x).to_host(namespace(x).mean(x, (1,)))
        array([1., 4.], dtype=float16)
        """
        a = self._array(a, "a")
        dtype = device_dtype(a)
        wide = _F32 if dtype == np.float16 else dtype
        total, count = self._reduce(a, axis, keepdims, wide)
        # NOTE: numpy divides by the count as an np.intp: a float64 division
        # (exact for every count below 2^53, where float32 would round it).
        quotient = self.divide(total, np.float64(count))
        shape = tuple(quotient.shape)
        mean = quotient if wide == np.float64 else self._cast(quotient, wide, shape)
        return mean if wide == dtype else self._cast(mean, dtype, shape)

    def sum_to(self, a: Any, shape: Any) -> Any:
        """Sum ``a`` (broadcast from ``shape``) back to ``shape``; ``a`` itself if it has it.

        Examples
        --------
        >>> import numpy as np
        >>> from numba import cuda
        >>> from cbrtgrad.backends.device_math import namespace
        >>> g = cuda.to_device(np.ones((2, 2, 3), np.float32))
        >>> namespace(g).to_host(namespace(g).sum_to(g, (2, 1)))
        array([[6.],
               [6.]], dtype=float32)
        """
        a = self._array(a, "a")
        shape = shape_arg(shape)
        have = tuple(a.shape)
        if have == shape:
            return a
        lead = len(have) - len(shape)
        if lead < 0 or any(n not in (1, m) for n, m in zip(shape, have[lead:], strict=True)):
            raise ValueError(f"cbrtgrad: a of shape {have} is not broadcast from shape {shape}")
        axes = tuple(range(lead)) + tuple(
            d + lead for d, n in enumerate(shape) if n == 1 and have[d + lead] != 1
        )
        return self.reshape(self.sum(a, axes, keepdims=True), shape)

    # -- shapes, creation, copies ---------------------------------------------

    def reshape(self, a: Any, shape: Any) -> Any:
        """``a`` with ``shape`` (one ``-1`` allowed): a view, as numpy's reshape of a C array.

        Examples
        --------
        >>> import numpy as np
        >>> from numba import cuda
        >>> from cbrtgrad.backends.device_math import namespace
        >>> x = cuda.to_device(np.zeros(6))
        >>> namespace(x).reshape(x, (3, -1)).shape
        (3, 2)
        """
        a = self._array(a, "a")
        shape = list(shape_arg(shape))
        size = math.prod(a.shape)
        if shape.count(-1) == 1:
            rest = math.prod(n for n in shape if n != -1)
            if rest and size % rest == 0:
                shape[shape.index(-1)] = size // rest
        if any(n < 0 for n in shape) or math.prod(shape) != size:
            raise ValueError(
                f"cbrtgrad: cannot reshape a of shape {tuple(a.shape)} to {tuple(shape)}"
            )
        return self._reshape(a, tuple(shape))

    def zeros(self, shape: Any, dtype: Any, like: Any) -> Any:
        """A new array of zeros (+0.0) on ``like``'s library and device.

        Examples
        --------
        >>> import numpy as np
        >>> from numba import cuda
        >>> from cbrtgrad.backends.device_math import namespace
        >>> x = cuda.to_device(np.ones(1))
        >>> namespace(x).to_host(namespace(x).zeros((2,), np.float32, x))
        array([0., 0.], dtype=float32)
        """
        return self.full(shape, 0.0, dtype, like)

    def full(self, shape: Any, value: Any, dtype: Any, like: Any) -> Any:
        """A new array of ``value`` rounded to ``dtype``, on ``like``'s library and device.

        Examples
        --------
        >>> import numpy as np
        >>> from numba import cuda
        >>> from cbrtgrad.backends.device_math import namespace
        >>> x = cuda.to_device(np.ones(1))
        >>> namespace(x).to_host(namespace(x).full((2,), 0.1, np.float16, x))
        array([0.1, 0.1], dtype=float16)
        """
        like = self._array(like, "like")
        if not is_scalar(value):
            raise TypeError(f"cbrtgrad: value must be a real scalar, got {describe(value)}")
        dtype = float_dtype(dtype)
        shape = shape_arg(shape)
        if any(n < 0 for n in shape):
            raise ValueError(f"cbrtgrad: shape must not have negative lengths, got {shape}")
        with np.errstate(over="ignore"):
            rounded = dtype.type(value)
        return self._full(shape, rounded, dtype, like)

    def all_finite(self, a: Any) -> bool:
        """Whether no element of ``a`` is inf or nan (copies one flag to the host).

        Examples
        --------
        >>> import numpy as np
        >>> from numba import cuda
        >>> from cbrtgrad.backends.device_math import namespace
        >>> x = cuda.to_device(np.array([1.0, np.inf]))
        >>> namespace(x).all_finite(x), namespace(x).all_finite(cuda.to_device(np.ones(2)))
        (False, True)
        """
        return self._all_finite(self._array(a, "a"))

    def to_host(self, a: Any) -> np.ndarray:
        """An explicit copy of ``a`` as a numpy array (waits for ``a`` to be computed).

        Examples
        --------
        >>> import numpy as np
        >>> from numba import cuda
        >>> from cbrtgrad.backends.device_math import namespace
        >>> x = cuda.to_device(np.arange(3.0))
        >>> namespace(x).to_host(x)
        array([0., 1., 2.])
        """
        return self._to_host(self._array(a, "a"))

    def from_host(self, array: Any, like: Any) -> Any:
        """An explicit copy of the numpy ``array`` on ``like``'s library and device.

        Examples
        --------
        >>> import numpy as np
        >>> from numba import cuda
        >>> from cbrtgrad.backends.device_math import namespace
        >>> x = cuda.to_device(np.ones(1))
        >>> y = namespace(x).from_host(np.arange(2.0), x)
        >>> type(y) is type(x), namespace(x).to_host(y)
        (True, array([0., 1.]))
        """
        like = self._array(like, "like")
        if not isinstance(array, np.ndarray):
            raise TypeError(f"cbrtgrad: array must be a numpy.ndarray, got {describe(array)}")
        float_dtype(array.dtype, "array's dtype")
        return self._from_host(np.ascontiguousarray(array), like)
