"""The one registry of backends, and the choice of backend for a call.

Precedence: a ``backend=`` keyword, then the innermost :func:`use_backend`
block (a context variable, so threads and asyncio tasks do not see each
other's choice), then ``CBRTGRAD_BACKEND``, then the automatic choice.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import sys
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from .. import _config
from .._array_kinds import is_dask_array, is_device_array
from ._protocol import Availability, Backend

#: name -> "module:Class". Adding a backend is one file and one line here.
_BACKENDS: dict[str, str] = {
    "cpu": "cbrtgrad.backends.cpu:CpuBackend",
    "numpy": "cbrtgrad.backends.numpy_backend:NumpyBackend",
    "parallel": "cbrtgrad.backends.parallel:ParallelBackend",
    "cuda": "cbrtgrad.backends.cuda:CudaBackend",
    "accelerate": "cbrtgrad.backends.accelerate:AccelerateBackend",
}

AUTO = "auto"

_selected: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "cbrtgrad_backend", default=None
)
_instances: dict[str, Backend] = {}
#: Backends that need nothing but numba and numpy, which cbrtgrad imports
#: anyway: they are available in every process, whatever the environment.
#: (accelerate's and cuda's availability depends on settings, libraries and
#: drivers, which tests and users change at run time.)
_ALWAYS_AVAILABLE = frozenset({"cpu", "numpy", "parallel"})
#: Those of them :func:`get_backend` has returned, by their own names (other
#: spellings, " CPU ", take the general way), so that a call naming one again
#: skips the name's parsing and the availability probe (hot path: every
#: ``backend="cpu"`` call).
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
    found = _instance(key)
    if key in _ALWAYS_AVAILABLE and name == key:
        _ready[key] = found
    return found


@contextlib.contextmanager
def use_backend(name: str) -> Iterator[Backend | None]:
    """Use backend ``name`` for calls without ``backend=`` inside the block.

    Parameters
    ----------
    name : str
        A name from :func:`known`, or ``"auto"`` to restore the automatic
        choice inside the block.

    Yields
    ------
    Backend or None
        The backend (``None`` for ``"auto"``).

    Raises
    ------
    ValueError, BackendUnavailableError
        As :func:`get_backend`, on entering the block.

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


def check_environment() -> None:
    """Check the environment flags, and that ``CBRTGRAD_BACKEND`` names a backend that runs here.

    Raises
    ------
    ValueError
        For a malformed flag, or a ``CBRTGRAD_BACKEND`` that names no backend
        (the message names the variable).
    BackendUnavailableError
        For a ``CBRTGRAD_BACKEND`` naming a backend that cannot run here.

    Examples
    --------
    >>> check_environment()
    """
    selected = _config.settings().backend
    if selected != AUTO:
        _from_environment(selected)


def _from_environment(name: str) -> Backend:
    # The backend CBRTGRAD_BACKEND names; its errors name the variable.
    prefix = "cbrtgrad: environment variable CBRTGRAD_BACKEND: "
    try:
        return get_backend(name)
    except ValueError as exc:
        raise ValueError(prefix + str(exc).removeprefix("cbrtgrad: ")) from None
    except BackendUnavailableError as exc:
        raise BackendUnavailableError(prefix + str(exc).removeprefix("cbrtgrad: ")) from None


def _is_auto(name: Any) -> bool:
    return isinstance(name, str) and name.strip().lower() == AUTO


_ACCELERATE_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _use_accelerate() -> bool:
    # Only asked on macOS: elsewhere the probe would try to load a library
    # that cannot exist. The backend caches its own probe.
    return sys.platform == "darwin" and availability("accelerate").available


def auto_choice(x: Any) -> Backend:
    """The backend the automatic choice gives for input ``x``.

    Parameters
    ----------
    x : object
        The first input of a call.

    Returns
    -------
    Backend
        By the first rule that applies:

    1. Device arrays (``__cuda_array_interface__``, numba device arrays):
       ``cuda``, or :class:`BackendUnavailableError` saying why it cannot run.
    2. On macOS, numpy float32 and float64 arrays and scalars: ``accelerate``
       when the framework loads.
    3. numpy arrays of at least ``CBRTGRAD_PARALLEL_MIN`` elements (default
       10^6): ``parallel``.
    4. Everything else (small arrays, Python scalars and lists): ``cpu``.

    Dask arrays never reach this function: :func:`resolve` sends them to a
    :class:`~cbrtgrad.backends.dask_blocks.DaskBlocks` over the choice for one
    chunk (``cpu`` for numpy chunks, ``cuda`` for CuPy chunks).

    Raises
    ------
    BackendUnavailableError
        For a device array when the ``cuda`` backend cannot run.

    Examples
    --------
    >>> import numpy as np
    >>> auto_choice(np.ones(3)).name
    'cpu'
    >>> auto_choice(np.ones(2_000_000, np.float16)).name
    'parallel'
    """
    if type(x) is not np.ndarray and is_device_array(x):
        return get_backend("cuda")
    if isinstance(x, (np.ndarray, np.generic)):
        if sys.platform == "darwin" and x.dtype in _ACCELERATE_DTYPES and _use_accelerate():
            return _instance("accelerate")
        if x.size >= _config.settings().parallel_min_size:
            return _instance("parallel")
    # NOTE: hot path (small arrays): the instance from the dict, without a call.
    return _instances.get("cpu") or _instance("cpu")


def describe_auto_choice() -> list[str]:
    """Human-readable lines saying what the automatic choice does on this machine.

    Returns
    -------
    list of str
        One line per rule, with the backend it picks here and, when that
        backend cannot run, why.

    Examples
    --------
    >>> lines = describe_auto_choice()
    >>> any("parallel" in line for line in lines)
    True
    """
    selected = _config.settings().backend
    lines = []
    if not _is_auto(selected):
        lines.append(
            f"CBRTGRAD_BACKEND={selected!r}: calls without backend= and outside use_backend() "
            "use it; the rules below apply only with backend='auto'"
        )
    cuda = availability("cuda")
    if cuda.available:
        lines.append(f"device arrays -> cuda ({cuda.reason})")
    else:
        lines.append(f"device arrays -> cuda, unavailable here (such calls fail): {cuda.reason}")
    if sys.platform == "darwin":
        accel = availability("accelerate")
        if accel.available:
            lines.append("numpy float32/float64 arrays -> accelerate (Apple vForce)")
        else:
            lines.append(f"numpy float32/float64 arrays -> accelerate unavailable ({accel.reason})")
    else:
        lines.append("accelerate is not considered (not macOS)")
    minimum = _config.settings().parallel_min_size
    lines.append(
        f"other numpy arrays with >= {minimum:,} elements -> parallel "
        f"[{availability('parallel').reason}]"
    )
    lines.append("everything else (smaller arrays, scalars, lists) -> cpu")
    lines.append(
        "dask arrays -> chunk by chunk (dask.array.map_blocks) on the choice for one chunk: "
        "cpu for numpy chunks, cuda for CuPy chunks"
    )
    return lines


def resolve(backend: Any, x: Any, *others: Any) -> Backend:
    """The backend a call with ``backend=`` and inputs ``x, *others`` runs on.

    When any input is a dask array, the answer is a
    :class:`~cbrtgrad.backends.dask_blocks.DaskBlocks` over the backend this
    rule gives for one of its chunks (its ``_meta``): dask is where the data
    lives, ``backend=`` still names the kernel.

    Parameters
    ----------
    backend : str or None
        The call's ``backend=``; ``None`` defers to :func:`use_backend`, then
        ``CBRTGRAD_BACKEND``, then :func:`auto_choice`; ``"auto"`` goes to
        :func:`auto_choice` directly.
    x : object
        The call's first input.
    *others : object
        Its other array inputs (only looked at for dask arrays).

    Returns
    -------
    Backend
        The backend to run on.

    Raises
    ------
    ValueError
        For an unknown name, or a backend that cannot take ``x`` (the cuda
        backend given a host array, say).
    BackendUnavailableError
        For a backend that cannot run here.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> resolve(None, np.ones(3)).name, resolve("numpy", np.ones(3)).name
    ('cpu', 'numpy')
    >>> with use_backend("numpy"):
    ...     resolve(None, np.ones(3)).name
    'numpy'
    >>> resolve(None, da.ones(4, chunks=2))
    DaskBlocks('cpu')
    >>> resolve("parallel", np.ones(4), da.ones(4, chunks=2))
    DaskBlocks('parallel')
    """
    if others or type(x) is not np.ndarray:  # NOTE: hot path: one ndarray is never dask
        for value in (x, *others):
            if type(value) is not np.ndarray and is_dask_array(value):
                return _dask_blocks(backend, value)
    if backend is None or _is_auto(backend):
        selected = _selected.get() if backend is None else AUTO
        from_environment = selected is None
        if selected is None:
            selected = _config.settings().backend  # parsed: stripped, lower case
        # Both sources hold normalised names (use_backend stores AUTO or a
        # backend's own name), so a plain comparison is enough.
        if selected == AUTO:
            return auto_choice(x)
        backend = selected
        found = _from_environment(backend) if from_environment else get_backend(backend)
    else:
        found = get_backend(backend)
    if not found.accepts(x):
        # A backend may say how to make the input acceptable (e.g. an explicit copy).
        hint = getattr(found, "accepts_hint", "")
        raise ValueError(
            f"cbrtgrad: backend {found.name!r} cannot take an input of type {type(x).__name__}"
            + (f": {hint}" if hint else "")
        )
    return found


def _dask_blocks(backend: Any, x: Any) -> Backend:
    from .dask_blocks import DaskBlocks

    meta = x._meta
    try:
        inner = resolve(backend, meta)
    except ValueError as exc:
        raise ValueError(
            f"cbrtgrad: the chunks of this dask array are {type(meta).__module__}."
            f"{type(meta).__name__}: {exc}"
        ) from None
    return DaskBlocks(inner.name)
