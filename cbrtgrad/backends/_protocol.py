"""The interface every backend implements (the seed's ``IBackend``)."""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, runtime_checkable


class Availability(NamedTuple):
    """Whether a backend can run on this machine, and if not, why.

    Examples
    --------
    >>> Availability(False, "not macOS")
    Availability(available=False, reason='not macOS')
    """

    available: bool
    reason: str


@runtime_checkable
class Backend(Protocol):
    """A provider of the three cube-root kernels.

    Inputs reach a backend already validated by :mod:`cbrtgrad.api`: their
    dtypes follow :mod:`cbrtgrad._dtypes`, and ``dtype`` is the dtype to compute
    in (or ``None`` for the input's own float dtype). ``out`` and ``where``
    have numpy ufunc meaning.
    """

    name: str

    def availability(self) -> Availability:
        """Probe the machine; never raises."""
        ...

    def accepts(self, x: Any) -> bool:
        """Whether ``x`` lives where this backend computes (host or device)."""
        ...

    def cube_root(self, x: Any, out: Any = None, *, where: Any = True, dtype: Any = None) -> Any:
        """``y = sgn(x) |x|^(1/3)``."""
        ...

    def cube_root_grad(self, g: Any, y: Any, out: Any = None, *, where: Any = True) -> Any:
        """``dx = g / (3 y^2)`` from the saved output ``y``."""
        ...

    def cube_root_and_grad(self, x: Any, g: Any, out: Any = None) -> tuple[Any, Any]:
        """``(y, dx)`` in one pass over memory; ``out`` is a pair or ``None``."""
        ...
