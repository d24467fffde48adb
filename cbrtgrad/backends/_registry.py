"""The one registry of backends, and the choice of backend for a call.

The registry has three floors: :mod:`._catalog` (the names, the instances,
:func:`get_backend`), :mod:`._auto` (the automatic choice's rules) and this
module, the choice for one call (:func:`resolve`), which alone knows dask.

Precedence: a ``backend=`` keyword, then the innermost :func:`use_backend`
block (a context variable, so threads and asyncio tasks do not see each
other's choice), then ``CBRTGRAD_BACKEND``, then the automatic choice.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

import numpy as np

from .. import _config
from ..arrays.kinds import is_dask_array
from ._auto import auto_choice, describe_auto_choice, plain_array_choice, small_cpu_size
from ._catalog import AUTO, BackendUnavailableError, availability, available, get_backend, known
from ._protocol import Backend
from .dask_blocks import DaskBlocks

#: The registry's whole public face, whichever floor defines each name (the
#: catalog of backends, the automatic choice, the choice for a call here).
__all__ = [
    "AUTO",
    "BackendUnavailableError",
    "auto_choice",
    "availability",
    "available",
    "check_environment",
    "describe_auto_choice",
    "get_backend",
    "known",
    "resolve",
    "selected_backend",
    "small_cpu_size",
    "use_backend",
]

_selected: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "cbrtgrad_backend", default=None
)

#: The name the innermost :func:`use_backend` block chose here (``None``
#: outside every block): ``selected_backend()``, read by the api's hot path.
selected_backend = _selected.get


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
    # NOTE: hot path: plain ndarrays are never dask arrays (a loop, not a
    # generator: this runs on every call).
    plain = type(x) is np.ndarray
    if plain:
        for value in others:
            if type(value) is not np.ndarray:
                plain = False
                break
    if not plain:
        for value in (x, *others):
            if type(value) is not np.ndarray and is_dask_array(value):
                return _dask_blocks(backend, value)
    if backend is None or _is_auto(backend):
        selected = _selected.get() if backend is None else AUTO
        from_environment = selected is None
        if selected is None:
            settings = _config.settings()
            selected = settings.backend  # parsed: stripped, lower case
            if plain and selected == AUTO:
                return plain_array_choice(x, settings)  # NOTE: hot path
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
    meta = x._meta
    try:
        inner = resolve(backend, meta)
    except ValueError as exc:
        raise ValueError(
            f"cbrtgrad: the chunks of this dask array are {type(meta).__module__}."
            f"{type(meta).__name__}: {exc}"
        ) from None
    return DaskBlocks(inner.name)
