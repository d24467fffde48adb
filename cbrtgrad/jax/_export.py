"""What a program made by ``jax.export`` needs: its safety checks, and its FFI targets registered.

On the CPU, float32 and float64 lower to XLA FFI custom calls named
``cbrtgrad_{forward,grad}_{float32,float64}`` (:mod:`cbrtgrad.jax._ffi`).
``jax.export`` refuses a custom call it does not know to be stable unless the
caller lists it in ``disabled_checks`` (:func:`export_checks`), and a process
that deserializes the program runs it only where those names are registered:
``import cbrtgrad.jax`` registers them when the kernel cache holds the
handlers, :func:`register_ffi_targets` in every case (compiling the missing
ones). Half precision and other platforms take ``jax.pure_callback``, which
no serialized program can carry: exporting them is a ``ValueError``.
"""

from __future__ import annotations

from typing import Any

import jax

from . import _ffi


def export_checks() -> list[Any]:
    """The ``disabled_checks`` ``jax.export.export`` needs for a function that calls cbrtgrad.jax.

    One ``jax.export.DisabledSafetyCheck.custom_call`` per FFI target an
    exported program can name (the one-thread handlers; an export never
    names the threaded ones). Without them ``jax.export`` refuses the
    program ("custom calls whose targets have no compatibility
    guarantees"): the targets are cbrtgrad's, compatible with the same
    cbrtgrad version only, and the process that calls the deserialized
    program must ``import cbrtgrad.jax`` first (docs/jax.md).

    Returns
    -------
    list of jax.export.DisabledSafetyCheck

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> import cbrtgrad.jax as cj
    >>> x = jnp.array([8.0, -27.0], jnp.float32)
    >>> exported = jax.export.export(jax.jit(cj.cbrt), disabled_checks=cj.export_checks())(x)
    >>> blob = exported.serialize()  # bytes, for another process (jax needs flatbuffers)
    >>> jax.export.deserialize(blob).call(x)
    Array([ 2., -3.], dtype=float32)
    """
    return [
        jax.export.DisabledSafetyCheck.custom_call(_ffi.name_of(kernel, dtype, False))
        for kernel, dtype in _ffi.EXPORTED
    ]


def register_ffi_targets() -> tuple[str, ...]:
    """Register with jax every FFI handler an exported program can call, compiling any missing.

    ``import cbrtgrad.jax`` registers those the kernel cache holds (loaded in
    milliseconds; it never compiles). Call this in a process that runs
    exported programs where the cache is cold or off (``CBRTGRAD_CACHE=0``):
    compiling the four handlers takes seconds, once per cache (``cbrtgrad
    warm jax`` fills the cache beforehand instead).

    Returns
    -------
    tuple of str
        The target names registered; empty where the FFI route is refused
        on this machine (:func:`route` says why).

    Examples
    --------
    >>> import cbrtgrad.jax as cj
    >>> for name in cj.register_ffi_targets():
    ...     print(name)
    cbrtgrad_forward_float32
    cbrtgrad_forward_float64
    cbrtgrad_grad_float32
    cbrtgrad_grad_float64
    """
    return _ffi.register_all()
