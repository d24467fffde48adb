"""Engine modes (grad recording, anomaly detection, autocast) as context variables.

Context variables, not module globals: each thread and asyncio task sees its
own modes, and nothing here is mutable state shared between callers.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

_grad_enabled: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "cbrtgrad_grad_enabled", default=True
)
_anomaly: contextvars.ContextVar[bool] = contextvars.ContextVar("cbrtgrad_anomaly", default=False)
_autocast: contextvars.ContextVar[bool] = contextvars.ContextVar("cbrtgrad_autocast", default=False)

# Bound methods: the hot path reads them without an attribute lookup.
grad_enabled = _grad_enabled.get
anomaly_enabled = _anomaly.get
autocast_enabled = _autocast.get


@contextlib.contextmanager
def _set(var: contextvars.ContextVar[bool], value: bool) -> Iterator[None]:
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)


def no_grad() -> contextlib.AbstractContextManager[None]:
    """Do not record ops in the graph inside the block (or the decorated function).

    Results of ops inside have ``requires_grad=False``; in-place updates of
    leaves (an optimiser step) are allowed.

    Examples
    --------
    >>> import numpy as np, cbrtgrad as cg
    >>> x = cg.Tensor(np.array([8.0]), requires_grad=True)
    >>> with cg.no_grad():
    ...     y = cg.cbrt(x)
    >>> y.requires_grad, y.grad_fn is None
    (False, True)
    """
    return _set(_grad_enabled, False)


def enable_grad() -> contextlib.AbstractContextManager[None]:
    """Record ops again inside the block, also within :func:`no_grad`.

    Examples
    --------
    >>> import numpy as np, cbrtgrad as cg
    >>> x = cg.Tensor(np.array([8.0]), requires_grad=True)
    >>> with cg.no_grad(), cg.enable_grad():
    ...     cg.cbrt(x).requires_grad
    True
    """
    return _set(_grad_enabled, True)


def detect_anomaly() -> contextlib.AbstractContextManager[None]:
    """Raise ``FloatingPointError`` where backward makes a non-finite gradient.

    Inside the block each node's gradients are checked: a nan or inf produced
    from a finite incoming gradient and finite saved values (such as the
    ``x = 0`` singularity of the cube root) raises ``FloatingPointError``
    naming the node and the first offending index. Outside it backward gives
    IEEE results (``inf``, ``nan``), as JAX does.

    Examples
    --------
    >>> import numpy as np, cbrtgrad as cg
    >>> x = cg.Tensor(np.array([8.0, 0.0]), requires_grad=True)
    >>> with cg.detect_anomaly(), np.errstate(divide="ignore"):
    ...     cg.cbrt(x).sum().backward()
    Traceback (most recent call last):
    ...
    FloatingPointError: cbrtgrad: CubeRootBackward returned a non-finite gradient (inf) for ...
    """
    return _set(_anomaly, True)


def autocast() -> contextlib.AbstractContextManager[None]:
    """Mixed precision: ops whose schema says ``FORCE_FP32`` compute float16 in float32.

    The policy is read from each op's :class:`~cbrtgrad.OpSchema` in one place
    of the engine; the cast is a graph node, so the gradient of a float16 leaf
    is float16 again. Outside the block ``power`` keeps a float16 tensor
    float16; the cube root computes and returns half precision in float32
    everywhere (the one dtype rule of ``cbrtgrad.arrays.dtypes``).

    Examples
    --------
    >>> import numpy as np, cbrtgrad as cg
    >>> x = cg.Tensor(np.array([8.0], dtype=np.float16), requires_grad=True)
    >>> (x ** 2).dtype
    dtype('float16')
    >>> with cg.autocast():
    ...     y = x ** 2
    >>> y.dtype
    dtype('float32')
    """
    return _set(_autocast, True)
