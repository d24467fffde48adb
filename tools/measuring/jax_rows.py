"""``python tools/measure.py jax``: cbrtgrad.jax against ``jnp.cbrt``, jitted.

The rows have the layout of :func:`cbrtgrad.cli.bench.engine.engine_rows`
(``ratio`` is cbrtgrad's time over the anchor's: below 1 is faster), each
pair timed in turns (:func:`~cbrtgrad.cli.bench.timing.best_times`) so that a
ratio comes from the same stretches of a shared machine:

* ``jax.jit(jax.grad(lambda x: cbrtgrad.jax.cbrt(x).sum()))`` against the
  same with ``jnp.cbrt``, on 10^6 float32 and on one element;
* the forward alone through each CPU route (the XLA FFI handler and
  ``jax.pure_callback``) against ``jax.jit(jnp.cbrt)``, on one element (the
  per-call cost of the route) and on 10^6.

jax is imported when the rows are made, never by ``import cbrtgrad``; without
jax there are no rows, and :func:`absent` says why.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import numpy as np

from cbrtgrad.cli.bench.timing import best_times

LARGE = 1_000_000


def _blocking(f: Any, x: Any) -> Callable[[], Any]:
    # One call, waited for (jax dispatches asynchronously).
    return lambda: f(x).block_until_ready()


def absent() -> str | None:
    """Why there are no JAX rows (jax is not installed), or None.

    Examples
    --------
    >>> absent() is None or "cbrtgrad[jax]" in absent()
    True
    """
    if importlib.util.find_spec("jax") is None:
        return "jax is not installed (pip install 'cbrtgrad[jax]')"
    return None


def jax_rows(repeat: int = 20) -> list[dict[str, Any]]:
    """Time cbrtgrad.jax against ``jnp.cbrt`` (see the module's docstring).

    Parameters
    ----------
    repeat : int, default 20
        Rounds; the best time of each function is reported.

    Returns
    -------
    list of dict
        ``{"case", "cbrtgrad_s", "anchor", "anchor_s", "ratio"}`` per case;
        empty without jax.

    Examples
    --------
    >>> rows = jax_rows(repeat=1)
    >>> all(sorted(r) == ['anchor', 'anchor_s', 'case', 'cbrtgrad_s', 'ratio'] for r in rows)
    True
    """
    if not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"cbrtgrad: repeat must be an int >= 1, got {repeat!r}")
    if absent() is not None:
        return []
    import jax
    import jax.numpy as jnp

    from cbrtgrad import jax as cj
    from cbrtgrad.jax._primitives import cbrt_p

    big = jnp.asarray(np.random.default_rng(0).standard_normal(LARGE).astype(np.float32))
    one = jnp.ones(1, jnp.float32)
    ours = jax.jit(jax.grad(lambda v: cj.cbrt(v).sum()))
    theirs = jax.jit(jax.grad(lambda v: jnp.cbrt(v).sum()))
    ffi = jax.jit(lambda v: cbrt_p.bind(v, route="auto"))
    callback = jax.jit(lambda v: cbrt_p.bind(v, route="callback"))
    forward = jax.jit(jnp.cbrt)
    anchor_grad = "jax.jit(jax.grad(jnp.cbrt(x).sum()))"
    anchor_forward = "jax.jit(jnp.cbrt)"
    cases = [
        ("jax.jit(jax.grad(cbrt(x).sum())), 1e6 float32", ours, theirs, big, anchor_grad),
        ("jax.jit(jax.grad(cbrt(x).sum())), 1 element float32", ours, theirs, one, anchor_grad),
        ("jax.jit(cbrt), 1 element float32, FFI route", ffi, forward, one, anchor_forward),
        ("jax.jit(cbrt), 1 element float32, pure_callback route", callback, forward, one,
         anchor_forward),
        ("jax.jit(cbrt), 1e6 float32, FFI route", ffi, forward, big, anchor_forward),
        ("jax.jit(cbrt), 1e6 float32, pure_callback route", callback, forward, big,
         anchor_forward),
    ]  # fmt: skip
    rows = []
    for case, mine, anchor, x, anchor_name in cases:
        t, t_anchor = best_times([_blocking(mine, x), _blocking(anchor, x)], repeat)
        rows.append(
            {
                "case": f"cbrtgrad.jax {case}",
                "cbrtgrad_s": t,
                "anchor": anchor_name,
                "anchor_s": t_anchor,
                "ratio": t / t_anchor,
            }
        )
    return rows
