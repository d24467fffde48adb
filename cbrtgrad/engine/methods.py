"""The Tensor methods that record ops: ``sum``, ``mean``, ``reshape``, ``astype``, ``backward``.

A mixin of :class:`~cbrtgrad.Tensor`, as :mod:`.operators` is for Python's
operators: each method runs the function the op table (op_table.py) holds
under its name, entered there by the op modules (which import tensor.py, so
tensor.py imports none of them). Once they are loaded, :func:`bind` makes
each of those functions the Tensor method itself (it has the signature
declared here, and gets this docstring), so that a call is one Python call,
not two: the methods below are the declarations (signature, documentation,
typing) and what runs before :func:`bind`.
"""

from __future__ import annotations

import inspect
import types
from typing import Any, Self

from .op_table import METHODS

_METHOD = METHODS


class Methods:
    """The recording methods of :class:`~cbrtgrad.Tensor`."""

    __slots__ = ()

    def sum(
        self, axis: Any = None, dtype: Any = None, out: Any = None, *, keepdims: bool = False
    ) -> Self:
        """Sum over ``axis`` (all axes by default); ``np.sum(tensor)`` calls it.

        Parameters
        ----------
        axis : int or tuple of int, optional
            Axes to reduce.
        dtype, out : None
            Only for ``np.sum``'s signature: anything else is a ``TypeError``.
        keepdims : bool, default False
            Keep the reduced axes with size one.

        Returns
        -------
        Tensor

        Examples
        --------
        >>> import numpy as np, cbrtgrad as cg
        >>> cg.Tensor(np.ones((2, 3))).sum(axis=0)
        Tensor([2., 2., 2.])
        """
        return _METHOD["sum"](self, axis, dtype, out, keepdims=keepdims)

    def mean(
        self, axis: Any = None, dtype: Any = None, out: Any = None, *, keepdims: bool = False
    ) -> Self:
        """Mean over ``axis`` (all axes by default); ``np.mean(tensor)`` calls it.

        Parameters
        ----------
        axis : int or tuple of int, optional
            Axes to reduce.
        dtype, out : None
            Only for ``np.mean``'s signature: anything else is a ``TypeError``.
        keepdims : bool, default False
            Keep the reduced axes with size one.

        Returns
        -------
        Tensor

        Examples
        --------
        >>> import numpy as np, cbrtgrad as cg
        >>> np.mean(cg.Tensor(np.array([1.0, 2.0, 6.0])))
        Tensor(3.)
        """
        return _METHOD["mean"](self, axis, dtype, out, keepdims=keepdims)

    def reshape(self, *shape: Any) -> Self:
        """The same values in a new shape (differentiable).

        Parameters
        ----------
        *shape : int or tuple of int
            The new shape, as ``reshape(2, 3)`` or ``reshape((2, 3))``.

        Returns
        -------
        Tensor

        Examples
        --------
        >>> import numpy as np, cbrtgrad as cg
        >>> cg.Tensor(np.arange(4.0)).reshape(2, 2).shape
        (2, 2)
        """
        return _METHOD["reshape"](self, *shape)

    def astype(self, dtype: Any) -> Self:
        """A differentiable cast to a float dtype (the gradient is cast back).

        Parameters
        ----------
        dtype : numpy.dtype
            float16, float32 or float64.

        Returns
        -------
        Tensor

        Examples
        --------
        >>> import numpy as np, cbrtgrad as cg
        >>> cg.Tensor(np.array([8.0])).astype(np.float32).dtype
        dtype('float32')
        """
        return _METHOD["astype"](self, dtype)

    def backward(
        self, gradient: Any = None, *, retain_graph: bool | None = None, create_graph: bool = False
    ) -> None:
        """Accumulate ``d self / d leaf`` into every leaf's ``.grad``.

        Parameters
        ----------
        gradient : array_like, optional
            ``dL/dself``, of this tensor's shape; may be omitted only when the
            tensor has one element.
        retain_graph : bool, optional
            Keep the saved values for another backward (default: ``create_graph``).
        create_graph : bool, default False
            Record the backward itself, for second derivatives; ``.grad`` is
            then a ``Tensor``.

        Raises
        ------
        RuntimeError
            If the tensor does not require grad, if ``gradient`` is omitted for
            a tensor of several elements, if the graph was already freed by an
            earlier backward, or if a saved value was modified in place.
        ValueError, TypeError
            If ``gradient`` has the wrong shape or a non-float dtype.

        Examples
        --------
        >>> import numpy as np, cbrtgrad as cg
        >>> x = cg.Tensor(np.array([8.0]), requires_grad=True)
        >>> cg.cbrt(x).sum().backward()
        >>> x.grad
        array([0.08333333])
        """
        _METHOD["backward"](self, gradient, retain_graph=retain_graph, create_graph=create_graph)


def _parameters(function: Any) -> list[tuple[str, Any, Any]]:
    # What a caller sees of a method: its parameters after the first (self).
    parameters = list(inspect.signature(function).parameters.values())[1:]
    return [(p.name, p.kind, p.default) for p in parameters]


def bind(cls: type) -> None:
    """Make each function of the op table's ``METHODS`` the method of ``cls`` it implements.

    NOTE: hot path: ``t.sum()`` and ``t.backward()`` then call the op
    function directly, without the forwarding method's frame (about 0.1 us
    each, a tenth of what the one-element step is over its goal before
    this: docs/engine.md, "Performance"). Each function must take the
    parameters the declaration in :class:`Methods` takes (checked here, at
    import), and gets its docstring, so the documented method is what runs.
    """
    for name, function in METHODS.items():
        declared = getattr(Methods, name)
        if _parameters(function) != _parameters(declared):
            raise TypeError(
                f"cbrtgrad: the op function for Tensor.{name} takes "
                f"{inspect.signature(function)}; expected the parameters of "
                f"Methods.{name}{inspect.signature(declared)}"
            )
        setattr(cls, name, _as_method(function, cls, name, declared.__doc__))


def _as_method(function: Any, cls: type, name: str, doc: str | None) -> Any:
    # A copy of the op function, as the method ``cls.name``: the same code
    # with its first parameter named ``self`` (the code reads it by position,
    # so only the name changes) and the declared docstring; the op function
    # itself keeps its own name, parameters and docstring.
    code = function.__code__
    first = code.co_varnames[0]
    method = types.FunctionType(
        code.replace(co_varnames=("self", *code.co_varnames[1:]), co_name=name),
        function.__globals__,
        name,
        function.__defaults__,
        function.__closure__,
    )
    method.__kwdefaults__ = function.__kwdefaults__
    method.__annotations__ = {
        ("self" if key == first else key): value for key, value in function.__annotations__.items()
    }
    method.__doc__ = doc
    method.__module__ = cls.__module__
    method.__qualname__ = f"{cls.__qualname__}.{name}"
    return method
