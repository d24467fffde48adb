"""The op table: which function runs for a numpy ufunc, a cbrtgrad function or a Tensor method.

``Tensor`` (engine/tensor.py) dispatches every operator and method that
records an op through these dicts; the modules defining the ops fill them
when they are imported (``engine/__init__.py`` imports them all). So the
tensor module imports none of the op modules, and they import it: the
engine's imports form no cycle, and adding an op is one ``@routes`` line
beside its function (docs/architecture.md, "Adding an op").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

_F = TypeVar("_F", bound=Callable[..., Any])

#: numpy ufunc -> op function: ``Tensor.__array_ufunc__`` and Tensor's operators.
UFUNC_OPS: dict[Any, Callable[..., Any]] = {}
#: cbrtgrad function (``cbrtgrad.cbrt``, ...) -> op function: ``Tensor.__cbrtgrad_function__``.
API_OPS: dict[Any, Callable[..., Any]] = {}
#: Tensor method name -> function: ``sum``, ``mean``, ``reshape``, ``astype``, ``backward``.
METHODS: dict[str, Callable[..., Any]] = {}


def routes(
    ufunc: Any = None, *, api_function: Any = None, method: str | None = None
) -> Callable[[_F], _F]:
    """Enter ``function`` in the table: for ``ufunc``, ``api_function`` and/or ``method``.

    Examples
    --------
    >>> import numpy as np
    >>> from cbrtgrad.engine.op_table import UFUNC_OPS
    >>> UFUNC_OPS[np.add].__name__
    'add'
    """

    def register(function: _F) -> _F:
        if ufunc is not None:
            UFUNC_OPS[ufunc] = function
        if api_function is not None:
            API_OPS[api_function] = function
        if method is not None:
            METHODS[method] = function
        return function

    return register
