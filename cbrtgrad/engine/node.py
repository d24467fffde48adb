"""The graph node base class: what every op's ``...Backward`` class shares."""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable
from typing import Any, ClassVar

from .schema import OpSchema, Saves
from .tensor import Tensor

#: The next node's ``sequence_nr``. ``next`` on an ``itertools.count`` is one C
#: call, atomic under the GIL, so threads recording at once never share a number.
next_sequence_nr = itertools.count().__next__


class Node:
    """One recorded op: its edges to the inputs' nodes and the values it saved.

    Subclasses (one per op, in ``cbrtgrad/engine/ops.py``) declare, side by
    side, the class data ``schema`` (an :class:`~cbrtgrad.OpSchema`: name, AMP policy,
    arity, what is saved, ufunc), a static ``forward(backend, *inputs,
    **params)``, optionally ``save`` (shapes and parameters the gradient
    needs), and the one backward, ``vjp(g)``: the vector-Jacobian product,
    written with operators that work on ndarrays and on Tensors alike, so the
    same formula serves the plain backward (``g`` an ndarray) and the
    differentiable one (``create_graph=True``: ``g`` a Tensor).

    Attributes
    ----------
    next_functions : tuple
        Per input: the input's ``Node``, the input itself for a leaf that
        requires grad, or ``None`` (constant, or no grad needed).
    sequence_nr : int
        When the node was recorded: larger than that of every node it points
        to (its inputs existed first), so the backward walk can take nodes in
        decreasing ``sequence_nr`` order as a topological order (as PyTorch's
        engine does) without counting dependencies first.
    saved : tuple
        What ``schema.saves`` says: the inputs, the output's data, or nothing.
    backend : Backend or None
        The backend the forward ran on (``None`` for an op that names none:
        numpy's own arithmetic); the gradient kernels run on it too.
    """

    __slots__ = ("next_functions", "sequence_nr", "saved", "_checks", "backend")

    schema: ClassVar[OpSchema]
    forward: ClassVar[Callable[..., Any]]
    #: The seed's ``kSavesInput`` and ``kSavesOutput``: class data derived from
    #: ``schema.saves`` when the op is defined (the schema is the one source).
    saves_input: ClassVar[bool]
    saves_output: ClassVar[bool]
    #: Whether the class has a ``save`` of its own (recording calls it only then).
    keeps_more: ClassVar[bool] = False

    next_functions: tuple[Any, ...]
    sequence_nr: int
    saved: tuple[Any, ...]
    #: ``(counter, value)`` per saved value; None once released (NOTE: hot
    #: path: the backward walk reads one attribute for both).
    _checks: tuple[tuple[Any, int], ...] | None
    backend: Any

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # The schema's arity is the forward's: checked once, when the op is defined.
        super().__init_subclass__(**kwargs)
        parameters = list(inspect.signature(cls.forward).parameters.values())[1:]  # not backend
        inputs = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in parameters)
        if inputs != cls.schema.arity:
            raise TypeError(
                f"cbrtgrad: {cls.__name__}.forward takes {inputs} inputs; expected "
                f"{cls.schema.arity} (its schema's arity)"
            )
        cls.saves_input = cls.schema.saves is Saves.INPUTS
        cls.saves_output = cls.schema.saves is Saves.OUTPUT
        cls.keeps_more = cls.save is not Node.save

    def save(
        self, inputs: tuple[Any, ...], output: Tensor, backend: Any, params: dict[str, Any]
    ) -> None:
        """Keep shapes or parameters for ``vjp`` (``apply`` saves what ``schema.saves`` says)."""

    def vjp(self, g: Any) -> tuple[Any, ...]:
        """Gradients with respect to each input (``None`` where not needed)."""
        raise NotImplementedError(f"{type(self).__name__} defines no vjp")

    def saved_for(self, g: Any) -> tuple[Any, ...]:
        """The saved values as ``vjp`` uses them: Tensors for a Tensor ``g``, else arrays."""
        if type(g) is Tensor:
            return self.saved
        return self.saved_values()

    def saved_values(self) -> tuple[Any, ...]:
        """The saved arrays (for the plain backward and for anomaly mode)."""
        return tuple(t._data if type(t) is Tensor else t for t in self.saved)

    @property
    def released(self) -> bool:
        """Whether the saved values were freed (by a backward without ``retain_graph``)."""
        return self._checks is None

    def check_versions(self) -> None:
        """Raise if a saved tensor was written in place after the forward."""
        for version, expected in self._checks or ():
            if version.value != expected:
                raise RuntimeError(
                    f"cbrtgrad: a value saved by {type(self).__name__} (op "
                    f"{self.schema.name!r}) was modified in place after the forward: it is at "
                    f"version {version.value}; expected version {expected} instead. "
                    "Do not write into tensors needed for the gradient (or use a copy)."
                )

    def release(self) -> None:
        """Free the saved values (after a backward without ``retain_graph``)."""
        self.saved = ()
        self._checks = None

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"
