"""The backends cbrtgrad knows, by name, and their one instance each.

The lowest floor of the registry: it imports no backend module until one is
asked for, and nothing above it (the choice of backend, ``DaskBlocks``), so
both the registry and the dask tasks (which look their backend up by name in
a worker's process) import it without importing each other.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any

from ._protocol import Availability, Backend

#: name -> "module:Class". Adding a backend is one file and one line here.
_BACKENDS: dict[str, str] = {
    "cpu": "cbrtgrad.backends.cpu:CpuBackend",
    "numpy": "cbrtgrad.backends.numpy_backend:NumpyBackend",
    "parallel": "cbrtgrad.backends.parallel:ParallelBackend",
    "cuda": "cbrtgrad.backends.cuda:CudaBackend",
    "accelerate": "cbrtgrad.backends.accelerate:AccelerateBackend",
}

#: The name of the automatic choice, where a backend's name may be given.
AUTO = "auto"

_instances: dict[str, Backend] = {}
#: Backends that need nothing but numba and numpy, which cbrtgrad imports
#: anyway: they are available in every process, whatever the environment.
#: (accelerate's and cuda's availability depends on settings, libraries and
#: drivers, which tests and users change at run time.)
_ALWAYS_AVAILABLE = frozenset({"cpu", "numpy", "parallel"})
#: Backends that, once available, stay so for the process: cuda (a process
#: cannot lose its driver or its GPU, and the backend caches a successful
#: probe itself). A failed probe is asked again on the next call.
_AVAILABLE_ONCE_FOUND = frozenset({"cuda"})
#: Those of them :func:`get_backend` has returned, by their own names (other
#: spellings, " CPU ", take the general way), so that a call naming one again
#: skips the name's parsing and the availability probe (hot path: every
#: ``backend="cpu"`` call, and every call on a device array).
_ready: dict[str, Backend] = {}
_lock = threading.Lock()


class BackendUnavailableError(RuntimeError):
    """A known backend cannot run on this machine; the message says why.

    Examples
    --------
    Apple's Accelerate runs only on macOS; elsewhere asking for it raises,
    with the reason that :func:`availability` gives:

    >>> status = availability("accelerate")
    >>> try:
    ...     _ = get_backend("accelerate")
    ... except BackendUnavailableError as exc:
    ...     assert not status.available and status.reason in str(exc)
    """


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


def instance(name: str) -> Backend:
    """The one instance of backend ``name`` (a name of :func:`known`), made on first use.

    Not probed: callers that need it to run ask :func:`get_backend`.
    """
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

    Parameters
    ----------
    name : str
        A name from :func:`known`.

    Returns
    -------
    Availability
        Never raises for a known name: a failed import is reported as a reason.

    Raises
    ------
    ValueError
        For an unknown name.

    Examples
    --------
    >>> availability("numpy").available
    True
    """
    key = _check_name(name)
    try:
        return instance(key).availability()
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

    Parameters
    ----------
    name : str
        A name from :func:`known` (case and surrounding spaces are ignored).

    Returns
    -------
    Backend
        The one instance of that backend.

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
    if type(name) is str:
        found = _ready.get(name)
        if found is not None:
            return found
    key = _check_name(name)
    status = availability(key)
    if not status.available:
        raise BackendUnavailableError(f"cbrtgrad: backend {key!r} is unavailable: {status.reason}")
    found = instance(key)
    if (key in _ALWAYS_AVAILABLE or key in _AVAILABLE_ONCE_FOUND) and name == key:
        _ready[key] = found
    return found
