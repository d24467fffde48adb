"""The ``cbrtgrad`` command: ``verify``, ``bench`` and ``info``.

The measuring modules (:mod:`cbrtgrad.bench`, the verification) and numba,
llvmlite, scipy and tqdm are imported by the subcommands that need them, not
by this module (``import numba`` imports scipy).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import select
import sys
from collections.abc import Callable, Sequence
from typing import TextIO

import numpy as np

from . import __version__, _isa
from .backends import _registry

#: The largest count or size the commands take: an array of more elements
#: than this could not be allocated anyway (2^53: every integer below it is
#: exact in the float notation accepted, ``1e6``).
_LARGEST = 2**53


def _positive(text: str) -> int:
    """A positive integer, also written as ``1e6``; not 1.5, inf or nan (argparse type).

    Examples
    --------
    >>> _positive("1e6"), _positive("12")
    (1000000, 12)
    >>> _positive("1.5")
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


#: Peak bytes per random input of ``verify`` (float64, the larger dtype): 106
#: measured with tracemalloc, 112 from the growth of the maximum RSS between
#: -n 10^5 and 4 x 10^6 (cpu, numpy and parallel); 128 leaves a margin.
VERIFY_BYTES_PER_INPUT = 128
#: Peak bytes per element of a ``bench`` size: 56 measured for the table
#: (the curve of tools/measure.py plot, which shares the bound: 49); 64 leaves a margin.
BENCH_BYTES_PER_ELEMENT = 64


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


def _memory_bounded(bytes_per_element: int) -> Callable[[str], int]:
    # An argparse type: a positive integer whose run fits in memory, checked
    # while parsing (a MemoryError would come after minutes, or the kernel
    # would kill the process first).
    def parse(text: str) -> int:
        return within_memory(_positive(text), bytes_per_element, available_memory())

    return parse


def _backend_list(text: str) -> list[str]:
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


def _json_path(text: str) -> str:
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


def _write_json(path: str, payload: object) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(payload, handle, indent=2)
        handle.write("\n")


#: The float32 cube roots ``verify --exhaustive`` sweeps: the CPU kernel, and
#: the CUDA kernels' formula compiled for this CPU (the GPU's own compile is
#: checked against the CPU by tools/gpu_check.py), with their JSON keys.
_EXHAUSTIVE_FORMS = (
    ("cpu", "CPU kernel", "exhaustive"),
    ("cuda", "CUDA kernels' formula, compiled for this CPU", "exhaustive_cuda_formula"),
)


def cmd_verify(args: argparse.Namespace) -> int:
    from .verification import exhaustive, report

    status = 0
    rows = report.verify(args.n, args.backends)
    # The numpy rows (np.cbrt: SVML or the platform's libm) depend on the CPU.
    print(f"CPU: {_isa.host_isa().describe()}")
    print(report.format_rows(rows))
    if not all(r.passed for r in rows):
        status = 1
    payload: dict[str, object] = {
        "cpu": _isa.host_isa().describe(),
        "rows": report.rows_as_dicts(rows),
    }
    if args.exhaustive:
        print("\nExhaustive float32 sweep (all 2^32 inputs, exact midpoint test):")
        for form, what, key in _EXHAUSTIVE_FORMS:
            result = exhaustive.sweep(form=form, progress=not args.no_progress)
            verdict = "correctly rounded" if result.correctly_rounded else "FAILURES"
            print(
                f"{what}: checked {result.checked} inputs in {result.seconds:.0f} s: "
                f"{result.failures} not correctly rounded -> {verdict}"
            )
            if result.failing_inputs:
                first = ", ".join(hex(v) for v in result.failing_inputs)
                print("first failing bit patterns:", first)
                status = 1
            payload[key] = {
                "checked": result.checked,
                "failures": result.failures,
                "seconds": result.seconds,
            }
    if args.json:
        _write_json(args.json, payload)
    return status


#: The ``bench`` flags whose measurements left the package (issue 34: the
#: package holds the product; the docs' peer tables, curves, dask, startup,
#: bridge and GPU figures are made by ``tools/measure.py`` in a source
#: checkout), each with the command that runs it now.
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


class _Moved(argparse.Action):
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
        parser.error(f"{flag} {_moved_to(MOVED_FLAGS[flag])}")


def _moved_to(command: str) -> str:
    return (
        "moved out of the package (issue 34); from a source checkout of cbrtgrad run: "
        f"python tools/measure.py {command}"
    )


def cmd_bench(args: argparse.Namespace) -> int:
    from .bench import anchors

    if "cuda" in args.backends:
        # Checked before the table, which takes a while.
        print(f"cbrtgrad bench: the cuda rows {_moved_to('cuda')}", file=sys.stderr)
        return 2
    rows = anchors.run(sizes=tuple(args.sizes), repeat=args.repeat, backends=tuple(args.backends))
    # Every table says which CPU and vector ISA its figures are from.
    print(f"CPU: {_isa.host_isa().describe()}")
    print(anchors.format_rows(rows))
    payload: dict[str, object] = {
        "cpu": _isa.host_isa().describe(),
        "rows": anchors.rows_as_dicts(rows),
    }
    if args.engine:
        from .bench import engine as engine_bench

        engine = engine_bench.engine_rows(repeat=args.repeat)
        print()
        print(engine_bench.format_engine_rows(engine))
        print(f"(cbrtgrad.jax against jnp.cbrt: {_moved_to('jax')})")
        payload["engine"] = engine
    if args.calls:
        from .bench import calls
        from .bench import engine as engine_bench

        small = calls.call_rows(repeat=args.repeat)
        print()
        print(engine_bench.format_engine_rows(small))
        payload["calls"] = small
    if args.json:
        _write_json(args.json, payload)
    return 0


def info_lines() -> list[str]:
    """What ``cbrtgrad info`` prints: versions, CPU, kernel cache, backends and why.

    Examples
    --------
    >>> any(line.startswith("numba") for line in info_lines())
    True
    """
    import llvmlite
    import llvmlite.binding as llvm
    import numba
    import scipy

    from . import _cache, _text
    from .kernels.cpu import cached_kernels, loop_plan

    features = llvm.get_host_cpu_features()
    simd = sorted(k for k, on in features.items() if on and k.startswith(("avx", "fma", "sse4")))
    lines = [
        f"cbrtgrad   {__version__}",
        f"python     {platform.python_version()} ({platform.machine()}, {platform.system()})",
        f"numba      {numba.__version__}",
        f"llvmlite   {llvmlite.__version__} (LLVM {'.'.join(map(str, llvm.llvm_version_info))})",
        f"numpy      {np.__version__}",
        f"scipy      {scipy.__version__}",
        f"cpu        {_isa.host_isa().describe()}",
        f"features   {' '.join(simd)}",
        f"threads    numba {numba.get_num_threads()} "
        f"(layer: {getattr(numba.config, 'THREADING_LAYER', '?')})",
        f"cache      {_cache.status(cached_kernels()).describe()}",
        "backends:",
    ]
    backends = []
    for name in _registry.known():
        status = _registry.availability(name)
        backends.append((name, "available" if status.available else "unavailable", status.reason))
    table = _text.table(("backend", "status", "reason"), backends, ("", "", ""))
    lines += [f"  {line}" for line in table.splitlines()]
    lines.append("kernel loops (SIMD shape on this CPU; formula):")
    header = ("loop", "dtype", "SIMD shape", "formula")
    table = _text.table(header, loop_plan(), ("", "", "", ""))
    lines += [f"  {line}" for line in table.splitlines()]
    describe = getattr(_registry, "describe_auto_choice", None)
    if describe is not None:
        lines.append("automatic choice:")
        lines += [f"  {line}" for line in describe()]
    return lines


def cmd_info(args: argparse.Namespace) -> int:
    print("\n".join(info_lines()))
    return 0


def _kernel_selection(text: str) -> list[str]:
    from . import warming

    try:
        return warming.kernel_names(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("only: ")) from None


def cmd_warm(args: argparse.Namespace) -> int:
    from . import _progress, warming

    names = warming.kernel_names(args.only)
    jobs = min(warming._check_jobs(args.jobs), len(names))
    print(
        f"cbrtgrad warm: {len(names)} kernel{'s' if len(names) != 1 else ''} for "
        f"{_isa.host_isa().describe()}, {jobs} process{'es' if jobs != 1 else ''}",
        flush=True,
    )
    try:
        with _progress.bar(len(names), enabled=not args.no_progress) as advance:
            report = warming.warm(args.only, jobs=args.jobs, progress=lambda _: advance(1))
    except RuntimeError as exc:
        print(f"cbrtgrad warm: error: {str(exc).removeprefix('cbrtgrad warm: ')}", file=sys.stderr)
        return 2
    print(report.describe())
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``cbrtgrad`` command."""
    parser = argparse.ArgumentParser(
        prog="cbrtgrad", description="The element-wise cube root and its gradient."
    )
    parser.add_argument("--version", action="version", version=f"cbrtgrad {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    verify = sub.add_parser("verify", help="accuracy of every backend against mpmath and scipy")
    verify.add_argument(
        "-n",
        type=_memory_bounded(VERIFY_BYTES_PER_INPUT),
        default=None,
        help=f"random inputs per dtype (up to what memory holds, {VERIFY_BYTES_PER_INPUT} "
        "bytes each)",
    )
    verify.add_argument("--backends", type=_backend_list, default=None, help="comma-separated")
    verify.add_argument(
        "--exhaustive", action="store_true", help="also check all 2^32 float32 inputs"
    )
    verify.add_argument("--no-progress", action="store_true", help="no progress bar")
    verify.add_argument(
        "--json", metavar="FILE", type=_json_path, help="also write the results as JSON"
    )
    verify.set_defaults(func=cmd_verify)

    bench = sub.add_parser(
        "bench",
        help="throughput against np.cbrt, scipy and a memory copy",
        epilog="--plot, --peers, --dask, --startup, --torch, --numba, the JAX rows of --engine "
        "and the cuda backend's rows moved out of the package (issue 34): python "
        "tools/measure.py in a source checkout.",
    )
    bench.add_argument(
        "--sizes",
        type=_memory_bounded(BENCH_BYTES_PER_ELEMENT),
        nargs="+",
        default=[100_000, 10_000_000],
        help=f"array sizes (up to what memory holds, {BENCH_BYTES_PER_ELEMENT} bytes an element)",
    )
    bench.add_argument("--repeat", type=_positive, default=20, help="calls per measurement")
    bench.add_argument("--backends", type=_backend_list, default=["cpu"], help="comma-separated")
    bench.add_argument(
        "--engine",
        action="store_true",
        help="also time the graph engine: cbrt(x).sum().backward() on 10^6 and 1 elements",
    )
    bench.add_argument(
        "--calls",
        action="store_true",
        help="also time small calls, as ratios in one run: cbrt, cbrt with out=, cbrt_grad, "
        "cbrt_and_grad and the graph engine's step on one float64 against np.cbrt, and cbrt on "
        "1,000 against the cpu backend's own ufunc",
    )
    bench.add_argument(
        "--json", metavar="FILE", type=_json_path, help="also write the table as JSON"
    )
    for flag in MOVED_FLAGS:
        bench.add_argument(flag, action=_Moved)
    bench.set_defaults(func=cmd_bench)

    info = sub.add_parser("info", help="versions, CPU features, kernel cache and backends")
    info.set_defaults(func=cmd_info)

    warm = sub.add_parser(
        "warm",
        help="compile every kernel for this machine into the kernel cache, ahead of first use",
        description="Compile every kernel for this CPU and these settings into the kernel cache "
        "(the folder `cbrtgrad info` shows), in worker processes side by side; kernels already "
        "cached are only checked. For a Docker image, a CI cache or a cluster's workers "
        "(docs/cache.md).",
    )
    warm.add_argument(
        "--only",
        type=_kernel_selection,
        default=None,
        metavar="NAMES",
        help="comma-separated groups, ufunc (the cpu backend), parallel (the parallel backend), "
        "numba (cbrtgrad.numba) and jax (cbrtgrad.jax's CPU handlers), or kernels by the names "
        "this command prints; default all",
    )
    warm.add_argument(
        "-j", "--jobs", type=_positive, default=None, help="processes (default: one per CPU)"
    )
    warm.add_argument("--no-progress", action="store_true", help="no progress bar")
    warm.set_defaults(func=cmd_warm)
    return parser


#: The exit status of a command whose standard output was closed under it
#: (``cbrtgrad verify | head -1``): 128 + SIGPIPE, what the shell reports for
#: a program that SIGPIPE ended, as ``cat`` or ``yes`` in the same place.
BROKEN_PIPE_STATUS = 128 + 13


def _reader_gone(stream: TextIO | None) -> bool:
    """Whether ``stream`` writes to a pipe (or socket) whose reading end was closed."""
    if stream is None:
        return False
    try:
        fd = stream.fileno()
    except (OSError, ValueError):
        return False  # not a file descriptor (a test's capture)
    if not hasattr(select, "poll"):
        return True  # Windows: no poll for pipes; the documented recipe's assumption
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    # Linux flags a widowed pipe's writing end with POLLERR, BSDs with POLLHUP.
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    A closed standard output (the reader of a pipe gone) ends the command
    quietly with :data:`BROKEN_PIPE_STATUS`, as Python's documentation of
    ``SIGPIPE`` recommends: the rest of the output goes to ``os.devnull``.
    Not 0: the output was cut short, and a failed ``verify`` (status 1)
    must not read as a success under ``set -o pipefail``. A broken pipe of
    the command's own (a socket of ``bench --dask``) is an error as before.
    """
    try:
        try:
            return _main(argv)
        finally:
            # Flushed here, inside the try: a closed pipe would otherwise
            # show at the interpreter's exit, as a traceback it cannot catch.
            if sys.stdout is not None:
                sys.stdout.flush()
    except BrokenPipeError:
        if not (_reader_gone(sys.stdout) or _reader_gone(sys.stderr)):
            raise
        # Python flushes the standard streams again at exit: both sent to
        # devnull, so that nothing is written to (or reported about) the
        # closed pipe. stderr too: ``2>&1 | head`` closes it as well.
        devnull = os.open(os.devnull, os.O_WRONLY)
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                try:
                    os.dup2(devnull, stream.fileno())
                except (OSError, ValueError):
                    pass  # not a file descriptor (a test's capture): nothing to redirect
        os.close(devnull)
        return BROKEN_PIPE_STATUS


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # The environment is checked before any work, as the arguments are.
    try:
        _registry.check_environment()
    except (ValueError, _registry.BackendUnavailableError) as exc:
        parser.error(str(exc).removeprefix("cbrtgrad: "))
    if args.command == "verify" and args.n is None:
        from .verification import cases

        args.n = cases.VERIFY_SIZE
    status: int = args.func(args)
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
