"""The automatic choice of backend: one table of rules that both chooses and describes itself.

Each :class:`Rule` says which inputs it takes (as a test and in words), the
backend it gives them, and what happens where that backend cannot run: the
call fails (``cuda`` for device arrays: there is nowhere else to compute
them) or the next rule decides (``accelerate``, an optional speed-up).
:func:`auto_choice` runs the table; :func:`describe_auto_choice` prints it
with what each backend says about this machine (``cbrtgrad info``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from .. import _config
from ..arrays.kinds import is_device_array
from ._catalog import AUTO, availability, get_backend, instance
from ._protocol import Backend


class Rule(NamedTuple):
    """One rule of the automatic choice.

    Attributes
    ----------
    backend : str
        The registry name the rule gives.
    takes : callable or None
        ``takes(x)``: whether the rule applies to a call's first input ``x``
        (``None``: to every input, the last rule).
    inputs : callable
        ``inputs()``: the inputs it takes, in words (it may read the settings).
    fallible : bool
        True: where the backend cannot run, the next rule decides; False:
        the call fails saying why.
    platform : str or None
        The ``sys.platform`` the rule is considered on (``None``: everywhere).
    """

    backend: str
    takes: Callable[[Any], bool] | None
    inputs: Callable[[], str]
    fallible: bool = False
    platform: str | None = None


_ACCELERATE_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _device(x: Any) -> bool:
    return type(x) is not np.ndarray and is_device_array(x)


def _numpy_float(x: Any) -> bool:
    return isinstance(x, (np.ndarray, np.generic)) and x.dtype in _ACCELERATE_DTYPES


def _large_numpy(x: Any) -> bool:
    if not isinstance(x, (np.ndarray, np.generic)):
        return False
    return x.size >= _config.settings().parallel_min_size


#: The rules, first match wins.
RULES: tuple[Rule, ...] = (
    Rule("cuda", _device, lambda: "device arrays"),
    Rule(
        "accelerate",
        _numpy_float,
        lambda: "numpy float32/float64 arrays and scalars",
        fallible=True,
        platform="darwin",
    ),
    Rule(
        "parallel",
        _large_numpy,
        lambda: f"other numpy arrays with >= {_config.settings().parallel_min_size:,} elements",
    ),
    Rule("cpu", None, lambda: "everything else (smaller arrays, scalars, lists)"),
)

_PLATFORMS = {"darwin": "macOS"}


def auto_choice(x: Any) -> Backend:
    """The backend the automatic choice gives for input ``x``.

    Parameters
    ----------
    x : object
        The first input of a call.

    Returns
    -------
    Backend
        By the first rule of ``RULES`` that applies:

    1. Device arrays (``__cuda_array_interface__``, numba device arrays):
       ``cuda``, or :class:`BackendUnavailableError` saying why it cannot run.
    2. On macOS, numpy float32 and float64 arrays and scalars: ``accelerate``
       when the framework loads.
    3. numpy arrays of at least ``CBRTGRAD_PARALLEL_MIN`` elements (default
       10^6): ``parallel``.
    4. Everything else (small arrays, Python scalars and lists): ``cpu``.

    Dask arrays never reach this function: :func:`resolve` sends them to a
    :class:`~cbrtgrad.backends.dask_blocks.DaskBlocks` over the choice for one
    chunk (``cpu`` for numpy chunks, ``cuda`` for CuPy chunks).

    Raises
    ------
    BackendUnavailableError
        For a device array when the ``cuda`` backend cannot run.

    Examples
    --------
    >>> import numpy as np
    >>> auto_choice(np.ones(3)).name
    'cpu'
    >>> auto_choice(np.ones(2_000_000, np.float16)).name
    'parallel'
    """
    if type(x) is np.ndarray:
        return plain_array_choice(x, _config.settings())
    return _first_rule(x)


def plain_array_choice(x: np.ndarray, settings: Any) -> Backend:
    """:func:`auto_choice` for a plain ndarray ``x`` under ``settings`` (``_config.settings()``).

    NOTE: hot path (every small call): for a plain ndarray the rules read
    only its dtype (accelerate), whether it is large (parallel) and the
    settings, so the table's answer is kept per (dtype, large), as long as
    the settings are the same object (parsed anew only when the environment
    is read again).

    Examples
    --------
    >>> plain_array_choice(np.ones(3), _config.settings()).name
    'cpu'
    """
    if _HOST_SETTINGS[0] is not settings:
        _HOST_CHOICES.clear()
        _HOST_SETTINGS[0] = settings
    key = (x.dtype, x.size >= settings.parallel_min_size)
    found = _HOST_CHOICES.get(key)
    if found is None:
        found = _HOST_CHOICES[key] = _first_rule(x)
    return found


def small_cpu_size(settings: Any) -> int:
    """Below how many elements the rules send a plain float32 or float64 ndarray to ``cpu``.

    Under ``settings`` (``_config.settings()``); 0 when they send neither
    dtype there (on macOS, where ``accelerate`` loads). The api's hot path
    compares a call's size with it instead of running the table: the
    table's answer for a plain ndarray depends only on its dtype and on
    whether it is large (:func:`plain_array_choice`), so the answer for an
    empty array is the answer for every small one.

    Examples
    --------
    >>> small_cpu_size(_config.settings()) in (0, _config.settings().parallel_min_size)  # 0: macOS
    True
    """
    cpu = get_backend("cpu")
    for dtype in _ACCELERATE_DTYPES:
        if plain_array_choice(np.empty(0, dtype), settings) is not cpu:
            return 0
    return int(settings.parallel_min_size)


#: The table's answer for plain ndarrays, by (dtype, large) ...
_HOST_CHOICES: dict[tuple[np.dtype, bool], Backend] = {}
#: ... under these settings.
_HOST_SETTINGS: list[Any] = [None]


def _first_rule(x: Any) -> Backend:
    for rule in RULES:
        if rule.platform is not None and sys.platform != rule.platform:
            continue
        if rule.takes is not None and not rule.takes(x):
            continue
        if rule.fallible:
            # The backend caches its own probe.
            if availability(rule.backend).available:
                return instance(rule.backend)
            continue
        # NOTE: hot path (cpu, parallel): get_backend finds them in its cache.
        return get_backend(rule.backend)
    raise AssertionError("the last rule takes every input")  # pragma: no cover


def _describe(rule: Rule) -> str:
    if rule.platform is not None and sys.platform != rule.platform:
        return f"{rule.backend} is not considered (not {_PLATFORMS[rule.platform]})"
    status = availability(rule.backend)
    if status.available:
        return f"{rule.inputs()} -> {rule.backend} ({status.reason})"
    then = "the rules below decide" if rule.fallible else "such calls fail"
    return f"{rule.inputs()} -> {rule.backend} unavailable here ({status.reason}); {then}"


def describe_auto_choice() -> list[str]:
    """Human-readable lines saying what the automatic choice does on this machine.

    Returns
    -------
    list of str
        One line per rule of ``RULES``, with the backend it picks here
        and, when that backend cannot run, why and what happens then.

    Examples
    --------
    >>> lines = describe_auto_choice()
    >>> any("parallel" in line for line in lines)
    True
    """
    selected = _config.settings().backend
    lines = []
    if selected != AUTO:
        lines.append(
            f"CBRTGRAD_BACKEND={selected!r}: calls without backend= and outside use_backend() "
            "use it; the rules below apply only with backend='auto'"
        )
    lines += [_describe(rule) for rule in RULES]
    lines.append(
        "dask arrays -> chunk by chunk (dask.array.map_blocks) on the choice for one chunk: "
        "cpu for numpy chunks, cuda for CuPy chunks"
    )
    return lines
