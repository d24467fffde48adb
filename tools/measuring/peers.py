"""Vectorised peer implementations of the cube root: find, load and call them.

The peers are what cbrtgrad's forward kernel is measured against in
``python tools/measure.py peers``: other vectorised cube roots a user could call
instead, each with its documented accuracy.

- glibc's libmvec, in ``libmvec.so.1`` (glibc 2.35 and later): on AVX2
  hosts ``_ZGVdN4v_cbrt`` (4 doubles) and ``_ZGVdN8v_cbrtf`` (8 floats), on
  AVX-512 hosts ``_ZGVeN8v_cbrt`` and ``_ZGVeN16v_cbrtf`` (:data:`ENTRY_POINTS`).
  glibc documents libmvec as tested to a 4-ulp maximum error; its
  ``libm-test-ulps`` for x86_64 lists 1 and 2 ulp, but those are the largest
  errors on glibc's own fixed test inputs, not bounds (1.48 and 2.74 ulp are
  reached on random inputs).
- SLEEF's ``Sleef_cbrtd4_u10avx2`` and ``Sleef_cbrtf8_u10avx2`` (1.0 ulp),
  or ``Sleef_cbrtd8_u10avx512f`` and ``Sleef_cbrtf16_u10avx512f`` on AVX-512
  hosts, in ``libsleef.so.3`` (Debian ``libsleef3``/``libsleef-dev``).
- ``jax.numpy.cbrt`` on XLA's CPU backend, jitted, where jax is importable
  (the ``bench`` extra); no ulp bound is documented for it.
- ``numpy.cbrt`` where numpy runs Intel's SVML loop for it (x86-64 Linux
  builds, on CPUs with AVX-512 (numpy's ``AVX512_SKX``): the float64 loop is
  SVML's high-accuracy variant, the float32 one its low-accuracy variant);
  elsewhere ``np.cbrt`` is the platform's scalar libm, no vectorised peer,
  and absent. numpy documents no ulp bound for it.

libmvec and SLEEF are called through numba, on whole vector registers
(:mod:`tools.measuring.vector_abi`); on hosts without AVX2 they are absent.

This module is imported only by :mod:`tools.measuring.peer_table` when it measures
the peers (``python tools/measure.py peers``), never by ``import cbrtgrad``.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import platform
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cbrtgrad.build.isa import host_isa

from . import vector_abi

#: Shared libraries to try, in order, by what ``dlopen`` accepts.
LIBMVEC = ("libmvec.so.1",)
LIBSLEEF = ("libsleef.so.3", "libsleef.so")
SLEEF_HINT = "Debian and Ubuntu: apt-get install libsleef3"

#: The vector entry points called on each x86 vector ISA, per library and
#: dtype: (symbol, lanes). An AVX-512 host gets the 512-bit ones, which a
#: user there would call.
ENTRY_POINTS: dict[tuple[str, str, str], tuple[str, int]] = {
    ("AVX2", "libmvec", "float64"): ("_ZGVdN4v_cbrt", 4),
    ("AVX2", "libmvec", "float32"): ("_ZGVdN8v_cbrtf", 8),
    ("AVX2", "sleef", "float64"): ("Sleef_cbrtd4_u10avx2", 4),
    ("AVX2", "sleef", "float32"): ("Sleef_cbrtf8_u10avx2", 8),
    ("AVX-512", "libmvec", "float64"): ("_ZGVeN8v_cbrt", 8),
    ("AVX-512", "libmvec", "float32"): ("_ZGVeN16v_cbrtf", 16),
    ("AVX-512", "sleef", "float64"): ("Sleef_cbrtd8_u10avx512f", 8),
    ("AVX-512", "sleef", "float32"): ("Sleef_cbrtf16_u10avx512f", 16),
}


class PeerUnavailable(RuntimeError):
    """Raised by the ``f`` of a peer that is absent on this machine."""


@dataclass(frozen=True)
class Peer:
    """One peer implementation of the cube root for one dtype.

    Attributes
    ----------
    name : str
        Short name (``"glibc libmvec"``, ``"SLEEF u10"``, ``"jax"``).
    dtype : numpy.dtype
        The one dtype ``f`` takes.
    library : str
        The shared library (or Python package) it comes from.
    symbol : str
        The function's symbol (or Python name).
    ulp_bound : float or None
        The documented maximum error in ulp; None where none is published.
        (Measured on the same inputs as ours, the error is a column of the
        ``peers`` table.)
    available : bool
        Whether it loads and runs on this machine.
    reason : str
        Why it is absent (empty when available).
    f : callable
        ``f(x, out)`` writes the cube root of the contiguous array ``x`` into
        ``out`` (same shape and dtype); raises :class:`PeerUnavailable` when
        the peer is absent.
    prepare : callable, optional
        ``prepare(x, out)`` returns the zero-argument call to time. By default
        that is ``f(x, out)``; jax's moves ``x`` onto its device once here, so
        that the timed call does not copy it.
    threads : callable, optional
        ``threads(x)``: how many threads the call on ``x`` runs on; 1 where
        not given (the libmvec and SLEEF loops are single-threaded).
    """

    name: str
    dtype: np.dtype
    library: str
    symbol: str
    ulp_bound: float | None
    available: bool
    reason: str
    f: Callable[[np.ndarray, np.ndarray], None]
    prepare: Callable[[np.ndarray, np.ndarray], Callable[[], Any]] | None = field(
        default=None, repr=False
    )
    threads: Callable[[np.ndarray], int] | None = field(default=None, repr=False)

    @property
    def label(self) -> str:
        """``name`` and ``symbol`` in one string, for table rows.

        Examples
        --------
        >>> all(p.symbol in p.label for p in find_peers())
        True
        """
        if self.symbol.startswith(self.name):
            return self.symbol
        return f"{self.name} {self.symbol}"

    def timed_call(self, x: np.ndarray, out: np.ndarray) -> Callable[[], Any]:
        """The zero-argument call to time on ``x`` (see ``prepare``).

        Examples
        --------
        >>> p = find_peers(np.float64)[0]
        >>> callable(p.timed_call(np.ones(4), np.empty(4)))
        True
        """
        if self.prepare is not None:
            return self.prepare(x, out)
        return functools.partial(self.f, x, out)

    def threads_on(self, x: np.ndarray) -> int:
        """How many threads the call on ``x`` runs on (see ``threads``).

        Examples
        --------
        >>> find_peers(np.float32)[0].threads_on(np.ones(8, np.float32))
        1
        """
        return 1 if self.threads is None else self.threads(x)


def _absent_call(reason: str) -> Callable[[np.ndarray, np.ndarray], None]:
    def f(x: np.ndarray, out: np.ndarray) -> None:
        raise PeerUnavailable(reason)

    return f


def _check_arrays(x: np.ndarray, out: np.ndarray, dtype: np.dtype) -> None:
    for name, a in (("x", x), ("out", out)):
        if not isinstance(a, np.ndarray) or a.dtype != dtype:
            raise TypeError(f"tools.measuring.peers: {name} must be a {dtype} ndarray")
        if not a.flags.c_contiguous:
            raise ValueError(f"tools.measuring.peers: {name} must be C-contiguous")
    if x.shape != out.shape:
        raise ValueError(f"tools.measuring.peers: shapes differ: {x.shape} and {out.shape}")


def _vector_peer(
    name: str,
    candidates: tuple[str, ...],
    symbol: str,
    lanes: int,
    dtype: np.dtype,
    ulp_bound: float,
    needs_fma: bool,
    hint: str = "",
) -> Peer:
    isa = host_isa()
    library = candidates[0]
    reason = ""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        reason = f"x86-64 only (this is {platform.machine()})"
    elif isa.name not in ("AVX2", "AVX-512"):
        reason = f"needs AVX2, host has {isa.name}"
    elif needs_fma and not isa.fma:
        reason = "needs FMA, host has none"
    else:
        loaded, error = vector_abi.load(candidates)
        if not loaded:
            # llvmlite's message names the library (dlopen's own error).
            reason = f"cannot load {error}" + (f" ({hint})" if hint else "")
        else:
            import llvmlite.binding as llvm

            library = loaded
            if llvm.address_of_symbol(symbol) is None:
                reason = f"{loaded} has no {symbol}"
    if reason:
        return Peer(name, dtype, library, symbol, ulp_bound, False, reason, _absent_call(reason))
    kernel = vector_abi.vector_kernel(symbol, lanes, dtype)

    def f(x: np.ndarray, out: np.ndarray) -> None:
        _check_arrays(x, out, dtype)
        kernel(x.reshape(-1), out.reshape(-1))

    return Peer(name, dtype, library, symbol, ulp_bound, True, "", f)


# -- jax ------------------------------------------------------------------------------


def _jax_peer(dtype: np.dtype) -> Peer:
    name, library, symbol = "jax", "jax", "jax.numpy.cbrt"
    if importlib.util.find_spec("jax") is None:
        reason = "jax is not installed (pip install 'cbrtgrad[bench]')"
        return Peer(name, dtype, library, symbol, None, False, reason, _absent_call(reason))
    try:
        import jax
        import jax.numpy as jnp

        cpu = jax.devices("cpu")[0]
    except Exception as exc:  # noqa: BLE001 - any failure to start jax makes it absent
        reason = f"jax does not start: {type(exc).__name__}: {exc}"
        return Peer(name, dtype, library, symbol, None, False, reason, _absent_call(reason))
    library = f"jax {jax.__version__}"
    jitted = jax.jit(jnp.cbrt)
    # jax.enable_x64 (a context manager) replaced jax.experimental.enable_x64.
    enable_x64: Callable[[bool], Any] | None = getattr(jax, "enable_x64", None)
    if enable_x64 is None:
        enable_x64 = importlib.import_module("jax.experimental").enable_x64
    # NOTE: without x64 jax silently turns float64 arrays into float32. The
    # context manager enables it for our transfers and calls only, leaving
    # the process's jax configuration as it was.
    x64 = dtype == np.float64

    def to_device(x: np.ndarray) -> Any:
        with enable_x64(x64):
            return jax.device_put(x, cpu)

    def f(x: np.ndarray, out: np.ndarray) -> None:
        _check_arrays(x, out, dtype)
        with enable_x64(x64):
            out[...] = np.asarray(jitted(to_device(x)))

    def prepare(x: np.ndarray, out: np.ndarray) -> Callable[[], Any]:
        _check_arrays(x, out, dtype)
        on_device = to_device(x)

        def call() -> Any:
            with enable_x64(x64):
                return jitted(on_device).block_until_ready()

        return call

    def threads(x: np.ndarray) -> int:
        # NOTE: XLA's CPU compiler splits a large elementwise loop into
        # parallel tasks on its own thread pool (one per core): jax's figure is
        # not single-threaded like the others. The split is in the compiled HLO.
        with enable_x64(x64):
            text = jitted.lower(to_device(x)).compile().as_text() or ""
        split = re.search(r'"outer_dimension_partitions":\[([^\]]*)\]', text)
        if split is None:
            return 1
        return math.prod(int(p.strip('" ')) for p in split.group(1).split(",") if p.strip())

    return Peer(name, dtype, library, symbol, None, True, "", f, prepare, threads)


# -- numpy's SVML loop ---------------------------------------------------------------


def numpy_uses_svml() -> tuple[bool, str]:
    """Whether ``np.cbrt`` runs Intel's SVML loop here, and why not if it does not.

    numpy's x86-64 Linux builds carry SVML and dispatch to it at run time on
    CPUs with its ``AVX512_SKX`` feature group; everywhere else ``np.cbrt``
    calls the platform's scalar libm.

    Examples
    --------
    >>> uses, why = numpy_uses_svml()
    >>> uses == (why == "")
    True
    """
    from numpy._core._multiarray_umath import __cpu_features__ as features

    if platform.machine().lower() not in ("x86_64", "amd64") or not sys.platform.startswith(
        "linux"
    ):
        return (
            False,
            f"numpy has SVML on x86-64 Linux only (this is {sys.platform}, {platform.machine()})",
        )
    if not features.get("AVX512_SKX", False):
        return False, "np.cbrt is scalar libm here: numpy runs SVML only on AVX-512 (AVX512_SKX)"
    return True, ""


def _numpy_peer(dtype: np.dtype) -> Peer:
    name, library, symbol = "numpy", f"numpy {np.__version__}", "np.cbrt"
    uses, reason = numpy_uses_svml()
    if not uses:
        return Peer(name, dtype, library, symbol, None, False, reason, _absent_call(reason))

    def f(x: np.ndarray, out: np.ndarray) -> None:
        _check_arrays(x, out, dtype)
        np.cbrt(x, out=out)

    return Peer(name, dtype, f"{library} (Intel SVML)", symbol, None, True, "", f)


# -- the list -------------------------------------------------------------------------


def _entry_point(library: str, dtype: np.dtype) -> tuple[str, int]:
    # The host's ISA picks the variant; hosts without AVX2 keep the AVX2
    # names, for the reason their absent rows give.
    isa = "AVX-512" if host_isa().name == "AVX-512" else "AVX2"
    return ENTRY_POINTS[(isa, library, str(dtype))]


@functools.cache
def _peers_of(dtype: np.dtype) -> tuple[Peer, ...]:
    mvec, mvec_lanes = _entry_point("libmvec", dtype)
    sleef, sleef_lanes = _entry_point("sleef", dtype)
    return (
        _vector_peer("glibc libmvec", LIBMVEC, mvec, mvec_lanes, dtype, 4.0, False),
        _vector_peer("SLEEF u10", LIBSLEEF, sleef, sleef_lanes, dtype, 1.0, True, SLEEF_HINT),
        _jax_peer(dtype),
        _numpy_peer(dtype),
    )


def find_peers(*dtypes: Any) -> list[Peer]:
    """Every peer for each dtype (default float32 and float64), available or not.

    Probing loads the shared libraries into the process and imports jax if
    it is installed; the numba kernels compile on their first call.

    Parameters
    ----------
    *dtypes : dtype-like
        float32 and/or float64; none means both.

    Returns
    -------
    list of Peer
        In a fixed order per dtype: libmvec, SLEEF, jax, numpy. Absent peers
        are in the list too, with ``available`` False and the ``reason``.

    Raises
    ------
    TypeError
        For a dtype other than float32 or float64.

    Examples
    --------
    >>> import numpy as np
    >>> [p.name for p in find_peers(np.float64)]
    ['glibc libmvec', 'SLEEF u10', 'jax', 'numpy']
    >>> all(p.available == (p.reason == "") for p in find_peers())
    True
    >>> x = np.array([8.0, -27.0, 0.125])
    >>> for p in find_peers(np.float64):
    ...     out = np.empty_like(x)
    ...     if p.available:
    ...         p.f(x, out)
    ...         assert np.allclose(out, [2.0, -3.0, 0.5])
    """
    wanted = [np.dtype(d) for d in dtypes] or [np.dtype(np.float32), np.dtype(np.float64)]
    found: list[Peer] = []
    for dtype in wanted:
        if dtype not in (np.float32, np.float64):
            raise TypeError(f"tools.measuring.peers: float32 or float64 only, got {dtype}")
        found += _peers_of(dtype)
    return found
