"""The ``cbrtgrad`` command: ``verify``, ``bench`` and ``info``.

The measuring modules (:mod:`cbrtgrad.cli.bench`, the verification) and numba,
llvmlite, scipy and tqdm are imported by the subcommands that need them, not
by this module (``import numba`` imports scipy).
"""

from __future__ import annotations

import argparse
import os
import platform
import select
import sys
import textwrap
from collections.abc import Sequence
from typing import TextIO

import numpy as np

from .. import __version__
from ..backends import _registry
from ..build import isa as _isa
from .args import (
    MOVED_FLAGS,
    Moved,
    backend_list,
    json_path,
    memory_bounded,
    moved_to,
    positive,
    write_json,
)

#: Peak bytes per random input of ``verify`` (float64, the larger dtype): 106
#: measured with tracemalloc, 112 from the growth of the maximum RSS between
#: -n 10^5 and 4 x 10^6 (cpu, numpy and parallel); 128 leaves a margin.
VERIFY_BYTES_PER_INPUT = 128
#: Peak bytes per element of a ``bench`` size: 56 measured for the table
#: (the curve of tools/measure.py plot, which shares the bound: 49); 64 leaves a margin.
BENCH_BYTES_PER_ELEMENT = 64


#: The float32 cube roots ``verify --exhaustive`` sweeps: the CPU kernel, and
#: the CUDA kernels' formula compiled for this CPU (the GPU's own compile is
#: checked against the CPU by tools/gpu_check.py), with their JSON keys.
_EXHAUSTIVE_FORMS = (
    ("cpu", "CPU kernel", "exhaustive"),
    ("cuda", "CUDA kernels' formula, compiled for this CPU", "exhaustive_cuda_formula"),
)


def cmd_verify(args: argparse.Namespace) -> int:
    from ..verification import exhaustive, report

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
        write_json(args.json, payload)
    return status


def cmd_bench(args: argparse.Namespace) -> int:
    from .bench import anchors

    if "cuda" in args.backends:
        # Checked before the table, which takes a while.
        print(f"cbrtgrad bench: the cuda rows {moved_to('cuda')}", file=sys.stderr)
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
        print(f"(cbrtgrad.jax against jnp.cbrt: {moved_to('jax')})")
        payload["engine"] = engine
    if args.calls:
        from .bench import calls
        from .bench import engine as engine_bench

        small = calls.call_rows(repeat=args.repeat)
        print()
        print(engine_bench.format_engine_rows(small))
        payload["calls"] = small
    if args.json:
        write_json(args.json, payload)
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

    from ..build import cache as _cache
    from ..kernels.cpu.catalog import cached_kernels, loop_plan
    from ..verification import text as _text

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
    from .. import warming

    try:
        return warming.kernel_names(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("only: ")) from None


def _warm_groups() -> str:
    """``warm --help``'s list of the groups ``--only`` takes, one line each."""
    from ..warming import GROUPS

    width = max(map(len, GROUPS))
    lines = [f"  {name:<{width}}  {what}" for name, what in GROUPS.items()]
    return "\n".join(
        ["groups for --only (mlx, torch and buffers where their library is installed):", *lines]
    )


def cmd_warm(args: argparse.Namespace) -> int:
    from .. import warming
    from ..verification import progress as _progress

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
        type=memory_bounded(VERIFY_BYTES_PER_INPUT),
        default=None,
        help=f"random inputs per dtype (up to what memory holds, {VERIFY_BYTES_PER_INPUT} "
        "bytes each)",
    )
    verify.add_argument("--backends", type=backend_list, default=None, help="comma-separated")
    verify.add_argument(
        "--exhaustive", action="store_true", help="also check all 2^32 float32 inputs"
    )
    verify.add_argument("--no-progress", action="store_true", help="no progress bar")
    verify.add_argument(
        "--json", metavar="FILE", type=json_path, help="also write the results as JSON"
    )
    verify.set_defaults(func=cmd_verify)

    bench = sub.add_parser(
        "bench",
        help="throughput against np.cbrt, scipy and a memory copy",
        epilog="--plot, --peers, --dask, --startup, --torch, --numba, the JAX rows of --engine "
        "and the cuda backend's rows moved out of the package: python "
        "tools/measure.py in a source checkout.",
    )
    bench.add_argument(
        "--sizes",
        type=memory_bounded(BENCH_BYTES_PER_ELEMENT),
        nargs="+",
        default=[100_000, 10_000_000],
        help=f"array sizes (up to what memory holds, {BENCH_BYTES_PER_ELEMENT} bytes an element)",
    )
    bench.add_argument("--repeat", type=positive, default=20, help="calls per measurement")
    bench.add_argument("--backends", type=backend_list, default=["cpu"], help="comma-separated")
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
        "--json", metavar="FILE", type=json_path, help="also write the table as JSON"
    )
    for flag in MOVED_FLAGS:
        bench.add_argument(flag, action=Moved)
    bench.set_defaults(func=cmd_bench)

    info = sub.add_parser("info", help="versions, CPU features, kernel cache and backends")
    info.set_defaults(func=cmd_info)

    warm = sub.add_parser(
        "warm",
        help="compile every kernel for this machine into the kernel cache, ahead of first use",
        # Wrapped here: the raw formatter keeps the group list's lines as they are.
        description=textwrap.fill(
            "Compile every kernel for this CPU and these settings into the kernel cache "
            "(the folder `cbrtgrad info` shows), in worker processes side by side; kernels "
            "already cached are only checked. For a Docker image, a CI cache or a cluster's "
            "workers (docs/cache.md).",
            width=78,
        ),
        epilog=_warm_groups(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    warm.add_argument(
        "--only",
        type=_kernel_selection,
        default=None,
        metavar="NAMES",
        help="comma-separated groups (below) or kernels by the names this command prints; "
        "default all",
    )
    warm.add_argument(
        "-j", "--jobs", type=positive, default=None, help="processes (default: one per CPU)"
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
        from ..verification import cases

        args.n = cases.VERIFY_SIZE
    status: int = args.func(args)
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
