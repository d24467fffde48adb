"""The version machinery: how the engine notices a saved value written in place.

Every Tensor has a :class:`Version` counter shared with the views of its data
(:class:`DataView`, what ``Tensor.data`` returns). In-place writes bump it; a
node records ``(counter, value)`` for each tensor it saves
(:func:`version_check`) and the backward compares them
(``Node.check_versions``), so a gradient is never computed from a value that
changed after the forward. A dask array is never written to: a rebound one is
noticed by its key (:class:`LazyVersion`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._array_kinds import is_dask_array


class engine_write:
    """Context for one of the engine's own writes through a ``.data`` view.

    ``Tensor.data`` is read-only for numpy (see :class:`DataView`); the
    writes the view sees (item assignment, ufuncs with ``out=``) make it
    writable for the write, then read-only again, and bump the version.
    A view of an array that is read-only itself stays read-only.
    """

    __slots__ = ("array", "opened")

    def __init__(self, array: Any) -> None:
        self.array = array
        self.opened = False

    def __enter__(self) -> None:
        array = self.array
        if not array.flags.writeable and array._owner is not None and array._owner.flags.writeable:
            array.flags.writeable = True
            self.opened = True

    def __exit__(self, *exc: Any) -> None:
        if self.opened:
            self.array.flags.writeable = False


class Version:
    """A mutable counter shared by a tensor and every view of its data."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0


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
    if type(data) is not np.ndarray and is_dask_array(data):
        return LazyVersion(t._version, data), t._version.value
    return t._version, t._version.value


class DataView(np.ndarray):
    """What ``Tensor.data`` returns: a plain-looking ndarray view that counts writes.

    Item assignment and ufuncs writing into it (``out=``, ``+=``, ``ufunc.at``)
    bump the owning tensor's version, so a saved value modified after the
    forward is caught by backward instead of giving a silently wrong gradient.

    NOTE: numpy has writers a subclass never sees (``fill``, ``np.copyto``,
    ``.flat[i] = v``, ``np.put``, ``sort``, any C code writing the buffer), so
    the view is read-only for numpy: those raise numpy's ``ValueError`` ("...
    read-only") instead of writing unseen. The two writes it sees open it for
    the write (:class:`engine_write`).
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
        with engine_write(self):
            super().__setitem__(key, value)
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
        guards = [engine_write(o) for o in written if isinstance(o, DataView)]
        for guard in guards:
            guard.__enter__()
        try:
            # Plain views, made while the written ones are open.
            plain = tuple(i.view(np.ndarray) if isinstance(i, DataView) else i for i in inputs)
            if outs:
                kwargs["out"] = tuple(
                    o.view(np.ndarray) if isinstance(o, DataView) else o for o in outs
                )
            result = getattr(ufunc, method)(*plain, **kwargs)
        finally:
            for guard in reversed(guards):
                guard.__exit__()
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
