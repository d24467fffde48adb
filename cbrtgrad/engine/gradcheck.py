"""Finite-difference checks of the engine's gradients: ``gradcheck``, ``gradgradcheck``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import grad_mode
from .array_api import StandardArray, raw, wrap
from .graph import grad_of
from .tensor import Tensor

_F64 = np.dtype(np.float64)


class GradcheckError(RuntimeError):
    """An analytic gradient disagrees with finite differences.

    Examples
    --------
    At the cusp of the cube root the analytic gradient is ``inf`` and central
    differences give a large finite slope:

    >>> import numpy as np, cbrtgrad as cg
    >>> with np.errstate(divide="ignore"):
    ...     cg.gradcheck(cg.cbrt, (np.array([0.0]),))
    Traceback (most recent call last):
    ...
    cbrtgrad.engine.gradcheck.GradcheckError: cbrtgrad: gradcheck failed for output 0 element 0 ...
    """


def _as_inputs(inputs: Any) -> list[Tensor]:
    items = inputs if isinstance(inputs, (tuple, list)) else (inputs,)
    tensors = []
    for i, item in enumerate(items):
        array = item._data if isinstance(item, Tensor) else wrap(item)
        if type(array) is not StandardArray:
            array = np.asarray(array)
        if array.dtype != _F64:
            raise TypeError(
                f"cbrtgrad: gradcheck input {i} has dtype {array.dtype}; expected float64 "
                "(finite differences with eps=1e-6 need double precision)"
            )
        # A copy of each input, on its side: device inputs are checked on the device.
        copy = array.copy() if type(array) is StandardArray else np.array(array, copy=True)
        tensors.append(Tensor(copy, requires_grad=True))
    return tensors


def _host(value: Any) -> np.ndarray:
    """Values in float64 on the host, for the Jacobians (gradcheck's explicit copy)."""
    value = wrap(value)
    return value.to_host().astype(_F64) if type(value) is StandardArray else np.array(value, _F64)


def _on_side_of(values: np.ndarray, like: Any) -> Any:
    """Host ``values`` as ``like`` holds its data: on the device when it is a StandardArray."""
    if type(like) is StandardArray:
        return like.from_host(np.ascontiguousarray(values))
    return values


def _outputs(f: Callable[..., Any], args: list[Any]) -> list[Tensor]:
    out = f(*args)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    for k, o in enumerate(outs):
        if not isinstance(o, Tensor):
            raise TypeError(
                f"cbrtgrad: gradcheck: output {k} of f is {type(o).__name__}, not a Tensor"
            )
    return outs


def _check_tolerances(eps: float, atol: float, rtol: float) -> None:
    for name, value in (("eps", eps), ("atol", atol), ("rtol", rtol)):
        if not isinstance(value, (int, float)) or not np.isfinite(value) or value < 0:
            raise ValueError(
                f"cbrtgrad: gradcheck {name} must be a finite number >= 0, got {value!r}"
            )
    if eps == 0:
        raise ValueError("cbrtgrad: gradcheck eps must be > 0")


def gradcheck(
    f: Callable[..., Any],
    inputs: Any,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
) -> bool:
    """Compare the engine's Jacobian of ``f`` with central finite differences.

    Every element of every output is back-propagated (one backward each) and
    every element of every input perturbed by ``±eps``; the check passes where
    ``|analytic - numeric| <= atol + rtol * |numeric|`` everywhere.

    Parameters
    ----------
    f : callable
        Takes Tensors, returns a Tensor or a tuple of Tensors.
    inputs : array_like or tuple of array_like
        float64 points to check at (Tensors or arrays; they are copied).
    eps, atol, rtol : float
        Step and tolerances (PyTorch's defaults).
    raise_exception : bool, default True
        Raise :class:`GradcheckError` on a mismatch (else return False).

    Returns
    -------
    bool
        True when every entry agrees.

    Raises
    ------
    GradcheckError
        Naming the output, input, index and both values, on a mismatch.
    TypeError
        For a non-float64 input.
    ValueError
        For a negative or non-finite tolerance, or ``eps = 0``.

    Examples
    --------
    >>> import numpy as np, cbrtgrad as cg
    >>> cg.gradcheck(lambda x: cg.cbrt(x) * x, (np.array([-8.0, 0.5, 3.0]),))
    True
    """
    _check_tolerances(eps, atol, rtol)
    xs = _as_inputs(inputs)
    with grad_mode.enable_grad():
        outs = _outputs(f, list(xs))
    # Analytic Jacobian, one row per output element.
    analytic = []
    for k, out in enumerate(outs):
        rows = np.zeros((out.size, sum(x.size for x in xs)))
        for j in range(out.size):
            seed = np.zeros(out.shape, _F64 if out.dtype.kind != "f" else out.dtype)
            seed.reshape(-1)[j] = 1.0
            grads = grad_of(out, xs, raw(_on_side_of(seed, out._data)), retain_graph=True)
            rows[j] = np.concatenate([_host(g).reshape(-1) for g in grads])
        analytic.append((k, rows))
    # Numerical Jacobian, one column per input element.
    offset = 0
    for i, x in enumerate(xs):
        on_device = type(x._data) is StandardArray
        flat = _host(x._data).reshape(-1) if on_device else x._data.reshape(-1)
        for m in range(x.size):
            original = flat[m]
            values = []
            for step in (eps, -eps):
                flat[m] = original + step
                if on_device:  # the perturbed point, copied to the device
                    x._data = _on_side_of(flat.reshape(x.shape), x._data)
                with grad_mode.no_grad():
                    values.append([_host(o._data) for o in _outputs(f, list(xs))])
            plus, minus = values
            flat[m] = original
            if on_device:
                x._data = _on_side_of(flat.reshape(x.shape), x._data)
            for (k, rows), p, q in zip(analytic, plus, minus, strict=True):
                numeric = (p - q).reshape(-1) / (2 * eps)
                got = rows[:, offset + m]
                bad = ~(np.abs(got - numeric) <= atol + rtol * np.abs(numeric))
                if bad.any():
                    j = int(np.argmax(bad))
                    if not raise_exception:
                        return False
                    raise GradcheckError(
                        f"cbrtgrad: gradcheck failed for output {k} element {j} with respect to "
                        f"input {i} element {m}: analytic {got[j]!r}, numerical {numeric[j]!r} "
                        f"(atol={atol}, rtol={rtol})"
                    )
        offset += x.size
    return True


def gradgradcheck(
    f: Callable[..., Any],
    inputs: Any,
    grad_outputs: Any = None,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    seed: int = 0,
    raise_exception: bool = True,
) -> bool:
    """Check second derivatives: :func:`gradcheck` of ``f``'s vector-Jacobian product.

    The backward of ``f`` is recorded (``create_graph=True``) and checked
    against finite differences with respect to both the inputs and the
    upstream gradients ``grad_outputs``.

    Parameters
    ----------
    f, inputs
        As for :func:`gradcheck`.
    grad_outputs : array_like or tuple, optional
        Upstream gradients, one per output of ``f`` (default: random normal,
        from ``numpy.random.default_rng(seed)``).
    eps, atol, rtol
        As for :func:`gradcheck`.
    seed : int, default 0
        Seed for the default ``grad_outputs``.
    raise_exception : bool, default True
        As for :func:`gradcheck`.

    Returns
    -------
    bool

    Examples
    --------
    >>> import numpy as np, cbrtgrad as cg
    >>> cg.gradgradcheck(cg.cbrt, (np.array([-8.0, 0.5, 3.0]),))
    True
    """
    xs = _as_inputs(inputs)
    n = len(xs)
    with grad_mode.enable_grad():
        outs = _outputs(f, list(xs))
    if grad_outputs is None:
        rng = np.random.default_rng(seed)
        gos = [raw(_on_side_of(rng.standard_normal(o.shape), o._data)) for o in outs]
    else:
        gos = [raw(t._data) for t in _as_inputs(grad_outputs)]
        if len(gos) != len(outs):
            raise ValueError(
                f"cbrtgrad: gradgradcheck got {len(gos)} grad_outputs for {len(outs)} outputs of f"
            )

    def vjp(*args: Tensor) -> tuple[Tensor, ...]:
        points, upstream = list(args[:n]), list(args[n:])
        results = [Tensor._make(_on_side_of(np.zeros(p.shape), p._data), None) for p in points]
        # Also when gradcheck evaluates this under no_grad for its finite
        # differences: the vjp is a backward, which needs the forward graph.
        with grad_mode.enable_grad():
            for out, go in zip(_outputs(f, points), upstream, strict=True):
                grads = grad_of(out, points, go, create_graph=True)
                results = [r + g for r, g in zip(results, grads, strict=True)]
        return tuple(results)

    return gradcheck(
        vjp,
        (*[raw(x._data) for x in xs], *gos),
        eps=eps,
        atol=atol,
        rtol=rtol,
        raise_exception=raise_exception,
    )
