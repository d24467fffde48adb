"""Threads and processes: the same results as a serial run, nothing corrupted.

NOTE: numba's ``workqueue`` threading layer is not thread-safe; the parallel
backend serialises its kernel calls with a lock (``backends/parallel.py``),
tested here under that layer in a subprocess. Processes that start at once
compile the kernels at once and save them to one on-disk cache folder
(``_cache.py`` says why numba issue 4807 cannot strike these kernels;
tests/test_kernel_cache.py races them harder).
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import cbrtgrad as cg

ROOT = pathlib.Path(__file__).resolve().parents[1]
THREADS = 8
ROUNDS = 25


def _run_threads(work, n=THREADS):
    """Run ``work(i)`` in ``n`` threads started together; return results, re-raise errors."""
    barrier = threading.Barrier(n)
    results: list = [None] * n
    errors: list = []

    def run(i):
        try:
            barrier.wait()
            results[i] = work(i)
        except BaseException as exc:  # re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def _inputs(i, n=4096, dtype=np.float64):
    rng = np.random.default_rng(i)
    return (rng.standard_normal(n) * 10.0 ** rng.integers(-5, 5, n)).astype(dtype)


def _forward_backward(x, backend):
    t = cg.Tensor(x, requires_grad=True)
    loss = (cg.cbrt(t, backend=backend) * 2.0 + t).sum()
    loss.backward()
    return loss.data.copy(), t.grad.copy()


@pytest.mark.parametrize("backend", ["cpu", "parallel", "numpy"])
def test_threads_on_different_tensors_match_serial(backend):
    xs = [_inputs(i) for i in range(THREADS)]
    serial = [_forward_backward(x, backend) for x in xs]

    def work(i):
        return [_forward_backward(xs[i], backend) for _ in range(ROUNDS)]

    for i, runs in enumerate(_run_threads(work)):
        for value, grad in runs:
            assert value.tobytes() == serial[i][0].tobytes()
            assert grad.tobytes() == serial[i][1].tobytes()


@pytest.mark.parametrize("backend", ["cpu", "parallel"])
def test_threads_on_the_same_tensor_match_serial(backend):
    x = _inputs(0, dtype=np.float32)
    shared = cg.Tensor(x, requires_grad=True)
    f = cg.value_and_grad(lambda t: (cg.cbrt(t, backend=backend) ** 2).sum())
    expected_value, expected_grad = f(shared)
    fused_ref = cg.cbrt_and_grad(x, np.ones_like(x), backend=backend)

    def work(i):
        out = []
        for _ in range(ROUNDS):
            value, grad = f(shared)
            y, dx = cg.cbrt_and_grad(x, np.ones_like(x), backend=backend)
            out.append((value.data.tobytes(), grad.data.tobytes(), y.tobytes(), dx.tobytes()))
        return out

    for runs in _run_threads(work):
        for value, grad, y, dx in runs:
            assert value == expected_value.data.tobytes()
            assert grad == expected_grad.data.tobytes()
            assert y == fused_ref[0].tobytes() and dx == fused_ref[1].tobytes()


def test_backward_from_threads_into_one_leaf_accumulates_every_gradient():
    # Each backward adds the same gradient into the shared leaf's .grad; lost
    # updates (a read-modify-write race) would leave fewer than THREADS * ROUNDS.
    leaf = cg.Tensor(np.linspace(1.0, 2.0, 100_000), requires_grad=True)
    one = cg.Tensor(leaf.data.copy(), requires_grad=True)
    cg.cbrt(one).sum().backward()
    serial = one.grad.copy()
    for _ in range(THREADS * ROUNDS - 1):
        cg.cbrt(one).sum().backward()

    def work(i):
        for _ in range(ROUNDS):
            cg.cbrt(leaf).sum().backward()

    _run_threads(work)
    assert leaf.grad.tobytes() == one.grad.tobytes()
    np.testing.assert_allclose(leaf.grad, serial * THREADS * ROUNDS, rtol=1e-12)


_WORKQUEUE_SCRIPT = textwrap.dedent(
    """
    import threading, numpy as np, numba, cbrtgrad as cg
    # The references are the same kernels' results from one thread (that they
    # equal the cpu backend's bits is tests/backends/test_parallel.py's job:
    # compiling the cpu kernels here too would add half a minute).
    x = np.linspace(-1e3, 1e3, 300_001)
    ref = cg.cbrt(x, backend="parallel")
    ref_y, ref_dx = cg.cbrt_and_grad(x, x, backend="parallel")
    bad = []
    def work():
        for _ in range(20):
            y, dx = cg.cbrt_and_grad(x, x, backend="parallel")
            same = np.array_equal(y, ref_y) and np.array_equal(dx, ref_dx)
            if not (same and np.array_equal(cg.cbrt(x, backend="parallel"), ref)):
                bad.append(1)
    threads = [threading.Thread(target=work) for _ in range(8)]
    [t.start() for t in threads]; [t.join() for t in threads]
    print(numba.threading_layer(), len(bad))
    """
)


def test_parallel_backend_from_eight_threads_under_workqueue():
    env = dict(os.environ, NUMBA_THREADING_LAYER="workqueue", PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", _WORKQUEUE_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["workqueue", "0"], done.stdout + done.stderr[-2000:]


_PROCESS_SCRIPT = textwrap.dedent(
    """
    import hashlib, numpy as np, cbrtgrad as cg
    h = hashlib.sha256()
    x = np.random.default_rng(1).standard_normal(10_000).astype(np.float32) * 1e3
    h.update(cg.cbrt(x, backend="cpu").tobytes())
    h.update(cg.cbrt(x, backend="parallel").tobytes())
    print(h.hexdigest())
    """
)
# NOTE: the float32 forward's two kernels (the ufunc and the parallel loop),
# the two cheapest to compile (about 3 s together): two kernels written at
# once by every process is the race; the gradients' would take 10 s more and
# race the same way (tests/test_kernel_cache.py's slow test mixes dtypes).


#: One compiling process per core, 2 to 4: more only queue behind each other
#: (each compiles the kernels for seconds), fewer would not run at once.
PROCESSES = max(2, min(4, os.cpu_count() or 2))


def test_processes_importing_and_compiling_at_once(tmp_path):
    # The kernel cache under NUMBA_CACHE_DIR (honoured when CBRTGRAD_CACHE_DIR
    # is not set), empty at the start: every process compiles and saves.
    cache = tmp_path / "numba-cache"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CBRTGRAD_")}
    env.update(PYTHONPATH=str(ROOT), NUMBA_CACHE_DIR=str(cache))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _PROCESS_SCRIPT],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(PROCESSES)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in outputs]
    h = hashlib.sha256()
    x = np.random.default_rng(1).standard_normal(10_000).astype(np.float32) * 1e3
    h.update(cg.cbrt(x, backend="cpu").tobytes())
    h.update(cg.cbrt(x, backend="parallel").tobytes())
    assert [out.strip() for out, _ in outputs] == [h.hexdigest()] * PROCESSES
    # Only cbrtgrad's folder, one index per compiled function of the kernels
    # used (three: the ufunc's loop and its block entry, the parallel loop).
    written = [p for p in cache.rglob("*") if p.suffix in (".nbi", ".nbc")]
    assert {p.relative_to(cache).parts[0] for p in written} == {"cbrtgrad"}
    assert len([p for p in written if p.suffix == ".nbi"]) == 3
