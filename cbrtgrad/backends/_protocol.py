"""The interface every backend implements (the seed's ``IBackend``)."""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, runtime_checkable

#: Sums of this many elements or more go to a backend's own ``sum`` (see
#: :class:`Backend`): the graph engine asks the backend for one from here,
#: and the ``parallel`` backend runs its threads from here. Below it numpy's
#: own loop costs less than starting the threads.
SUM_MIN_SIZE = 1 << 16


class Availability(NamedTuple):
    """Whether a backend can run on this machine, and if not, why.

    Parameters
    ----------
    available : bool
        True when the backend can run here.
    reason : str
        What it runs on, or why it cannot run (a missing library, no GPU, ...).

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

    A backend trusts its caller (:func:`cbrtgrad.cbrt` and the other public
    functions, or the graph engine), which decides everything once: ``dtype``
    is the float32 or float64 dtype to compute in (``None``: the inputs' own,
    already one of those), host inputs come already cast to it (a backend
    casts other inputs, e.g. dask chunks, as it reads them), ``where`` is
    ``True`` or a bool array, and ``out`` was checked by
    ``cbrtgrad._ufunc_args.check_out`` (type, a shape the operands broadcast
    to, a dtype the result casts to, writable). A backend called without
    ``dtype`` asks ``cbrtgrad._dtypes.compute_dtype_of``, the one rule.
    ``out`` and ``where`` have numpy ufunc meaning. Get one with
    :func:`get_backend`.

    A backend may also have a ``sum(a, axis=None, keepdims=False)`` method
    with ``np.add.reduce`` semantics; the graph engine's ``sum`` op uses it
    for arrays of at least ``SUM_MIN_SIZE`` elements when the backend has one
    (the ``parallel`` backend does).
    It is not part of the protocol: backends without it get numpy's.

    A backend whose kernels are numpy ufuncs may have a method
    ``ufunc(kernel, dtype)`` returning them (the ``cpu`` backend): the api
    then hands its calls to numpy's ufunc machinery (``cbrtgrad._host``),
    which checks ``out`` (type, shape, casting, writable), broadcasts, casts
    and gives its answer for any overlap with the inputs (it copies what its
    in-order loops could not take, and the inner loops take the rest,
    ``kernels/ufunc_loops.py``); where numpy refuses an ``out``, the api's
    check words the error as for every backend. Every other backend gets an
    ``out`` checked by the api and inputs that do not overlap it
    (``cbrtgrad._ufunc_args.unaliased``).

    Examples
    --------
    >>> from cbrtgrad.backends import Backend, get_backend
    >>> import numpy as np
    >>> cpu = get_backend("cpu")
    >>> isinstance(cpu, Backend), cpu.cube_root(np.array([27.0]))
    (True, array([3.]))
    """

    name: str

    def availability(self) -> Availability:
        """Probe the machine; never raises.

        Returns
        -------
        Availability
        """
        ...

    def accepts(self, x: Any) -> bool:
        """Whether ``x`` lives where this backend computes (host or device).

        Parameters
        ----------
        x : object
            An input of a call.

        Returns
        -------
        bool
        """
        ...

    def cube_root(self, x: Any, out: Any = None, *, where: Any = True, dtype: Any = None) -> Any:
        """Compute ``y = sgn(x) |x|^(1/3)``.

        Parameters
        ----------
        x : array_like
            Input, validated by :func:`cbrtgrad.cbrt`.
        out : array, optional
            Where to write ``y``.
        where : array_like of bool, optional
            Where to compute.
        dtype : numpy.dtype, optional
            float32 or float64 to compute in.

        Returns
        -------
        array
            ``y``, on the backend's side (host or device).
        """
        ...

    def cube_root_grad(
        self, g: Any, y: Any, out: Any = None, *, where: Any = True, dtype: Any = None
    ) -> Any:
        """Compute ``dx = g / (3 y^2)`` from the saved output ``y``.

        Parameters
        ----------
        g : array_like
            Upstream gradient.
        y : array_like
            The saved output of :meth:`cube_root`.
        out : array, optional
            Where to write ``dx``.
        where : array_like of bool, optional
            Where to compute.
        dtype : numpy.dtype, optional
            float32 or float64 to compute in.

        Returns
        -------
        array
            ``dx``.
        """
        ...

    def cube_root_and_grad(
        self, x: Any, g: Any, out: Any = None, *, dtype: Any = None
    ) -> tuple[Any, Any]:
        """Compute ``(y, dx)`` in one pass over memory.

        Parameters
        ----------
        x : array_like
            Input of the cube root.
        g : array_like
            Upstream gradient.
        out : tuple of two arrays, optional
            ``(y, dx)`` to write into.
        dtype : numpy.dtype, optional
            float32 or float64 to compute in.

        Returns
        -------
        (array, array)
            ``y`` and ``dx``, the same bits as the two separate calls.
        """
        ...
