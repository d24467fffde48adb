"""Backends: one protocol (:class:`Backend`), one registry (``cbrtgrad/backends/_registry.py``).

The registry's floors: ``_catalog.py`` (names and instances), ``_auto.py``
(the automatic choice, one table of rules), ``_registry.py`` (the choice for
a call, dask arrays included).

Precedence of the choice: a ``backend=`` keyword, then the innermost
:func:`use_backend` block, then ``CBRTGRAD_BACKEND``, then the automatic
choice (:func:`auto_choice`).
"""

from ._protocol import Availability, Backend
from ._registry import (
    BackendUnavailableError,
    auto_choice,
    availability,
    available,
    describe_auto_choice,
    get_backend,
    known,
    resolve,
    use_backend,
)

__all__ = [
    "Availability",
    "Backend",
    "BackendUnavailableError",
    "auto_choice",
    "describe_auto_choice",
    "availability",
    "available",
    "get_backend",
    "known",
    "resolve",
    "use_backend",
]
