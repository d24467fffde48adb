"""The version machinery: how the engine notices a saved value written in place.

Every Tensor has a :class:`Version` counter shared with the views of its data
(:class:`DataView`, what ``Tensor.data`` returns). In-place writes bump it; a
node records ``(counter, value)`` for each tensor it saves
(:func:`version_check`) and the backward compares them
(``Node.check_versions``), so a gradient is never computed from a value that
changed after the forward. A dask array is never written to: a rebound one is
noticed by its key (:class:`LazyVersion`).

Every host array the engine hands out over a tensor's memory (``.data``,
``.numpy()``, ``np.asarray(t)``, a node's saved ``result``) is an
:func:`alias`: its chain of ``.base`` ends at an :class:`_Alias` naming the
tensor's counter, never at the tensor's own writable array, and numpy cannot
make it writable. So no writable object reaches a saved buffer except through
the engine, and :func:`counter_of` finds the counter of any array made over
a tensor's memory (``Tensor(...)`` of it shares that counter).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ..arrays.kinds import is_dask_array


class Version:
    """A mutable counter shared by a tensor and every view of its data.

    NOTE: hot path (every tensor whose counter is read has one:
    :func:`tensor_counter`): no ``__init__`` and no slots; a new counter
    reads the class's 0 until its first write, so making one is a third
    cheaper.
    """

    value: int = 0


#: Serialises the first read of a tensor's counter (see :func:`tensor_counter`).
_COUNTER_LOCK = threading.Lock()


def tensor_counter(t: Any) -> Version:
    """``t._version``: the tensor's counter, made on its first read.

    NOTE: hot path: most tensors a step makes (a leaf whose input is not
    saved, a loss) never have their counter read, so the engine stores None
    (``_counter``) and the counter is made here when first asked for: two
    counters fewer per one-element step. The lock makes two threads reading
    a new tensor's counter at once get the same one (a node keeping the
    other would miss a write counted by the first).

    Examples
    --------
    >>> import numpy as np, cbrtgrad as cg
    >>> t = cg.Tensor(np.ones(2))
    >>> t._counter is None, tensor_counter(t) is t._version is t._counter
    (True, True)
    """
    counter: Version | None = t._counter
    if counter is None:
        with _COUNTER_LOCK:
            counter = t._counter
            if counter is None:
                counter = t._counter = Version()
    return counter


def set_tensor_counter(t: Any, counter: Version) -> None:
    """``t._version = counter``: the tensor's data is memory that ``counter`` counts."""
    t._counter = counter


class _Alias:
    """The ``base`` of an :func:`alias`: another array's memory, described to numpy.

    numpy makes an array from an object's ``__array_interface__`` and keeps
    the object as the array's ``base``, so the chain of ``.base`` from the
    alias and its views stops here, at an object that is no array: the
    tensor's own array (``_target``, kept alive here) is not reachable by
    ``.base``. It exports no buffer either, so numpy refuses to make a
    read-only alias writable (``flags.writeable = True`` raises).
    """

    __slots__ = ("__array_interface__", "_target", "version")

    __array_interface__: dict[str, Any]
    _target: np.ndarray
    #: The counter of the tensor whose memory this is (see :func:`counter_of`).
    version: Version


def alias(array: np.ndarray, version: Version, *, writable: bool) -> np.ndarray:
    """A plain ndarray over ``array``'s memory and geometry, whose ``.base`` is an :class:`_Alias`.

    Parameters
    ----------
    array : numpy.ndarray
        A tensor's data, or a view of it.
    version : Version
        That tensor's counter, which :func:`counter_of` reads back.
    writable : bool
        False for what is handed out (it cannot be made writable); True only
        for the engine's own counted writes (:func:`write_target`).

    Returns
    -------
    numpy.ndarray

    Examples
    --------
    >>> import numpy as np
    >>> a = np.arange(3.0)
    >>> view = alias(a, Version(), writable=False)
    >>> view, np.shares_memory(view, a), view.flags.writeable
    (array([0., 1., 2.]), True, False)
    """
    interface = array.__array_interface__  # a new dict each time: changed here only
    interface["data"] = (interface["data"][0], not writable)
    holder = _Alias()
    holder.__array_interface__ = interface
    holder._target = array
    holder.version = version
    view = np.asarray(holder)
    # The interface describes dtypes numpy has no type string for (bfloat16)
    # as raw bytes of the same size: viewed back as the array's dtype.
    return view if view.dtype == array.dtype else view.view(array.dtype)


def counter_of(array: Any) -> Version | None:
    """The counter of the tensor whose memory ``array`` views (through an :func:`alias`), or None.

    Examples
    --------
    >>> import numpy as np, cbrtgrad as cg
    >>> t = cg.Tensor(np.arange(3.0))
    >>> counter_of(np.asarray(t)) is t._version, counter_of(np.arange(3.0))
    (True, None)
    """
    base = array.base
    while isinstance(base, np.ndarray):
        base = base.base
    return base.version if type(base) is _Alias else None


def write_target(view: DataView) -> np.ndarray:
    """The plain array a counted write through ``view`` goes to: its memory, same geometry.

    Writable when the tensor's array is (else numpy's read-only error is
    raised by the write); a :class:`DataView` that views no tensor (a copy)
    is its own memory.
    """
    owner = view._owner
    if owner is None or view._version is None:
        return view.view(np.ndarray)
    return alias(view, view._version, writable=bool(owner.flags.writeable))


class LazyVersion:
    """A tensor's version, plus one if its dask array was rebound since it was saved.

    NOTE: item assignment into a dask array (``t.data[i] = v``) does not go
    through the tensor: dask swaps the array object's graph, so the array's
    key (``name``) is what changes.
    """

    __slots__ = ("version", "array", "name")

    def __init__(self, version: Version, array: Any) -> None:
        self.version = version
        self.array = array
        self.name = array.name

    @property
    def value(self) -> int:
        return self.version.value + (self.array.name != self.name)


def version_check(t: Any) -> tuple[Any, int]:
    """``(counter, value now)`` for a node to check a saved tensor (a Tensor) against later."""
    data = t._data
    counter = t._version  # made on its first read (tensor_counter): read once
    if type(data) is not np.ndarray and is_dask_array(data):
        return LazyVersion(counter, data), counter.value
    return counter, counter.value


class DataView(np.ndarray):
    """What ``Tensor.data`` returns: a plain-looking ndarray view that counts writes.

    Item assignment and ufuncs writing into it (``out=``, ``+=``, ``ufunc.at``)
    bump the owning tensor's version, so a saved value modified after the
    forward is caught by backward instead of giving a silently wrong gradient.

    NOTE: numpy has writers a subclass never sees (``fill``, ``np.copyto``,
    ``.flat[i] = v``, ``np.put``, ``sort``, any C code writing the buffer), so
    the view is read-only for numpy: those raise numpy's ``ValueError`` ("...
    read-only") instead of writing unseen. It is a view of an :func:`alias`,
    so neither it nor its ``.base`` can be made writable; the two writes it
    sees go to a writable alias of the same memory (:func:`write_target`).
    """

    _version: Version | None
    #: The tensor's array this is a view of (whether it may be written at all).
    _owner: np.ndarray | None

    def __array_finalize__(self, obj: Any) -> None:
        # Views (slices, reshapes) share the buffer and the counter; copies
        # (``base is None``) are new memory and must not bump it.
        if isinstance(obj, DataView) and self.base is not None:
            self._version = obj._version
            self._owner = obj._owner
        else:
            self._version = None
            self._owner = None

    def _bump(self) -> None:
        if self._version is not None:
            self._version.value += 1

    def __setitem__(self, key: Any, value: Any) -> None:
        write_target(self)[key] = value
        self._bump()

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if any(hasattr(type(i), "__cbrtgrad_function__") for i in inputs):
            # A Tensor (whatever implements cbrtgrad's dispatch protocol) takes
            # it: NotImplemented lets numpy call Tensor.__array_ufunc__.
            return NotImplemented
        out = kwargs.get("out")
        outs: tuple[Any, ...] = () if out is None else out if isinstance(out, tuple) else (out,)
        # ``ufunc.at(a, indices, b)`` writes into a.
        written = (*outs, inputs[0]) if method == "at" else outs
        targets = {id(o): write_target(o) for o in written if isinstance(o, DataView)}

        def plain(a: Any) -> Any:
            # A written view's target; any other view read as a plain (read-only) array.
            if not isinstance(a, DataView):
                return a
            target = targets.get(id(a))
            return a.view(np.ndarray) if target is None else target

        if outs:
            kwargs["out"] = tuple(plain(o) for o in outs)
        result = getattr(ufunc, method)(*(plain(i) for i in inputs), **kwargs)
        for o in written:
            if isinstance(o, DataView):
                o._bump()
        if method == "at":
            return None
        if outs and method == "__call__":
            return outs[0] if len(outs) == 1 else outs
        return result

    def __repr__(self) -> str:
        return repr(self.view(np.ndarray))

    def __str__(self) -> str:
        return str(self.view(np.ndarray))
