"""Environment flags, read in this one module.

=============================  ====================================================
``CBRTGRAD_BACKEND``           backend name used when no ``backend=`` is given
                               (default ``auto``: see :mod:`cbrtgrad.backends`)
``CBRTGRAD_FASTMATH``          ``1`` compiles the CPU kernels with LLVM fast-math
                               (experiments only: breaks correct rounding)
``CBRTGRAD_ACCELERATE``        path of the library that provides ``vvcbrtf`` and
                               ``vvcbrt`` (default: Apple's Accelerate framework)
``CBRTGRAD_PARALLEL_MIN``      smallest array size that the automatic choice sends
                               to the parallel backend (default 1_000_000)
``CBRTGRAD_JAX_PARALLEL_MIN``  smallest array size that :mod:`cbrtgrad.jax` runs on
                               numba's threads inside ``jax.jit`` (default: none,
                               one thread: XLA's own thread pool competes with
                               numba's, docs/jax.md)
``CBRTGRAD_MLX_PARALLEL_MIN``  smallest array size that :mod:`cbrtgrad.mlx`'s
                               primitives run on numba's threads (default: the
                               api's rule, ``CBRTGRAD_PARALLEL_MIN`` under the
                               automatic choice, every size where
                               ``CBRTGRAD_BACKEND`` or a ``use_backend`` block
                               names ``parallel``, none where they name another
                               backend; a size above any array keeps one
                               thread; docs/mlx.md)
``CBRTGRAD_VECTOR_WIDTH``      SIMD width in bits that the CPU kernels' loops prefer:
                               ``512`` (default; LLVM keeps it at the widest the CPU
                               has) or ``256`` (numba's own default, for CPUs that
                               slow their clock on 512-bit instructions)
``CBRTGRAD_CACHE``             ``0`` turns the on-disk cache of compiled kernels
                               off (default ``1``: on; see :mod:`cbrtgrad.build.cache`)
``CBRTGRAD_CACHE_DIR``         where that cache lives (default: ``NUMBA_CACHE_DIR``
                               plus ``/cbrtgrad`` when numba's variable is set,
                               else the user's cache folder plus ``/cbrtgrad``)
``NUMBA_CACHE_DIR``            numba's own cache folder, honoured as above
=============================  ====================================================
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

ACCELERATE_DEFAULT = "/System/Library/Frameworks/Accelerate.framework/Accelerate"


@dataclass(frozen=True)
class Settings:
    """The environment flags, parsed once."""

    backend: str
    fastmath: bool
    accelerate_path: str
    parallel_min_size: int
    vector_width: int
    cache: bool = True
    cache_dir: str = ""
    numba_cache_dir: str = ""
    jax_parallel_min_size: int | None = None
    mlx_parallel_min_size: int | None = None


def _parse_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"environment variable {name} must be an integer, got {raw!r}") from None
    if value < 0:
        raise ValueError(f"environment variable {name} must be >= 0, got {value}")
    return value


def _parse_switch(name: str, default: bool) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    if raw == "":
        return default
    if raw in ("0", "false", "no", "off"):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    raise ValueError(f"environment variable {name} must be 0 or 1, got {raw!r}")


def _parse_choice(name: str, default: int, choices: tuple[int, ...]) -> int:
    value = _parse_int(name, default)
    if value not in choices:
        allowed = " or ".join(str(c) for c in choices)
        raise ValueError(f"environment variable {name} must be {allowed}, got {value}")
    return value


def _read() -> Settings:
    # The environment, parsed (settings() keeps it).
    return Settings(
        backend=os.environ.get("CBRTGRAD_BACKEND", "auto").strip().lower() or "auto",
        fastmath=os.environ.get("CBRTGRAD_FASTMATH", "0").strip() not in ("", "0", "false", "no"),
        accelerate_path=os.environ.get("CBRTGRAD_ACCELERATE", ACCELERATE_DEFAULT),
        parallel_min_size=_parse_int("CBRTGRAD_PARALLEL_MIN", 1_000_000),
        vector_width=_parse_choice("CBRTGRAD_VECTOR_WIDTH", 512, (256, 512)),
        cache=_parse_switch("CBRTGRAD_CACHE", True),
        cache_dir=os.environ.get("CBRTGRAD_CACHE_DIR", "").strip(),
        numba_cache_dir=os.environ.get("NUMBA_CACHE_DIR", "").strip(),
        jax_parallel_min_size=(
            _parse_int("CBRTGRAD_JAX_PARALLEL_MIN", 0)
            if os.environ.get("CBRTGRAD_JAX_PARALLEL_MIN", "").strip()
            else None
        ),
        mlx_parallel_min_size=(
            _parse_int("CBRTGRAD_MLX_PARALLEL_MIN", 0)
            if os.environ.get("CBRTGRAD_MLX_PARALLEL_MIN", "").strip()
            else None
        ),
    )


class _Kept:
    """``settings()``: the environment read once; ``settings.cache_clear()`` reads it again.

    NOTE: not an ``lru_cache``: what the api's hot path keeps from the
    settings (:func:`cbrtgrad.backends.host.keep_choice`) is dropped here, by the
    hooks given to :meth:`on_clear`, when they change, instead of being
    compared with ``settings()`` on every call.

    Examples
    --------
    >>> isinstance(settings().backend, str)
    True
    >>> settings() is settings()
    True
    """

    __slots__ = ("_hooks", "_value")

    def __init__(self) -> None:
        self._value: Settings | None = None
        self._hooks: list[Callable[[], None]] = []

    def __call__(self) -> Settings:
        """The parsed settings (the environment is read at the first call after a clear)."""
        value = self._value
        if value is None:
            value = self._value = _read()
        return value

    def cache_clear(self) -> None:
        """Read the environment again at the next call (tests do, after changing it)."""
        self._value = None
        for hook in self._hooks:
            hook()

    def on_clear(self, hook: Callable[[], None]) -> None:
        """Call ``hook()`` at every :meth:`cache_clear` (what it keeps from the settings is old)."""
        self._hooks.append(hook)


#: Read the environment once and return the parsed :class:`Settings`; call
#: ``settings.cache_clear()`` after changing the environment (tests do).
settings = _Kept()
