"""Fuzz target over cbrtgrad's public API: a result or a documented exception, nothing else.

Every input is a byte string, decoded by :class:`Source` into a call: which
public function, arguments of any dtype and shape or arbitrary Python
objects, ``out=``/``where=``/``dtype=``/``backend=`` keywords, and whether
numpy raises on floating-point errors. The same target runs under atheris
(coverage-guided; ``python tests/fuzz/fuzz_api.py -max_total_time=20``) and,
where atheris cannot be installed, under hypothesis with random bytes
(``python tests/fuzz/fuzz_api.py --hypothesis 20``). A crash input becomes a
regression case in ``tests/fuzz/test_fuzz.py``.

Documented outcomes (``docs/errors.md``): ``TypeError``, ``ValueError``,
``RuntimeError`` (the engine's; ``BackendUnavailableError`` and
``GradcheckError`` are subclasses), ``FloatingPointError`` (anomaly mode, or
``np.errstate(all="raise")``) and numpy's ``RuntimeWarning``. Anything else
(``NotImplementedError``, ``AttributeError``, ``IndexError``, numba's typing
errors, a segfault) is a bug.
"""

from __future__ import annotations

import sys
import time
import warnings
from typing import Any

import numpy as np

import cbrtgrad as cg

DOCUMENTED = (TypeError, ValueError, RuntimeError, FloatingPointError)
UNDOCUMENTED = (NotImplementedError, RecursionError, Warning)

DTYPES = (
    "float16",
    "float32",
    "float64",
    "int8",
    "int64",
    "uint16",
    "bool",
    "complex64",
    "complex128",
    "object",
    "U3",
    "S2",
    "datetime64[s]",
    "timedelta64[ms]",
    "longdouble",
)
BACKENDS = ("cpu", "parallel", "numpy", "cuda", "accelerate", "auto", " CPU ", "bogus", None)
OBJECTS = (None, "8", b"8", 1j, True, 2**70, float("nan"), -0.0, [1, "a"], {}, (), [[1.0], [2, 3]])


class Source:
    """Decisions read from a byte string; reads past its end give zeros."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            return 0
        b = self.data[self.pos]
        self.pos += 1
        return b

    def int(self, lo: int, hi: int) -> int:
        """An integer in ``[lo, hi]``."""
        value = self.byte() | (self.byte() << 8)
        return lo + value % (hi - lo + 1)

    def choice(self, items: Any) -> Any:
        return items[self.int(0, len(items) - 1)]

    def bool(self) -> bool:
        return bool(self.byte() & 1)

    def raw(self, n: int) -> bytes:
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk.ljust(n, b"\0")


def array(src: Source, dtype: Any = None) -> Any:
    """An array of a drawn dtype and small shape (maybe a strided view), or an object."""
    kind = src.int(0, 9)
    if kind == 0:
        return src.choice(OBJECTS)
    if kind == 1:
        return src.choice((0.0, -8.0, 27, np.float32(8), np.float16(-1), np.inf, np.nan))
    dt = np.dtype(dtype if dtype is not None else src.choice(DTYPES))
    shape = tuple(src.int(0, 3) for _ in range(src.int(0, 3)))
    n = int(np.prod(shape, dtype=np.int64))
    if dt.kind in "fiub":
        raw = np.frombuffer(src.raw(n * dt.itemsize), dtype=dt).copy()
    else:
        raw = np.zeros(n, dt)
    a = raw.reshape(shape)
    view = src.int(0, 4)
    if view == 1 and a.ndim:
        a = a[::-1]
    elif view == 2 and a.ndim:
        a = np.repeat(a, 2, axis=0)[::2]
    elif view == 3 and a.ndim > 1:
        a = np.asfortranarray(a)
    elif view == 4:
        a.flags.writeable = False
    if src.bool() and a.ndim:
        return a.tolist()
    return a


def keywords(src: Source, names: tuple[str, ...]) -> dict[str, Any]:
    kw: dict[str, Any] = {}
    for name in names:
        if not src.bool():
            continue
        if name == "backend":
            kw[name] = src.choice(BACKENDS)
        elif name == "dtype":
            kw[name] = src.choice((None, np.float16, "float32", np.float64, int, "bogus", 3))
        elif name == "where":
            kw[name] = array(src, src.choice(("bool", "bool", "int8", None)))
        elif name == "out":
            kw[name] = (
                (array(src, src.choice(("float32", "float64"))),) * 2
                if src.bool()
                else array(src, src.choice(("float32", "float64", None)))
            )
    return kw


def _engine(src: Source) -> Any:
    x = array(src, src.choice(("float32", "float64", "float16", None)))
    requires = src.bool()
    t = cg.Tensor(x, requires_grad=requires)
    op = src.int(0, 8)
    if op == 0:
        y = cg.cbrt(t, **keywords(src, ("out", "where", "dtype", "backend")))
    elif op == 1:
        y = cg.cbrt(t) * array(src) + array(src)
    elif op == 2:
        y = cg.cbrt(t) / array(src) - t ** src.choice((2, 0.5, 0, -1, "2", None))
    elif op == 3:
        y = cg.cbrt(t).sum(axis=src.choice((None, 0, -1, 5, (0, 0), "a")))
    elif op == 4:
        y = cg.cbrt(t).reshape(src.choice(((-1,), (1, -1), (7,), "x")))
    elif op == 5:
        y = cg.cbrt(t).astype(src.choice(("float32", "int32", np.float16, "bogus")))
    elif op == 6:
        return cg.grad(cg.cbrt, argnums=src.choice((0, 1, (0,), (), "0", True)))(x)
    elif op == 7:
        return cg.value_and_grad(lambda v: cg.cbrt(v).sum())(x)
    else:
        return cg.gradcheck(cg.cbrt, (x,), eps=src.choice((1e-6, 0.0, -1.0, np.nan)))
    mode = src.int(0, 2)
    gradient = array(src) if src.bool() else None
    if mode == 1:
        with cg.detect_anomaly():
            y.backward(gradient)
    elif mode == 2:
        y.backward(gradient, retain_graph=True)
        y.backward(gradient)
    else:
        y.backward(gradient)
    return t.grad


def call(src: Source) -> Any:
    """Decode one call from ``src`` and make it."""
    which = src.int(0, 3)
    if which == 0:
        return cg.cbrt(array(src), **keywords(src, ("out", "where", "dtype", "backend")))
    if which == 1:
        return cg.cbrt_grad(array(src), array(src), **keywords(src, ("out", "where", "backend")))
    if which == 2:
        return cg.cbrt_and_grad(array(src), array(src), **keywords(src, ("out", "backend")))
    return _engine(src)


def one_input(data: bytes) -> None:
    """The target: raises only for an undocumented outcome (a bug)."""
    src = Source(data)
    errstate = src.choice(("ignore", "ignore", "warn", "raise"))
    with warnings.catch_warnings(), np.errstate(all=errstate):
        # numpy's floating-point RuntimeWarnings are documented; any other
        # warning reaching a user (FutureWarning, DeprecationWarning) is a bug.
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            call(src)
        except UNDOCUMENTED:
            raise
        except DOCUMENTED:
            pass


def run_hypothesis(seconds: float) -> int:
    """Fallback without atheris: random byte strings for ``seconds``."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    deadline = time.monotonic() + seconds
    runs = 0

    @settings(
        max_examples=10**9,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.binary(max_size=256))
    def target(data: bytes) -> None:
        nonlocal runs
        if time.monotonic() > deadline:
            return
        runs += 1
        one_input(data)

    target()
    return runs


def main(argv: list[str]) -> None:
    if len(argv) > 1 and argv[1] == "--hypothesis":
        runs = run_hypothesis(float(argv[2]) if len(argv) > 2 else 20.0)
        print(f"hypothesis fuzzing: {runs} inputs, no undocumented outcome")
        return
    import atheris

    # Instrument only the layers under test: numba compiles the kernel
    # modules from their bytecode, which instrumentation would change.
    for name in list(sys.modules):
        if name.startswith("cbrtgrad") and not name.startswith("cbrtgrad.kernels"):
            module = sys.modules[name]
            for value in list(vars(module).values()):
                if callable(value) and getattr(value, "__module__", None) == name:
                    try:
                        atheris.instrument_func(value)
                    except Exception:  # classes and builtins cannot be instrumented
                        pass
    atheris.Setup(argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
