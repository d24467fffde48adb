"""The one registry of backends, and the choice of backend for a call.

Precedence: a ``backend=`` keyword, then the innermost :func:`use_backend`
block (a context variable, so threads and asyncio tasks do not see each
other's choice), then ``CBRTGRAD_BACKEND``, then the automatic choice.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import threading
from collections.abc import Iterator
from typing import Any

from .. import _config
from ._protocol import Availability, Backend

#: name -> "module:Class". Adding a backend is one file and one line here.
_BACKENDS: dict[str, str] = {
    "cpu": "cbrtgrad.backends.cpu:CpuBackend",
    "numpy": "cbrtgrad.backends.numpy_backend:NumpyBackend",
}

AUTO = "auto"

_selected: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "cbrtgrad_backend", default=None
)
_instances: dict[str, Backend] = {}
_lock = threading.Lock()


class BackendUnavailableError(RuntimeError):
    """A known backend cannot run on this machine; the message says why."""


def known() -> tuple[str, ...]:
    """Names of every backend cbrtgrad knows, available here or not.

    Examples
    --------
    >>> "cpu" in known() and "numpy" in known()
    True
    """
    return tuple(_BACKENDS)


def _check_name(name: Any) -> str:
    if not isinstance(name, str):
        raise TypeError(f"cbrtgrad: backend must be a str, got {type(name).__name__}")
    key = name.strip().lower()
    if key not in _BACKENDS:
        raise ValueError(
            f"cbrtgrad: unknown backend {name!r}; known backends: {', '.join(known())} "
            f"(or {AUTO!r})"
        )
    return key


def _instance(name: str) -> Backend:
    found = _instances.get(name)
    if found is not None:
        return found
    with _lock:
        if name not in _instances:
            module_name, class_name = _BACKENDS[name].split(":")
            backend_class = getattr(importlib.import_module(module_name), class_name)
            _instances[name] = backend_class()
        return _instances[name]


def availability(name: str) -> Availability:
    """Whether backend ``name`` can run here, and why not if it cannot.

    Examples
    --------
    >>> availability("numpy").available
    True
    """
    key = _check_name(name)
    try:
        return _instance(key).availability()
    except ImportError as exc:
        return Availability(False, f"cannot import its module: {exc}")


def available() -> list[str]:
    """Names of the backends that can run on this machine.

    Examples
    --------
    >>> "cpu" in available()
    True
    """
    return [name for name in _BACKENDS if availability(name).available]


def get_backend(name: str) -> Backend:
    """Return the backend called ``name``.

    Raises
    ------
    ValueError
        For an unknown name (the message lists the known ones).
    BackendUnavailableError
        When the backend cannot run here (the message says why).

    Examples
    --------
    >>> get_backend("cpu").name
    'cpu'
    """
    key = _check_name(name)
    status = availability(key)
    if not status.available:
        raise BackendUnavailableError(f"cbrtgrad: backend {key!r} is unavailable: {status.reason}")
    return _instance(key)


@contextlib.contextmanager
def use_backend(name: str) -> Iterator[Backend | None]:
    """Use backend ``name`` for calls without ``backend=`` inside the block.

    ``"auto"`` restores the automatic choice inside the block.

    Examples
    --------
    >>> import numpy as np, cbrtgrad
    >>> with use_backend("numpy"):
    ...     cbrtgrad.cbrt(np.array([8.0]))
    array([2.])
    """
    backend = None if _is_auto(name) else get_backend(name)
    token = _selected.set(AUTO if backend is None else backend.name)
    try:
        yield backend
    finally:
        _selected.reset(token)


def _is_auto(name: Any) -> bool:
    return isinstance(name, str) and name.strip().lower() == AUTO


def auto_choice(x: Any) -> Backend:
    """The backend the automatic choice gives for input ``x``.

    Examples
    --------
    >>> import numpy as np
    >>> auto_choice(np.ones(3)).name
    'cpu'
    """
    return _instance("cpu")


def resolve(backend: Any, x: Any) -> Backend:
    """The backend a call with ``backend=`` and first input ``x`` runs on."""
    if backend is None or _is_auto(backend):
        selected = _selected.get() if backend is None else AUTO
        if selected is None:
            selected = _config.settings().backend
        if _is_auto(selected):
            return auto_choice(x)
        backend = selected
    found = get_backend(backend)
    if not found.accepts(x):
        raise ValueError(
            f"cbrtgrad: backend {found.name!r} cannot take an input of type {type(x).__name__}"
        )
    return found
