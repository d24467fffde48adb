"""The measurements that left ``cbrtgrad bench`` (issue 34): peers, curves, bridges, GPU.

``cbrtgrad bench`` keeps the anchor table, ``--engine`` and ``--calls``; its
other flags ran what the docs' tables and figures are made of, and run here
now, from a source checkout (``docs/make_plots.py`` runs ``plot`` and
``peers``)::

    python tools/measure.py peers [--sizes N ...] [--repeat R]     # was bench --peers
    python tools/measure.py plot FILE [--sizes N ...] [--backends cpu,numpy]  # was --plot
    python tools/measure.py dask [--dask-gb 2] [--workers 2]       # was bench --dask
    python tools/measure.py startup [--runs 3]                     # was bench --startup
    python tools/measure.py torch | jax | numba [--repeat R]       # was --torch, --engine, --numba
    python tools/measure.py mlx [--repeat R]                       # the MLX bridge's ratios
    python tools/measure.py mlx-threads [--calls C] [--loads 0 1 2]  # its threads, busy cores
    python tools/measure.py cuda [--sizes N ...]                   # was bench --backends cuda

Every subcommand takes ``--json FILE``. The arguments are checked as
``cbrtgrad bench`` checks its own (the same argparse types), before anything
is measured.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import sys
from collections.abc import Sequence
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)  # this tree's cbrtgrad and tools.measuring, as a script too

import numpy as np  # noqa: E402

from cbrtgrad import __version__  # noqa: E402
from cbrtgrad.backends import _registry  # noqa: E402
from cbrtgrad.build import isa as _isa  # noqa: E402
from cbrtgrad.cli.args import (  # noqa: E402
    backend_list,
    json_path,
    memory_bounded,
    positive,
    write_json,
)
from cbrtgrad.cli.bench import anchors  # noqa: E402
from cbrtgrad.cli.bench.engine import format_engine_rows  # noqa: E402
from cbrtgrad.cli.bench.inputs import BENCH_SIZES  # noqa: E402
from cbrtgrad.cli.main import BENCH_BYTES_PER_ELEMENT  # noqa: E402


def _cpu_line() -> None:
    # Every table says which CPU and vector ISA its figures are from.
    print(f"CPU: {_isa.host_isa().describe()}")


def _plot_path(text: str) -> str:
    # Checked while parsing, so that a missing matplotlib or a bad file name
    # fails at once instead of after minutes of measuring.
    from tools.measuring import plotting

    try:
        return plotting.check_path(text)
    except (ImportError, ValueError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _gigabytes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _spinners(text: str) -> int:
    # A count of spinning processes: 0 or more, and few (each takes a core).
    if not text.isdigit() or int(text) > 16:
        raise argparse.ArgumentTypeError(f"expected an integer from 0 to 16, got {text!r}")
    return int(text)


def cmd_peers(args: argparse.Namespace) -> int:
    """The forward (cpu backend, one thread) against libmvec, SLEEF and jax."""
    from tools.measuring import peer_table

    rows = peer_table.peer_rows(sizes=tuple(args.sizes), repeat=args.repeat)
    print(peer_table.format_peer_rows(rows))
    if args.json:
        write_json(args.json, {"peers": peer_table.peer_rows_as_dict(rows)})
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    """Measure ns per element against size and draw it."""
    import numba
    import scipy

    from tools.measuring import curves, plotting

    sizes = curves.CURVE_SIZES if args.sizes is None else tuple(args.sizes)
    backends = None if args.backends is None else tuple(args.backends)
    points = curves.curve(sizes=sizes, repeat=args.repeat, backends=backends)
    _cpu_line()
    print(curves.format_curve(points))
    isa = _isa.host_isa()
    title = (
        f"cbrtgrad {__version__} forward, {isa.cpu} ({isa.name}), "
        f"numba {numba.__version__} ({numba.get_num_threads()} threads), "
        f"numpy {np.__version__}, scipy {scipy.__version__}"
    )
    plotting.plot_curve(points, args.file, title=title)
    print(f"plot written to {args.file}")
    if args.json:
        write_json(args.json, {"curve": curves.curve_as_dicts(points)})
    return 0


def cmd_dask(args: argparse.Namespace) -> int:
    """A large float32 array on a local dask cluster against numpy."""
    if importlib.util.find_spec("distributed") is None:
        print("measure.py dask needs dask and distributed: pip install 'cbrtgrad[dask]'")
        return 2
    from tools.measuring import dask_table

    rows = dask_table.dask_rows(
        gigabytes=args.dask_gb, n_workers=args.workers, repeat=min(args.repeat, 5)
    )
    _cpu_line()
    print(dask_table.format_dask_rows(rows))
    if args.json:
        write_json(args.json, {"dask_rows": [vars(r) for r in rows]})
    return 0


def cmd_startup(args: argparse.Namespace) -> int:
    """Import and first call in fresh interpreters."""
    from tools.measuring import startup

    dask = importlib.util.find_spec("distributed") is not None
    rows = startup.startup_rows(runs=args.runs, dask=dask)
    _cpu_line()
    print(startup.format_startup_rows(rows))
    if not dask:
        print("(no dask LocalCluster row: distributed is not installed)")
    if args.json:
        write_json(
            args.json, {"cpu": _isa.host_isa().describe(), "startup": [vars(r) for r in rows]}
        )
    return 0


def _ratio_rows(args: argparse.Namespace, key: str, rows: list[dict[str, Any]]) -> int:
    # The bridges' rows have the layout of ``cbrtgrad bench --engine``'s.
    _cpu_line()
    print(format_engine_rows(rows))
    if args.json:
        write_json(args.json, {"cpu": _isa.host_isa().describe(), key: rows})
    return 0


def _missing(module: str, command: str, name: str) -> bool:
    """Whether `module` is absent; if so, say on stderr which extra `command` needs."""
    if importlib.util.find_spec(module) is not None:
        return False
    print(
        f"measure.py {command} needs {name}: python -m pip install 'cbrtgrad[{module}]'",
        file=sys.stderr,
    )
    return True


def cmd_torch(args: argparse.Namespace) -> int:
    """The PyTorch bridge against PyTorch's own ops, as ratios."""
    if _missing("torch", "torch", "PyTorch"):
        return 2
    from tools.measuring import pytorch

    return _ratio_rows(args, "torch", pytorch.torch_rows(repeat=args.repeat))


def cmd_jax(args: argparse.Namespace) -> int:
    """The JAX bridge against ``jnp.cbrt``, jitted."""
    from tools.measuring import jax_rows

    reason = jax_rows.absent()
    if reason is not None:
        print(f"measure.py jax: {reason}", file=sys.stderr)
        return 2
    return _ratio_rows(args, "jax", jax_rows.jax_rows(repeat=args.repeat))


def cmd_mlx(args: argparse.Namespace) -> int:
    """The MLX bridge against MLX's own ops and cbrtgrad's api, as ratios."""
    if _missing("mlx", "mlx", "MLX"):
        return 2
    from tools.measuring import mlx_rows

    _cpu_line()
    rows = mlx_rows.mlx_rows(repeat=args.repeat)
    print(mlx_rows.format_mlx_rows(rows))
    if args.json:
        write_json(args.json, {"cpu": _isa.host_isa().describe(), "mlx": rows})
    return 0


def cmd_mlx_threads(args: argparse.Namespace) -> int:
    """The MLX bridge on one thread and numba's threads, per call, beside spinning processes."""
    if _missing("mlx", "mlx-threads", "MLX"):
        return 2
    from tools.measuring import mlx_threads

    _cpu_line()
    rows = mlx_threads.thread_rows(calls=args.calls, rounds=args.rounds, loads=args.loads)
    print(mlx_threads.format_thread_rows(rows))
    if args.json:
        write_json(args.json, {"cpu": _isa.host_isa().describe(), "mlx_threads": rows})
    return 0


def cmd_numba(args: argparse.Namespace) -> int:
    """:mod:`cbrtgrad.numba` in ``@njit`` loops against numba's own cube roots."""
    from tools.measuring import numba_loops

    rows = numba_loops.numba_rows(repeat=args.repeat)
    print(numba_loops.format_numba_rows(rows))
    if args.json:
        write_json(args.json, {"cpu": _isa.host_isa().describe(), "numba": rows})
    return 0


def cmd_cuda(args: argparse.Namespace) -> int:
    """The bench table's rows of the cuda backend, on CuPy arrays against the GPU's anchors."""
    status = _registry.availability("cuda")
    if not status.available or "simulator" in status.reason:
        print(f"measure.py cuda: the cuda backend needs a GPU: {status.reason}", file=sys.stderr)
        return 2
    from tools.measuring import gpu

    rows = gpu.bench_rows(tuple(args.sizes), args.repeat)
    print(anchors.format_rows(rows))
    if args.json:
        write_json(args.json, {"rows": anchors.rows_as_dicts(rows)})
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``python tools/measure.py``."""
    parser = argparse.ArgumentParser(
        prog="python tools/measure.py", description=__doc__.splitlines()[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sizes = argparse.ArgumentParser(add_help=False)
    sizes.add_argument(
        "--sizes",
        type=memory_bounded(BENCH_BYTES_PER_ELEMENT),
        nargs="+",
        help=f"array sizes (up to what memory holds, {BENCH_BYTES_PER_ELEMENT} bytes an element)",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--repeat", type=positive, default=20, help="calls per measurement")
    common.add_argument("--json", metavar="FILE", type=json_path, help="also write JSON")

    def add(
        name: str, func: object, help_: str, *parents: argparse.ArgumentParser
    ) -> argparse.ArgumentParser:
        command = sub.add_parser(name, help=help_, parents=[*parents, common])
        command.set_defaults(func=func)
        return command

    add("peers", cmd_peers, "the forward against vectorised peers, with ulp errors", sizes)
    plot = add("plot", cmd_plot, "ns per element against array size, drawn", sizes)
    plot.add_argument("file", metavar="FILE", type=_plot_path, help="the figure (needs matplotlib)")
    plot.add_argument("--backends", type=backend_list, help="default: every host backend")
    dask = add("dask", cmd_dask, "a float32 array chunk by chunk on a local dask cluster")
    dask.add_argument("--dask-gb", type=_gigabytes, default=2.0, help="input in GB (default 2)")
    dask.add_argument("--workers", type=positive, default=2, help="worker processes (default 2)")
    startup = add("startup", cmd_startup, "import and first call in fresh interpreters")
    startup.add_argument("--runs", type=positive, default=3, help="fresh interpreters per case")
    add("torch", cmd_torch, "the PyTorch bridge against PyTorch's ops")
    add("jax", cmd_jax, "the JAX bridge against jnp.cbrt, jitted")
    add("mlx", cmd_mlx, "the MLX bridge against MLX's ops and cbrtgrad.cbrt")
    threads = add("mlx-threads", cmd_mlx_threads, "the MLX bridge's threads on busy cores")
    threads.add_argument("--calls", type=positive, default=100, help="timed calls per block")
    threads.add_argument("--rounds", type=positive, default=3, help="rounds per load")
    threads.add_argument(
        "--loads", type=_spinners, nargs="+", default=[0, 1, 2], help="spinning processes"
    )
    add("numba", cmd_numba, "cbrtgrad.numba in @njit loops against numba's cube roots")
    add("cuda", cmd_cuda, "the cuda backend's bench rows on a GPU", sizes)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run a measurement; returns the exit status."""
    args = build_parser().parse_args(argv)
    if args.command in ("peers", "cuda") and args.sizes is None:
        args.sizes = list(BENCH_SIZES)
    status: int = args.func(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
