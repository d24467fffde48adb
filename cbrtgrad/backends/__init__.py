"""Backends: one protocol, one registry (see :mod:`cbrtgrad.backends._registry`)."""

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
