"""The interface every backend implements (the seed's ``IBackend``)."""

from __future__ import annotations

import linecache
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

from ..kernels.kernel_ops import ELEMENTARY, KernelOp

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
    ``cbrtgrad.arrays.ufunc_args.check_out`` (type, a shape the operands broadcast
    to, a dtype the result casts to, writable). A backend called without
    ``dtype`` asks ``cbrtgrad.arrays.dtypes.compute_dtype_of``, the one rule.
    ``out`` and ``where`` have numpy ufunc meaning. Get one with
    :func:`get_backend`.

    A backend may also have a ``sum(a, axis=None, keepdims=False)`` method
    with ``np.add.reduce`` semantics; the graph engine's ``sum`` op uses it
    for arrays of at least ``SUM_MIN_SIZE`` elements when the backend has one
    (the ``parallel`` backend does).
    It is not part of the protocol: backends without it get numpy's.

    A backend whose kernels are numpy ufuncs may have a method
    ``ufunc(kernel, dtype)`` returning them (the ``cpu`` backend): the api
    then hands its calls to numpy's ufunc machinery (``cbrtgrad.backends.host``),
    which checks ``out`` (type, shape, casting, writable), broadcasts, casts
    and gives its answer for any overlap with the inputs (it copies what its
    in-order loops could not take, and the inner loops take the rest,
    ``kernels/cpu/ufunc_loops.py``); where numpy refuses an ``out``, the api's
    check words the error as for every backend. Every other backend gets an
    ``out`` checked by the api and inputs that do not overlap it
    (``cbrtgrad.arrays.ufunc_args.unaliased``).

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


def _op_method(op: KernelOp) -> Any:
    # The method written out with the op's own parameter names (as
    # dataclasses writes __init__), so that it is called, inspected and
    # documented as if written by hand: (self, x, out=None, *, where=True,
    # dtype=None, **options) for the cube root, (self, g, y, ...) for its
    # gradient. The names are identifiers (tests/test_kernel_ops.py).
    inputs = op.argument
    source = (
        f"def {op.name}(self, {inputs}, out=None, *, where=True, dtype=None, **options):\n"
        f"    return self.run(OP, ({inputs},), out, where, dtype, **options)\n"
    )
    namespace: dict[str, Any] = {"OP": op}
    # Its source kept where inspect.getsource finds it (as attrs does), for
    # the docs' autodoc and tracebacks.
    filename = f"<cbrtgrad.backends: method {op.name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - from the table's names
    method = namespace[op.name]
    inputs_doc = "".join(f"{name} : array_like\n    An input of the op.\n" for name in op.inputs)
    method.__doc__ = (
        f"The ``{op.name}`` op, {op.summary[0].lower()}{op.summary[1:]}\n\n"
        "Parameters\n----------\n"
        f"{inputs_doc}"
        "out : array, optional\n    Where to write the result.\n"
        "where : array_like of bool, optional\n    Where to compute.\n"
        "dtype : numpy.dtype, optional\n    float32 or float64 to compute in.\n"
        "**options\n    The backend's own keywords (cuda: ``stream``, ``copy_host``).\n\n"
        "Returns\n-------\narray\n"
        f"    ``{op.outputs[0]}``, computed by this backend's ``run``.\n"
    )
    return method


class ElementwiseOps:
    """The protocol's method of every elementary kernel op, made from its entry.

    A backend that derives from this class and has one method
    ``run(op, inputs, out, where, dtype, **options)``, for any elementary op
    of :mod:`cbrtgrad.kernels.kernel_ops`, gets ``cube_root(x, out=None, *,
    where=True, dtype=None)``, ``cube_root_grad(g, y, ...)`` and the method of
    any op added to the table, each calling ``run``; a method the class
    writes itself is kept (the ``parallel`` backend's gradient, which first
    looks for a constant ``g``).

    Examples
    --------
    >>> import numpy as np
    >>> class Echo(ElementwiseOps):
    ...     def run(self, op, inputs, out, where, dtype):
    ...         return op.name, len(inputs)
    >>> Echo().cube_root_grad(np.ones(2), np.ones(2))
    ('cube_root_grad', 2)
    """

    if TYPE_CHECKING:  # what __init_subclass__ makes, for type checkers (Backend)
        cube_root: Callable[..., Any]
        cube_root_grad: Callable[..., Any]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for op in ELEMENTARY:
            if op.name not in vars(cls):
                setattr(cls, op.name, _op_method(op))
