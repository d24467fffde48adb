"""The two JAX primitives: ``cbrtgrad_cbrt`` (``y = cbrt(x)``) and ``cbrtgrad_cbrt_grad``.

Why primitives: a ``custom_jvp`` whose tangent is a ``jax.pure_callback``
cannot be transposed ("Pure callbacks do not support transpose"), so
``jax.grad`` fails; and ``t * cbrt_grad(1, y)`` transposes but rounds twice
(1,084 of 4,096 random cotangents differ from ``cbrt_grad(ct, y)``). The
gradient ``g / (3 y^2)`` is linear in ``g``, so it is a primitive with its own
transpose rule, the same kernel on the cotangent: ``vjp``'s result is
``cbrt_grad(ct, y)``, one rounding. ``jax.custom_transpose`` is not public in
jax 0.10.2, hence ``jax.extend.core.Primitive``.

Each primitive has

* an abstract evaluation (same shape and dtype; the gradient's operands are
  made alike by :mod:`cbrtgrad.jax._operands` first),
* lowerings: on the CPU the XLA FFI handler for float32 and float64
  (:mod:`cbrtgrad.jax._ffi`), else, and on every other platform, a
  ``jax.pure_callback`` to cbrtgrad's api (:mod:`cbrtgrad.jax._callback`);
  for ``jax.export``, always the one-thread handler, and a ``ValueError``
  where the route is the callback (no serialized program can carry one),
* an eager implementation: ``jax.jit`` of itself, one compiled op as jax's
  own primitives run eagerly (with jit on for that call under
  ``jax.disable_jit()``, where ``jax.jit(bind)`` would call ``bind`` again),
  except for arrays on a GPU, which go to the cuda backend through DLPack
  where CuPy is installed (:mod:`cbrtgrad.jax._gpu`),
* a batching rule (element-wise: the batch axes are moved to the front),

and the gradient primitive has a JVP rule (``d/dg`` is the kernel again,
``d/dy = -2 out / y``: second and higher derivatives) and a transpose rule in
``g``. The ``route`` parameter is ``"auto"`` (the above) or ``"callback"``
(the ``pure_callback`` route everywhere: what the bench compares).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from .. import _config
from . import _callback, _ffi, _gpu

cbrt_p = Primitive("cbrtgrad_cbrt")
cbrt_grad_p = Primitive("cbrtgrad_cbrt_grad")
ROUTES = ("auto", "callback")


# -- abstract evaluation ------------------------------------------------------------


def _cbrt_abstract(x: Any, *, route: str) -> Any:
    return x  # element-wise: the input's shape, dtype and weak type


def _grad_abstract(g: Any, y: Any, *, route: str) -> Any:
    # NOTE: the public cbrt_grad promotes and broadcasts first; this is the
    # primitive's own contract, checked for any other caller.
    if g.shape != y.shape or g.dtype != y.dtype:
        raise ValueError(
            f"cbrtgrad_cbrt_grad: g ({g.dtype}{list(g.shape)}) and y ({y.dtype}{list(y.shape)}) "
            "must have one shape and dtype"
        )
    return y.update(weak_type=g.weak_type and y.weak_type)


cbrt_p.def_abstract_eval(_cbrt_abstract)
cbrt_grad_p.def_abstract_eval(_grad_abstract)


# -- lowering -----------------------------------------------------------------------

_HOST: dict[str, Callable[..., Any]] = {"forward": _callback.forward, "grad": _callback.gradient}


def _for_export(ctx: Any) -> bool:
    # Whether this lowering is jax.export's (which sets it; plain jit does not).
    parameters = getattr(ctx.module_context, "lowering_parameters", None)
    return bool(getattr(parameters, "for_export", False))


def _not_exportable(kernel: str, dtype: np.dtype, why: str) -> ValueError:
    # NOTE: a pure_callback calls a Python function of this process, which no
    # serialized program can carry (jax refuses it too, later and without
    # saying which function: "serialization of host_callbacks is not yet
    # implemented").
    return ValueError(
        f"cbrtgrad.jax: the {kernel} kernel on {dtype} cannot be exported: {why}, it runs "
        "through jax.pure_callback, which jax.export cannot serialize; only float32 and "
        "float64 on the CPU's FFI route export (docs/jax.md)"
    )


def _callback_lowering(kernel: str, cpu: bool) -> Any:
    """The pure_callback lowering of one kernel (any platform, any dtype)."""

    def call(*args: Any, route: str) -> Any:
        result = jax.ShapeDtypeStruct(args[-1].shape, args[-1].dtype)
        return jax.pure_callback(_HOST[kernel], result, *args, vmap_method="expand_dims")

    lowered = mlir.lower_fun(call, multiple_results=False)

    def lower(ctx: Any, *args: Any, route: str) -> Any:
        if _for_export(ctx):
            dtype = np.dtype(ctx.avals_in[-1].dtype)
            if dtype.itemsize == 2:
                why = "in half precision"
            elif not cpu:
                why = "on a platform other than the CPU"
            elif route == "callback":
                why = "with route='callback'"
            else:
                why = f"where the FFI route is refused ({_ffi.problem()})"
            raise _not_exportable(kernel, dtype, why)
        return lowered(ctx, *args, route=route)

    return lower


def _cpu(kernel: str) -> Any:
    """The CPU lowering: the FFI handler for float32/float64, else the callback."""
    callback = _callback_lowering(kernel, cpu=True)

    def lower(ctx: Any, *args: Any, route: str) -> Any:
        aval = ctx.avals_in[-1]
        if route == "auto":
            # NOTE: one thread unless asked (CBRTGRAD_JAX_PARALLEL_MIN): on a busy
            # machine numba's threads and XLA's thread pool compete (docs/jax.md).
            # An exported program always names the one-thread handlers: that
            # setting belongs to the exporting process, and the loading one
            # registers the one-thread handlers at import (_ffi.register_cached).
            threshold = _config.settings().jax_parallel_min_size
            threaded = threshold is not None and aval.size >= threshold and not _for_export(ctx)
            name = _ffi.target(kernel, aval.dtype, threaded)
            if name is not None:
                return jax.ffi.ffi_lowering(name)(ctx, *args)
        return callback(ctx, *args, route=route)

    return lower


for _primitive, _kernel in ((cbrt_p, "forward"), (cbrt_grad_p, "grad")):
    mlir.register_lowering(_primitive, _callback_lowering(_kernel, cpu=False))
    mlir.register_lowering(_primitive, _cpu(_kernel), platform="cpu")


# -- eager evaluation -----------------------------------------------------------------

_JITTED: dict[tuple[Any, str], Any] = {}


def _impl(primitive: Primitive, kernel: str, *args: Any, route: str) -> Any:
    if route == "auto":
        result = _gpu.eager(kernel, *args)  # None unless the arrays are on a GPU
        if result is not None:
            return result
    jitted = _JITTED.get((primitive, route))
    if jitted is None:
        jitted = _JITTED.setdefault(
            (primitive, route), jax.jit(partial(primitive.bind, route=route))
        )
    # (jax's documented way to read a flag that has a context manager; untyped)
    if jax.config.jax_disable_jit:  # type: ignore[attr-defined]
        # NOTE: under jax.disable_jit(), jax.jit(f) calls f itself: bind would
        # come back here for ever. An eager primitive is one compiled op even
        # there ("individual primitive operations will still be compiled", as
        # jax's own apply_primitive does for jnp.sin), so jit is on for this
        # call only; the caller's setting is back for whatever comes after.
        with jax.disable_jit(False):
            return jitted(*args)
    return jitted(*args)


cbrt_p.def_impl(partial(_impl, cbrt_p, "forward"))
cbrt_grad_p.def_impl(partial(_impl, cbrt_grad_p, "grad"))


# -- batching -------------------------------------------------------------------------


def _at_front(value: Any, axis: Any, size: int) -> Any:
    # The batch axis first; an unbatched operand broadcast along it.
    if axis is None:
        return jnp.broadcast_to(value, (size, *np.shape(value)))
    return jnp.moveaxis(value, axis, 0)


def _cbrt_batch(args: Any, axes: Any, *, route: str) -> Any:
    (x,), (axis,) = args, axes
    return cbrt_p.bind(x, route=route), axis  # element-wise: the axis stays where it is


def _grad_batch(args: Any, axes: Any, *, route: str) -> Any:
    g, y = args
    if axes[0] == axes[1]:
        return cbrt_grad_p.bind(g, y, route=route), axes[0]
    size = next(a.shape[d] for a, d in zip(args, axes, strict=True) if d is not None)
    g, y = (_at_front(a, d, size) for a, d in zip(args, axes, strict=True))
    return cbrt_grad_p.bind(g, y, route=route), 0


batching.primitive_batchers[cbrt_p] = _cbrt_batch
batching.primitive_batchers[cbrt_grad_p] = _grad_batch


# -- differentiation of the gradient ----------------------------------------------------


def _grad_jvp(primals: Any, tangents: Any, *, route: str) -> Any:
    g, y = primals
    dg, dy = tangents
    out = cbrt_grad_p.bind(g, y, route=route)
    parts = []
    if type(dg) is not ad.Zero:
        # Linear in g: the kernel itself, with cbrtgrad's rounding.
        parts.append(cbrt_grad_p.bind(dg, y, route=route))
    if type(dy) is not ad.Zero:
        # d/dy g / (3 y^2) = -2 g / (3 y^3) = -2 out / y (as the engine's CubeRootGradBackward).
        parts.append(dy * (-2 * out / y))
    if not parts:
        return out, jnp.zeros_like(out)
    return out, parts[0] if len(parts) == 1 else parts[0] + parts[1]


def _grad_transpose(ct: Any, g: Any, y: Any, *, route: str) -> Any:
    # Linear in g only: y is a primal (a residual) wherever JAX transposes this.
    if ad.is_undefined_primal(y):
        raise ValueError("cbrtgrad_cbrt_grad is not linear in y: it cannot be transposed in y")
    if type(ct) is ad.Zero:
        return ad.Zero(g.aval), None
    return cbrt_grad_p.bind(ct, y, route=route), None


ad.primitive_jvps[cbrt_grad_p] = _grad_jvp
ad.primitive_transposes[cbrt_grad_p] = _grad_transpose
