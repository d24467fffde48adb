"""The argparse types of the commands: counts within memory, backends, JSON files, moved flags.

Shared by :mod:`cbrtgrad.cli.main` and ``tools/measure.py`` (the measurements that
left ``cbrtgrad bench``), so that both check their arguments alike, while
parsing: a bad argument is an argparse error (exit 2) before any work.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from collections.abc import Callable, Sequence

from ..backends import _registry

#: The largest count or size the commands take: an array of more elements
#: than this could not be allocated anyway (2^53: every integer below it is
#: exact in the float notation accepted, ``1e6``).
_LARGEST = 2**53


def positive(text: str) -> int:
    """A positive integer, also written as ``1e6``; not 1.5, inf or nan (argparse type).

    Examples
    --------
    >>> positive("1e6"), positive("12")
    (1000000, 12)
    >>> positive("1.5")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected a positive integer, got '1.5'
    """
    expected = f"expected a positive integer, got {text!r}"
    try:
        value = int(text)
    except ValueError:
        try:
            number = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(expected) from None
        if not math.isfinite(number) or number != int(number):
            raise argparse.ArgumentTypeError(expected) from None
        value = int(number)
    if value <= 0:
        raise argparse.ArgumentTypeError(expected)
    if value > _LARGEST:
        raise argparse.ArgumentTypeError(f"expected a positive integer up to 2^53, got {text!r}")
    return value


def available_memory() -> tuple[int, str] | None:
    """The bytes this process can allocate, and what that figure is; None where unknown.

    Linux: ``MemAvailable`` (free memory and what the kernel can reclaim),
    capped by the process's cgroup v2 limit less its use (a container's
    limit, past which the kernel kills the process instead of a
    ``MemoryError``). Elsewhere the physical memory, where ``os.sysconf``
    knows it.

    Examples
    --------
    >>> memory = available_memory()
    >>> memory is None or memory[0] > 0
    True
    """
    found: tuple[int, str] | None = None
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    found = int(line.split()[1]) * 1024, "available memory"
    except (OSError, ValueError, IndexError):
        pass
    if found is not None:
        try:
            with open("/sys/fs/cgroup/memory.max", encoding="ascii") as limit_file:
                limit = limit_file.read().strip()
            with open("/sys/fs/cgroup/memory.current", encoding="ascii") as current_file:
                used = int(current_file.read())
            if limit != "max" and int(limit) - used < found[0]:
                found = max(int(limit) - used, 0), "memory left under the cgroup's limit"
        except (OSError, ValueError):
            pass
        return found
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "physical memory"
    except (AttributeError, ValueError, OSError):
        return None


def _gib(size: int) -> str:
    return f"{size / 2**30:,.1f} GiB"


def within_memory(count: int, bytes_per_element: int, memory: tuple[int, str] | None) -> int:
    """``count`` when its run fits ``memory`` (``available_memory()``), else an argparse error.

    Examples
    --------
    >>> within_memory(1000, 128, (2**30, "available memory"))
    1000
    >>> within_memory(10**9, 128, (2**30, "available memory"))
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: 1000000000 needs about 119.2 GiB; available memory is 1.0 GiB, ...
    """
    if memory is None:
        return count
    size, what = memory
    largest = size // bytes_per_element
    if count > largest:
        raise argparse.ArgumentTypeError(
            f"{count} needs about {_gib(count * bytes_per_element)}; {what} is {_gib(size)}, "
            f"enough for at most {largest}"
        )
    return count


def memory_bounded(bytes_per_element: int) -> Callable[[str], int]:
    """An argparse type: a positive integer whose run, at ``bytes_per_element``, fits in memory.

    Checked while parsing: a ``MemoryError`` would come after minutes of
    work, or the kernel would kill the process first.
    """

    def parse(text: str) -> int:
        return within_memory(positive(text), bytes_per_element, available_memory())

    return parse


def backend_list(text: str) -> list[str]:
    """Comma-separated backend names, each known and available here (argparse type)."""
    names = [name.strip().lower() for name in text.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError(
            f"expected at least one backend name; known: {', '.join(_registry.known())}"
        )
    for name in names:
        if name not in _registry.known():
            raise argparse.ArgumentTypeError(
                f"unknown backend {name!r}; known: {', '.join(_registry.known())}"
            )
        status = _registry.availability(name)
        if not status.available:
            raise argparse.ArgumentTypeError(
                f"backend {name!r} is unavailable here: {status.reason}"
            )
    return names


def json_path(text: str) -> str:
    """A file the results can be written to, checked before the run (argparse type)."""
    if not text:
        raise argparse.ArgumentTypeError("expected a file name, got ''")
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text!r} is a directory; expected a file name")
    folder = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: no directory {folder!r}")
    if not os.access(folder, os.W_OK) or (os.path.exists(text) and not os.access(text, os.W_OK)):
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: permission denied")
    return text


def write_json(path: str, payload: object) -> None:
    """Write ``payload`` to ``path`` (checked by :func:`json_path`) as indented JSON."""
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(payload, handle, indent=2)
        handle.write("\n")


#: The ``bench`` flags whose measurements are not in the package (it holds
#: the product; the docs' peer tables, curves, dask, startup, bridge and GPU
#: figures are made by ``tools/measure.py`` in a source checkout), each with
#: the command that runs it.
MOVED_FLAGS = {
    "--plot": "plot FILE",
    "--peers": "peers",
    "--dask": "dask",
    "--dask-gb": "dask --dask-gb GB",
    "--workers": "dask --workers N",
    "--startup": "startup",
    "--runs": "startup --runs N",
    "--torch": "torch",
    "--numba": "numba",
}


class Moved(argparse.Action):
    """A flag whose measurement moved to ``tools/measure.py``: an argparse error naming it.

    Taken while parsing (with its value, if one follows), so that nothing is
    measured before the message.
    """

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs="?", help=argparse.SUPPRESS)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        flag = option_string or self.option_strings[0]
        parser.error(f"{flag} {moved_to(MOVED_FLAGS[flag])}")


def moved_to(command: str) -> str:
    """What a moved flag's message says after its name: where it went, and the command."""
    return (
        "moved out of the package; from a source checkout of cbrtgrad run: "
        f"python tools/measure.py {command}"
    )
