"""Compile every kernel ahead of time into the on-disk cache: ``cbrtgrad warm``.

Each kernel is compiled on its first use and kept in the kernel cache
(:mod:`cbrtgrad.build.cache`), so every new machine, container or dask worker pays
seconds per kernel the first time it needs one. :func:`cbrtgrad.warm` pays it once, up
front: it compiles (or finds already cached) every kernel this machine can
run, in worker processes side by side, so that a Docker image, a CI cache or
a cluster's shared folder holds them all (docs/cache.md).

The kernels are the same ones the library builds on demand, by the same
functions (``cbrtgrad.warming.GROUPS``, :mod:`cbrtgrad.cli.warm_units`): a warmed
cache is what the library would have written itself.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .build import cache as _cache
from .build import compile as _compile
from .cli.warm_report import WarmedKernel, WarmReport
from .cli.warm_units import GROUPS, OptionalUnitFailed, build_of, kernel_names, use_built

__all__ = ["GROUPS", "kernel_names", "warm"]


def _build(name: str) -> WarmedKernel:
    """Build one kernel in this (worker) process: compiled, or loaded from the cache."""
    build = build_of(name)
    before = _compile.built_kernels()
    start = time.perf_counter()
    try:
        build()
    except OptionalUnitFailed as failure:
        return WarmedKernel(name, "not built", time.perf_counter() - start, str(failure))
    seconds = time.perf_counter() - start
    after = _compile.built_kernels()
    new = [outcome for key, outcome in after.items() if key not in before]
    # A unit builds its kernel and what it calls (the numba API's rare
    # paths): compiled if any of them was. Already built in this worker
    # (nothing new): an earlier unit of this worker put it in the cache or
    # loaded it from there.
    outcome = "compiled" if "compiled" in new else "loaded"
    return WarmedKernel(name, outcome, seconds)


#: What a worker process runs: a kernel name per line in, a result per line out.
_WORKER = "from cbrtgrad.warming import _serve; _serve()"
_RESULT = "cbrtgrad-warm-result "


def _serve() -> None:
    """A worker: builds each kernel named on stdin, answers one line each on stdout."""
    for line in sys.stdin:
        name = line.strip()
        try:
            answer: dict[str, Any] = asdict(_build(name))
        except Exception as exc:  # noqa: BLE001 (reported to the parent, which raises)
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        print(_RESULT + json.dumps(answer), flush=True)


def _drain(todo: queue.Queue[str]) -> None:
    while True:
        try:
            todo.get_nowait()
        except queue.Empty:
            return


def _run_worker(todo: queue.Queue[str]) -> Iterator[WarmedKernel]:
    """Start one worker process and hand it kernels from ``todo`` until none are left."""
    package_parent = str(Path(__file__).resolve().parents[1])
    # The worker imports this very cbrtgrad, wherever this process found it.
    path = os.pathsep.join(p for p in (package_parent, os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path}
    with subprocess.Popen(
        [sys.executable, "-c", _WORKER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    ) as worker:
        assert worker.stdin is not None and worker.stdout is not None
        try:
            while True:
                try:
                    name = todo.get_nowait()
                except queue.Empty:
                    return
                worker.stdin.write(name + "\n")
                worker.stdin.flush()
                answer = _read_answer(worker.stdout)
                if answer is None:
                    raise RuntimeError(
                        f"cbrtgrad warm: the worker process building {name!r} exited "
                        f"(status {worker.wait()})"
                    )
                if "error" in answer:
                    raise RuntimeError(
                        f"cbrtgrad warm: building {name!r} failed: {answer['error']}"
                    )
                yield WarmedKernel(**answer)
        finally:
            worker.stdin.close()


def _read_answer(stream: Any) -> dict[str, Any] | None:
    # Lines that are not answers (something the build printed) are skipped.
    for line in stream:
        if line.startswith(_RESULT):
            answer: dict[str, Any] = json.loads(line[len(_RESULT) :])
            return answer
    return None


def _check_jobs(jobs: Any) -> int:
    if jobs is None:
        return max(1, os.cpu_count() or 1)
    if isinstance(jobs, bool) or not isinstance(jobs, int):
        raise TypeError(f"jobs must be a positive integer, got {type(jobs).__name__}")
    if jobs < 1:
        raise ValueError(f"jobs must be a positive integer, got {jobs}")
    return jobs


def warm(
    only: Iterable[str] | str | None = None,
    *,
    jobs: int | None = None,
    progress: Callable[[WarmedKernel], object] | None = None,
) -> WarmReport:
    """Compile every kernel for this machine into the on-disk cache, ahead of first use.

    Kernels already in the cache are only checked (loaded), so a second
    ``warm`` is quick. Each kernel is the one the library would build on its
    first call, for this CPU and these settings (``CBRTGRAD_VECTOR_WIDTH``,
    the versions), in the folder ``cbrtgrad info`` shows: warm where the
    kernels will run, or on a machine of the same CPU model and settings.

    Parameters
    ----------
    only : iterable of str, or str, optional
        Which kernels: groups (keys of ``cbrtgrad.warming.GROUPS``: ``"ufunc"``,
        ``"parallel"``, ``"numba"``, ``"buffers"``, and ``"jax"``, ``"mlx"``,
        ``"torch"``: everything that bridge runs on the CPU) or kernels by
        name (:func:`cbrtgrad.warming.kernel_names`); default all.
    jobs : int, optional
        Worker processes compiling side by side (default: one per CPU), each
        a fresh interpreter: this process builds nothing itself.
    progress : callable, optional
        Called with each :class:`cbrtgrad.warming.WarmedKernel` as it finishes.

    Returns
    -------
    WarmReport

    Raises
    ------
    RuntimeError
        If the cache is off (``CBRTGRAD_CACHE=0``) or its folder cannot be
        written or is not safe (another user could change it: a warning says
        why): there is nowhere to keep the kernels.
    TypeError, ValueError
        For a ``jobs`` that is not a positive integer, or an unknown name in ``only``.

    Examples
    --------
    >>> report = warm("ufunc cube_root float32", jobs=1)
    >>> [k.name for k in report.kernels], report.folder == str(_cache.directory())
    (['ufunc cube_root float32'], True)
    >>> [k.outcome for k in warm("ufunc cube_root float32", jobs=1).kernels]  # cached now
    ['loaded']
    """
    names = kernel_names(only)
    workers = min(_check_jobs(jobs), len(names))
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be callable, got {type(progress).__name__}")
    folder = _cache.directory()
    if folder is None:
        raise RuntimeError(
            "cbrtgrad warm: the kernel cache is off (CBRTGRAD_CACHE=0) or its folder "
            f"{_cache.root()} cannot be written or another user could change it: there is "
            "nowhere to keep the kernels"
        )
    start = time.perf_counter()
    done: list[WarmedKernel] = []

    def finished(kernel: WarmedKernel) -> None:
        done.append(kernel)
        if progress is not None:
            progress(kernel)

    # NOTE: in fresh worker processes, one job or many: what a worker
    # reports is what it found in the cache (a kernel this process already
    # built may come from another folder, or from no cache at all). Plain
    # subprocesses, not multiprocessing's: a dask worker is a daemonic
    # process, which multiprocessing forbids to have children. Each worker
    # takes the next kernel when it is done with one (heaviest first).
    todo: queue.Queue[str] = queue.Queue()
    for name in names:
        todo.put(name)
    results: queue.Queue[WarmedKernel | BaseException] = queue.Queue()

    def work() -> None:
        try:
            for kernel in _run_worker(todo):
                results.put(kernel)
        except BaseException as exc:  # noqa: BLE001 (raised in the caller's thread)
            results.put(exc)

    threads = [threading.Thread(target=work, daemon=True) for _ in range(workers)]
    for thread in threads:
        thread.start()
    try:
        # The progress callback runs here, in the caller's thread.
        for _ in names:
            result = results.get()
            if isinstance(result, BaseException):
                raise result
            finished(result)
    finally:
        _drain(todo)  # after a failure, the other workers stop at their next kernel
        for thread in threads:
            thread.join()
    use_built(names)
    return WarmReport(str(folder), tuple(done), time.perf_counter() - start, workers)
