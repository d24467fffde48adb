"""JAX-style transformations: ``grad(f)`` and ``value_and_grad(f)``."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from ..arrays import dtypes as _dtypes
from ..arrays.kinds import is_dask_array
from . import grad_mode
from .array_api import is_standard_array, raw
from .data import refuse_masked
from .graph import grad_of
from .tensor import Tensor


def _integer(value: Any) -> bool:
    # Python and numpy integers, not bools (as JAX takes argnums).
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _argnums(argnums: Any) -> tuple[tuple[int, ...], bool]:
    if _integer(argnums):
        return (int(argnums),), True
    if isinstance(argnums, tuple) and argnums and all(_integer(a) for a in argnums):
        return tuple(int(a) for a in argnums), False
    raise TypeError(
        f"cbrtgrad: argnums must be an int or a non-empty tuple of ints, got {argnums!r}"
    )


def _callable(f: Any) -> None:
    if not callable(f):
        raise TypeError(f"cbrtgrad: grad needs a callable function, got {type(f).__name__}")


def _prepare(arg: Any, index: int) -> tuple[Tensor, bool]:
    """The tensor to differentiate with respect to, and whether to keep a graph."""
    if isinstance(arg, Tensor):
        if arg._requires_grad and grad_mode.grad_enabled():
            return arg, True  # nested inside another transformation: keep the graph
        return Tensor(arg, requires_grad=True), False  # a new leaf sharing arg's counter
    refuse_masked(arg, f"argument {index}")
    array = arg if is_dask_array(arg) or is_standard_array(arg) else np.asarray(arg)
    dtype = _dtypes.dtype_of(array)
    if dtype.kind != "f":
        raise TypeError(
            f"cbrtgrad: grad needs float arguments; argument {index} has dtype {dtype} "
            "(pass e.g. 8.0, not 8)"
        )
    return Tensor(array, requires_grad=True), False


def _value_and_grad(
    f: Callable[..., Any], argnums: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, Any]:
    nums, single = _argnums(argnums)
    for n in nums:
        if not -len(args) <= n < len(args):
            raise ValueError(
                f"cbrtgrad: argnums {n} is out of range for a call with {len(args)} arguments"
            )
    # One tensor per argument, however often argnums names it (-1 and the
    # last index, or a repeated index, are the same argument: the same gradient).
    nums = tuple(n % len(args) for n in nums)
    call = list(args)
    tensors: dict[int, Tensor] = {}
    nested = False
    for n in nums:
        if n in tensors:
            continue
        t, keep = _prepare(args[n], n)
        call[n] = t
        tensors[n] = t
        nested = nested or keep
    wrapped = list(tensors.values())
    with grad_mode.enable_grad():
        out = f(*call, **kwargs)
    if not isinstance(out, Tensor):
        raise TypeError(
            f"cbrtgrad: the function passed to grad must return a Tensor, got {type(out).__name__}"
        )
    if out.shape != ():
        raise ValueError(
            f"cbrtgrad: grad needs a function with a scalar output (shape ()); got shape "
            f"{out.shape} (reduce it, e.g. with .sum())"
        )
    by_index = dict(zip(tensors, grad_of(out, wrapped, create_graph=nested), strict=True))
    results = [by_index[n] if isinstance(args[n], Tensor) else _plain(by_index[n]) for n in nums]
    value = out if nested else raw(out._data)
    return value, results[0] if single else tuple(results)


def _plain(g: Any) -> Any:
    return raw(g._data) if isinstance(g, Tensor) else g


def grad(f: Callable[..., Any], argnums: int | tuple[int, ...] = 0) -> Callable[..., Any]:
    """The gradient of a scalar function, as a function (as ``jax.grad``).

    Parameters
    ----------
    f : callable
        Takes Tensors and returns a Tensor of shape ``()``.
    argnums : int or tuple of int, default 0
        Which positional arguments to differentiate with respect to.

    Returns
    -------
    callable
        Same arguments as ``f``; returns the gradient (a tuple of them for a
        tuple ``argnums``), an ndarray for an array argument and a Tensor for
        a Tensor one. Transformations nest: ``grad(grad(f))``.

    Raises
    ------
    TypeError
        If ``f`` returns no Tensor, an argument is not float or is a device
        array, or ``argnums`` is malformed.
    ValueError
        If ``f``'s output is not a scalar, or ``argnums`` is out of range.

    Examples
    --------
    >>> import cbrtgrad as cg
    >>> cg.grad(cg.cbrt)(8.0)
    array(0.08333333)
    >>> cg.grad(cg.grad(cg.cbrt))(8.0)  # -2 / (9 y^5)
    array(-0.00694444)
    """
    _argnums(argnums)
    _callable(f)

    @functools.wraps(f)
    def grad_f(*args: Any, **kwargs: Any) -> Any:
        return _value_and_grad(f, argnums, args, kwargs)[1]

    return grad_f


def value_and_grad(
    f: Callable[..., Any], argnums: int | tuple[int, ...] = 0
) -> Callable[..., tuple[Any, Any]]:
    """``f``'s value and its gradient in one call (as ``jax.value_and_grad``).

    Parameters
    ----------
    f, argnums
        As for :func:`grad`.

    Returns
    -------
    callable
        Returns ``(value, gradient)``.

    Examples
    --------
    >>> import numpy as np, cbrtgrad as cg
    >>> value, g = cg.value_and_grad(lambda x: cg.cbrt(x).sum())(np.array([8.0, 27.0]))
    >>> value, g
    (array(5.), array([0.08333333, 0.03703704]))
    """
    _argnums(argnums)
    _callable(f)

    @functools.wraps(f)
    def value_and_grad_f(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
        return _value_and_grad(f, argnums, args, kwargs)

    return value_and_grad_f
