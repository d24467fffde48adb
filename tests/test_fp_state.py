"""IEEE conditions: every backend signals them the same way and honours np.errstate (issue 24).

The ``parallel`` backend's loops run on numba's threads, whose flags numpy
never sees; they return them and the backend signals them as numpy would
(:mod:`cbrtgrad.kernels.cpu.fpstatus`). The ``cpu`` backend is a numpy ufunc over
the same block code, so the two must agree on every input, condition for
condition; the ``numpy`` backend computes ``g / (3 y y)`` in numpy steps and
is held to the conditions of the singularity (divide by zero at ``y = 0``,
invalid for ``0 / 0``), which every backend raises.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

import cbrtgrad as cg
from cbrtgrad.kernels.cpu import denormals, fpstatus

HOST = ("cpu", "numpy", "parallel")


def _signalled(call):
    """The RuntimeWarning messages a call gives under np.errstate(all="warn")."""
    with warnings.catch_warnings(record=True) as caught, np.errstate(all="warn"):
        warnings.simplefilter("always")
        call()
    return sorted({str(w.message) for w in caught if w.category is RuntimeWarning})


def _conditions(messages):
    return sorted({m.split(" encountered")[0] for m in messages})


def test_the_issue_example_raises_on_the_automatic_parallel_choice():
    for n in (10**6 - 1, 10**6):  # cpu below the parallel threshold, parallel from it
        with np.errstate(divide="raise"), pytest.raises(FloatingPointError, match="divide by zero"):
            cg.cbrt_grad(np.ones(n), np.zeros(n))
        with pytest.warns(RuntimeWarning, match="divide by zero"):
            cg.cbrt_grad(np.ones(n), np.zeros(n))
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("error")
            cg.cbrt_grad(np.ones(n), np.zeros(n))


SINGULAR = {
    "divide by zero": (np.array([1.0, -2.0, 3.0]), np.array([0.0, -0.0, 1.0])),
    "invalid value": (np.array([0.0, 1.0]), np.array([0.0, 1.0])),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("backend", HOST)
@pytest.mark.parametrize("condition", SINGULAR)
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_every_errstate_mode_on_every_backend(backend, condition, dtype):
    g, y = (a.astype(dtype) for a in SINGULAR[condition])
    key = {"divide by zero": "divide", "invalid value": "invalid"}[condition]
    with np.errstate(**{key: "raise"}), pytest.raises(FloatingPointError, match=condition):
        cg.cbrt_grad(g, y, backend=backend)
    with np.errstate(**{key: "raise"}), pytest.raises(FloatingPointError, match=condition):
        cg.cbrt_and_grad(y, g, backend=backend)  # cbrt(0) = 0: the same quotient
    assert condition in _conditions(_signalled(lambda: cg.cbrt_grad(g, y, backend=backend)))
    calls = []
    old = np.seterrcall(lambda text, flags: calls.append(text))
    try:
        with np.errstate(**{key: "call"}):
            cg.cbrt_grad(g, y, backend=backend)
    finally:
        np.seterrcall(old)
    assert condition in calls
    log = io.StringIO()
    old = np.seterrcall(log)
    try:
        with np.errstate(**{key: "log"}):
            cg.cbrt_grad(g, y, backend=backend)
    finally:
        np.seterrcall(old)
    assert f"Warning: {condition} encountered in" in log.getvalue()


def _hostile_pairs(dtype):
    info = np.finfo(dtype)
    values = np.array(
        [
            0.0,
            -0.0,
            1.0,
            -1.0,
            np.inf,
            -np.inf,
            np.nan,
            info.tiny,
            info.tiny / 4,
            info.max,
            info.smallest_subnormal,
            1e-30,
            1e30,
        ],
        dtype,
    )
    g, y = np.meshgrid(values, values)
    return g.ravel(), y.ravel()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_parallel_signals_exactly_what_cpu_signals(dtype):
    g, y = _hostile_pairs(dtype)
    cases = 0
    for i in range(g.size):
        for pair in ((g[i : i + 1], y[i : i + 1]), (np.repeat(g[i], 5000), np.repeat(y[i], 5000))):
            on_cpu = _signalled(lambda p=pair: cg.cbrt_grad(*p, backend="cpu"))
            on_parallel = _signalled(lambda p=pair: cg.cbrt_grad(*p, backend="parallel"))
            assert on_cpu == on_parallel, (g[i], y[i])
            fused_cpu = _signalled(lambda p=pair: cg.cbrt_and_grad(p[1], p[0], backend="cpu"))
            fused_parallel = _signalled(
                lambda p=pair: cg.cbrt_and_grad(p[1], p[0], backend="parallel")
            )
            assert _conditions(fused_cpu) == _conditions(fused_parallel), (g[i], y[i])
            cases += 1
    assert cases == 2 * g.size


@pytest.mark.parametrize("backend", HOST)
def test_the_forward_signals_nothing_on_any_finite_or_special_input(backend):
    for dtype in (np.float32, np.float64):
        info = np.finfo(dtype)
        x = np.array(
            [
                0.0,
                -0.0,
                np.inf,
                -np.inf,
                np.nan,
                info.tiny,
                info.smallest_subnormal,
                info.max,
                -info.max,
                1e-30,
                27.0,
            ],
            dtype,
        )
        with np.errstate(all="raise"):
            cg.cbrt(x, backend=backend)
            cg.cbrt(np.repeat(x, 5000), backend=backend)


def test_dask_chunks_signal_in_the_thread_that_computes_them():
    da = pytest.importorskip("dask.array")
    import dask

    g = da.ones(10, chunks=5)
    y = da.zeros(10, chunks=5)
    for inner in ("cpu", "parallel"):
        with dask.config.set(scheduler="sync"), np.errstate(divide="raise"):
            with pytest.raises(FloatingPointError, match="divide by zero"):
                cg.cbrt_grad(g, y, backend=inner).compute()


def test_signal_follows_numpy_order_and_modes(capsys):
    # numpy handles divide, overflow, underflow, invalid in that order.
    everything = fpstatus.DIVIDE | fpstatus.OVERFLOW | fpstatus.UNDERFLOW | fpstatus.INVALID
    with np.errstate(all="warn", under="warn"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fpstatus.signal(everything, "f")
    assert [str(w.message) for w in caught] == [
        "divide by zero encountered in f",
        "overflow encountered in f",
        "underflow encountered in f",
        "invalid value encountered in f",
    ]
    with np.errstate(all="print"):
        fpstatus.signal(fpstatus.OVERFLOW, "f")
    assert "Warning: overflow encountered in f" in capsys.readouterr().err
    old = np.seterrcall(None)
    try:
        with np.errstate(all="call"), pytest.raises(ValueError, match="callback"):
            fpstatus.signal(fpstatus.INVALID, "f")
    finally:
        np.seterrcall(old)
    assert fpstatus.AVAILABLE  # on the CI's x86-64 and ARM machines


_FLUSH_THEN_CALL = """
import sys
import numpy as np
import cbrtgrad
from cbrtgrad.kernels.cpu import denormals

keep, restore = denormals.mode_functions()
n = 2_000_000  # above the parallel backend's threshold: every thread of numba's team takes part
dtype = np.dtype(sys.argv[1])
tiny = np.finfo(dtype).smallest_subnormal
x = np.full(n, tiny * 8, dtype)            # subnormal inputs (read as zero under DAZ)
g = np.full(n, tiny * 3, dtype)            # subnormal results of the gradient (flushed under FTZ)
y = np.ones(n, dtype)
expected = (
    cbrtgrad.cbrt(x[:4], backend="cpu"),
    cbrtgrad.cbrt_grad(g[:4], y[:4], backend="cpu"),
    *cbrtgrad.cbrt_and_grad(x[:4], g[:4], backend="cpu"),
)
exact_sum = np.float32(np.sum(x, dtype=np.float64))  # exact: under 2^53 multiples of 2^-149


def check(where):
    for got, want in zip((cbrtgrad.cbrt(x, backend="parallel"),
                          cbrtgrad.cbrt_grad(g, y, backend="parallel"),
                          *cbrtgrad.cbrt_and_grad(x, g, backend="parallel")),
                         expected):
        assert np.all(got.view(np.uint8).reshape(n, -1) == want[:1].view(np.uint8)), (where, got)
    if dtype == np.float32:  # the engine's parallel sum reads subnormals as they are
        from cbrtgrad.kernels.cpu import reduce

        assert reduce.sum_float32(x) == exact_sum, where

old = keep()
restore(old | denormals.FLUSH_BITS)  # the caller flushes subnormals when numba's team starts
check("first calls, the caller flushing subnormals")
assert keep() & denormals.FLUSH_BITS, "the caller's mode was not put back"
restore(old & ~denormals.FLUSH_BITS)
check("later calls, the caller keeping subnormals")
print("ok")
"""


@pytest.mark.skipif(
    not denormals.AVAILABLE, reason="the subnormal mode is read and set on x86-64 and ARM64 only"
)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_parallel_threads_keep_subnormals_whatever_mode_started_them(dtype):
    # numba's workers keep the floating-point mode of the thread that started
    # the team: a first parallel call under flush-to-zero (what
    # torch.set_flush_denormal(True) or an XLA thread sets) once left every
    # later call flushing subnormals on the workers, half of a large array.
    # Each block keeps subnormals on its thread, and the caller's mode is
    # put back after the call. A fresh process: the team starts there.
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _FLUSH_THEN_CALL, dtype], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
