"""cbrtgrad.torch's C++ entry for small calls (``torch/_entry.cpp``, ``torch/_native.py``).

What is checked: the api's bits through the entry (random bit patterns,
specials, subnormals, nan payloads; a broadcast gradient; 0-d and empty
tensors); that the public functions take it where it is loaded and the
Python route where it is not, with the same bits; that it says None wherever
the call must go the Python way (autograd, transforms, modes, traces,
subclasses, fake and meta tensors, other dtypes, layouts and sizes), and
that ``torch.compile`` traces around it; its bad arguments; NotImplemented
before its loops are set, in a fresh process; and a machine without a
compiler, where the build says so and the bridge runs without it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import cbrtgrad
from cbrtgrad import warming
from cbrtgrad.backends import host as api_host

from ._bit_patterns import bits as _bits
from ._bit_patterns import patterns as _patterns
from ._bit_patterns import tensor_bits as _tbits

torch = pytest.importorskip("torch")

import cbrtgrad.torch as ct  # noqa: E402  (after the skip: needs torch)
from cbrtgrad.torch import _cpu, _native  # noqa: E402

pytestmark = pytest.mark.skipif(
    _native.compiler() is None, reason="no C++ compiler here to build the PyTorch entry"
)

ROOT = Path(__file__).resolve().parent.parent
TORCH = {np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64}
LIMIT = 1 << 13  # the size limit the tests pass (the bridge passes the api's)


@pytest.fixture(scope="module")
def native():
    module = _native.build()  # loaded, or built once into this run's cache
    for dtype in TORCH.values():
        _native.set_loops(module, dtype)
    return module


@pytest.fixture
def with_native(native):
    kept = _cpu.NATIVE[0]
    _cpu.NATIVE[0] = native
    yield native
    _cpu.NATIVE[0] = kept


@pytest.fixture(params=[np.float32, np.float64], ids=["float32", "float64"])
def dtype(request):
    return np.dtype(request.param)


def test_the_entry_gives_the_apis_bits(native, dtype):
    x = _patterns(dtype, LIMIT - 400, seed=11)[: LIMIT - 1]
    g = _patterns(dtype, LIMIT - 400, seed=12)[: x.size][::-1].copy()
    with np.errstate(all="ignore"):
        y = cbrtgrad.cbrt(x)
        dx = cbrtgrad.cbrt_grad(g, y)
        dx_one = cbrtgrad.cbrt_grad(g[:1], y)  # a broadcast gradient: one value for all
    tx, tg, ty = torch.from_numpy(x), torch.from_numpy(g), torch.from_numpy(y)
    assert np.array_equal(_tbits(native.cube_root(tx, LIMIT)), _bits(y))
    assert np.array_equal(_tbits(native.cube_root_grad(tg, ty, LIMIT)), _bits(dx))
    constant = tg[:1].expand(x.size)
    assert not any(constant.stride())
    assert np.array_equal(_tbits(native.cube_root_grad(constant, ty, LIMIT)), _bits(dx_one))
    both = native.cube_root_and_grad(tx, tg, LIMIT)
    assert [_tbits(t).tolist() for t in both] == [_bits(y).tolist(), _bits(dx).tolist()]
    for got in (native.cube_root(tx[:5].reshape(5, 1), LIMIT), native.cube_root(tx[0], LIMIT)):
        assert got.is_contiguous() and got.dtype is tx.dtype
        assert _tbits(got).ravel().tolist() == _bits(y[: got.numel()]).tolist()
    assert native.cube_root(tx[0], LIMIT).shape == ()
    assert native.cube_root(tx[:0].reshape(0, 3), LIMIT).shape == (0, 3)


def test_the_public_functions_take_it_where_it_is_loaded(with_native, dtype, monkeypatch):
    # The cpu backend's ufunc is the Python route's kernel: counted, it says
    # which route a call took. The entry's results have the same bits.
    calls: list[int] = []
    forward = api_host.FORWARD[dtype]
    monkeypatch.setitem(
        api_host.FORWARD, dtype, lambda *a, **k: calls.append(a[0].size) or forward(*a, **k)
    )
    t = torch.linspace(-8, 8, 6, dtype=TORCH[dtype])
    g = torch.full_like(t, 3.0)
    ct.cbrt(t)  # the api keeps its choice for small arrays (the size the entry is given)
    calls.clear()
    by_entry = [ct.cbrt(t), ct.cbrt_grad(g, t), *ct.cbrt_and_grad(t, g)]
    leaf = t.clone().requires_grad_(True)
    ct.cbrt(leaf).backward(g)  # the Function, whose forward and backward run the entry
    assert calls == []
    _cpu.NATIVE[0] = None  # the fixture puts it back
    by_python = [ct.cbrt(t), ct.cbrt_grad(g, t), *ct.cbrt_and_grad(t, g)]
    assert calls  # the Python route
    for a, b in zip(by_entry, by_python, strict=True):
        assert np.array_equal(_tbits(a), _tbits(b))
    assert torch.equal(leaf.grad, by_python[3])


class Counting:
    """The entry, with each call's function and the type of its answer written down."""

    def __init__(self, native):
        self.native, self.calls = native, []

    def __getattr__(self, name):
        function = getattr(self.native, name)

        def counted(*args):
            answer = function(*args)
            self.calls.append((name, type(answer).__name__))
            return answer

        return counted


def test_use_backend_and_the_apis_size_limit_send_calls_the_python_way(with_native, monkeypatch):
    from cbrtgrad import _config
    from cbrtgrad.backends import use_backend

    counting = _cpu.NATIVE[0] = Counting(with_native)  # the fixture puts the entry back
    t = torch.linspace(-8, 8, 8)
    ct.cbrt(t)  # the api keeps its choice for small arrays (the size the entry is given)
    expected = ct.cbrt(t)
    assert counting.calls[-1] == ("cube_root", "Tensor")
    counting.calls.clear()
    with use_backend("parallel"):  # the caller's choice: the entry is not asked
        assert torch.equal(ct.cbrt(t), expected)
    assert counting.calls == []
    monkeypatch.setenv("CBRTGRAD_PARALLEL_MIN", "4")  # 8 elements: the parallel backend's
    _config.settings.cache_clear()
    try:
        for _ in range(2):  # the first renews the api's kept choice, the second reads it
            assert torch.equal(ct.cbrt(t), expected)
    finally:
        monkeypatch.delenv("CBRTGRAD_PARALLEL_MIN")
        _config.settings.cache_clear()
    # Asked, and declined (each call asks again where the Python route's
    # kernel call does, in _cpu: the Functions' forwards take that way).
    assert counting.calls and set(counting.calls) == {("cube_root", "NoneType")}


def _refused(native, t):
    return native.cube_root(t, LIMIT) is None


def test_it_says_none_wherever_the_call_must_go_the_python_way(native):
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    class Passing(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    class Seeing(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    t = torch.linspace(-8, 8, 6)
    assert not _refused(native, t)  # the control
    z = torch.complex(torch.zeros(3), torch.ones(3))
    others = {
        "requires grad": t.clone().requires_grad_(True),
        "strided": t.reshape(2, 3).t(),
        "negative bit": z.conj().imag,
        "parameter": torch.nn.Parameter(t.clone()),
        "meta": t.to("meta"),
        "float16": t.half(),
        "bfloat16": t.bfloat16(),
        "integers": torch.arange(3),
        "complex": z,
        "sparse": t.to_sparse(),
        "too many": torch.ones(LIMIT),
        "a number": 8.0,
        "a numpy array": np.ones(3, np.float32),
    }
    for name, other in others.items():
        assert _refused(native, other), name
    assert native.cube_root(t, 0) is None  # the api's choice sends nothing to cpu
    with torch.no_grad():  # no autograd records it: the entry's
        assert not _refused(native, others["requires grad"])
        # A Parameter is a plain tensor to PyTorch's C++ (no __torch_function__):
        # its result a Tensor, as torch.exp's.
        assert type(native.cube_root(others["parameter"], LIMIT)) is torch.Tensor
    with torch.inference_mode():
        assert native.cube_root(t, LIMIT).is_inference()
    for mode in (Passing, Seeing):
        with mode():
            assert _refused(native, t), mode
    with FakeTensorMode() as fake_mode:
        assert _refused(native, fake_mode.from_tensor(t))
    found: list = []
    torch.func.vmap(lambda row: found.append(native.cube_root(row, LIMIT)) or row)(t.reshape(2, 3))
    torch.func.grad(lambda u: found.append(native.cube_root(u, LIMIT)) or u.sum())(t)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit.trace is deprecated
        torch.jit.trace(
            lambda u: found.append(native.cube_root(u, LIMIT)) or u * 2, t, check_trace=False
        )
    assert len(found) == 3 and all(f is None for f in found)
    # The gradient's operands: one dtype and shape, y contiguous, g contiguous or constant.
    y = torch.linspace(1, 2, 6)
    for g in (torch.ones(6), torch.ones(1).expand(6)):  # the controls
        assert native.cube_root_grad(g, y, LIMIT) is not None
        assert native.cube_root_and_grad(y, g, LIMIT) is not None
    for g, y_ in [
        (torch.ones(6, dtype=torch.float64), y),
        (torch.ones(5), y),
        (torch.ones(3), y),
        (torch.ones(12)[::2], y),
        (torch.ones(6), torch.linspace(1, 2, 12)[::2]),
        (torch.ones(6), y.clone().requires_grad_(True)),
        (torch.ones(6).requires_grad_(True), y),
    ]:
        assert native.cube_root_grad(g, y_, LIMIT) is None
        assert native.cube_root_and_grad(y_, g, LIMIT) is None


def test_compile_traces_around_it(with_native):
    compiled = torch.compile(ct.cbrt, fullgraph=True, backend="aot_eager")
    t = torch.tensor([8.0, -27.0], requires_grad=True)
    compiled(t).sum().backward()
    assert torch.equal(t.grad, ct.cbrt_grad(torch.ones(2), ct.cbrt(t.detach())))
    with torch.no_grad():
        assert torch.equal(compiled(t), ct.cbrt(t.detach()))


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda n: n.cube_root(torch.ones(2)), TypeError, r"cube_root\(x, limit\) takes 2"),
        (lambda n: n.cube_root(torch.ones(2), "many"), TypeError, "integer"),
        (lambda n: n.cube_root_grad(torch.ones(2), 3), TypeError, r"takes 3 arguments"),
        (lambda n: n.cube_root_and_grad(1, 2, 3, 4), TypeError, r"takes 3 arguments"),
        (lambda n: n.set_loop(2, 0, 1), ValueError, "kernel and column are 0 or 1"),
        (lambda n: n.set_loop(0, 0, 0), ValueError, "address nonzero"),
        (lambda n: n.set_loop(0, 0), TypeError, r"takes 3 arguments"),
    ],
)
def test_bad_arguments_are_refused_by_name(native, call, error, match):
    with pytest.raises(error, match=match):
        call(native)


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    environment = dict(os.environ, **env)
    environment["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=environment, cwd=ROOT, timeout=300)  # fmt: skip


def test_a_fresh_process_loads_it_and_sets_its_loops_on_first_use(native):
    # The module fixture built it into this run's cache (CBRTGRAD_CACHE_DIR).
    done = _python(
        "import torch, cbrtgrad.torch as ct\n"
        "from cbrtgrad.torch import _cpu\n"
        "n = _cpu.NATIVE[0]\n"
        "print(n is not None, n.cube_root(torch.ones(2), 10))\n"
        "print(ct.cbrt(torch.tensor([8.0])).item(), ct.cbrt(torch.tensor([27.0])).item())\n"
        "print(n.cube_root(torch.tensor([-64.0]), 10).item())\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["True NotImplemented", "2.0 3.0", "-4.0"]


def test_without_a_compiler_the_build_says_so_and_the_bridge_runs(tmp_path):
    done = _python(
        "import torch, cbrtgrad.torch as ct\n"
        "from cbrtgrad import warming\n"
        "from cbrtgrad.torch import _native, _cpu\n"
        "print(_native.entry(), _cpu.NATIVE[0], 'PyTorch entry' in warming.kernel_names())\n"
        "print([n for n in warming.kernel_names('torch') if 'PyTorch' in n or 'buffer' in n])\n"
        "try:\n    _native.build()\n"
        "except _native.BuildError as exc:\n    print('BuildError:', exc)\n"
        "print(ct.cbrt(torch.tensor([8.0, -27.0])).tolist())\n",
        PATH=str(tmp_path), CXX="", CBRTGRAD_CACHE_DIR=str(tmp_path / "cache"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "None None False"
    assert lines[1] == "[]"  # warm --only torch: the bridge's kernels, not the entry's
    assert lines[2].startswith("BuildError: cbrtgrad.torch builds its PyTorch entry")
    assert "a C++ compiler" in lines[2]
    assert lines[3] == "[2.0, -3.0]"


def test_a_process_uses_the_entry_it_warmed(native):
    # cbrtgrad.warm builds in worker processes: this one takes the entry up after.
    kept = _cpu.NATIVE[0]
    _cpu.NATIVE[0] = None
    try:
        report = cbrtgrad.warm("PyTorch entry", jobs=1)
        assert [k.outcome for k in report.kernels] == ["loaded"]  # the fixture built it
        assert _cpu.NATIVE[0] is native
    finally:
        _cpu.NATIVE[0] = kept


def test_warm_builds_it_and_the_loops_it_calls():
    names = warming.kernel_names("torch")
    assert names[0] == "PyTorch entry"  # the longest first
    for kernel in ("forward", "grad"):
        for dtype in ("float32", "float64"):
            assert f"buffer loop {kernel} {dtype}" in names
            assert f"buffer loop {kernel} {dtype}" in warming.kernel_names("buffers")


def test_its_source_is_package_data():
    text = (ROOT / "setup.cfg").read_text()
    data = text.split("[options.package_data]", 1)[1].split("\n[", 1)[0]
    for name in _native.SOURCES:
        assert (ROOT / "cbrtgrad" / "torch" / name).is_file()
        assert f"cbrtgrad.torch = {name}" in data


def test_a_failed_build_is_reported_by_warm_which_goes_on(tmp_path):
    # A compiler that fails (CXX=false): the entry is a speed-up, so warm says
    # it was not built, and why, and does not fail.
    environment = dict(os.environ, CXX="false", CBRTGRAD_CACHE_DIR=str(tmp_path / "cache"))
    environment["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-m", "cbrtgrad", "warm", "--only", "PyTorch entry", "--no-progress",
         "-j", "1"],
        capture_output=True, text=True, env=environment, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    line = next(ln for ln in done.stdout.splitlines() if "PyTorch entry" in ln)
    assert line.lstrip().startswith("not built PyTorch entry")
    assert "(the bridge runs in Python: cbrtgrad.torch: building the PyTorch entry" in line
    assert "0 compiled, 0 already cached, 1 not built, in" in done.stdout


def _spoil(library: Path, damage: str) -> None:
    # A build damaged after its record was written (a copy cut short, a disk
    # error): the loader would map past the end of a short file (SIGBUS).
    data = library.read_bytes()
    if damage == "truncated":
        library.write_bytes(data[: len(data) // 2])
    elif damage == "zero bytes":
        library.write_bytes(b"")
    else:
        library.write_bytes(data[:4096] + bytes([data[4096] ^ 0x01]) + data[4097:])


@pytest.mark.parametrize("damage", ["truncated", "zero bytes", "a byte flipped"])
def test_a_damaged_build_is_not_loaded_and_the_bridge_runs_in_python(native, damage, tmp_path):
    # The run's build, copied with its record into a cache of the test's own,
    # then damaged: importing the bridge warns naming the file and runs the
    # Python route, with the api's bits.
    built = Path(native.__file__)
    key = built.parent.name
    folder = tmp_path / "cache" / "cbrtgrad" / "torch-entry" / key
    shutil.copytree(built.parent, folder)
    library = folder / built.name
    _spoil(library, damage)
    done = _python(
        "import warnings\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    import torch, cbrtgrad.torch as ct\n"
        "    from cbrtgrad.torch import _cpu\n"
        "print(_cpu.NATIVE[0])\n"
        "print(ct.cbrt(torch.tensor([27.0, -8.0, 1e-40])).tolist())\n"
        "for w in caught:\n    print(w.category.__name__, w.message)\n",
        CBRTGRAD_CACHE_DIR=str(tmp_path / "cache"),
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])  # 135: SIGBUS
    lines = done.stdout.splitlines()
    assert lines[0] == "None"
    assert lines[1] == str(cbrtgrad.cbrt(np.array([27.0, -8.0, 1e-40], np.float32)).tolist())
    (warning,) = [line for line in lines[2:] if "cbrtgrad" in line]
    assert warning.startswith(f"RuntimeWarning cbrtgrad: the PyTorch entry build {library} ")
    assert "not loaded (`cbrtgrad warm --only torch` builds it again)" in warning


@pytest.mark.parametrize("route", ["entry", "python"])
def test_flushing_subnormals_on_the_thread_changes_no_bit(native, route):
    # torch.set_flush_denormal(True) sets FTZ and DAZ on the calling thread:
    # every route keeps subnormals for its own work (the entry's loops, the
    # Python route's _Quiet), so the bits are cbrtgrad's, as without it.
    sub32, sub64 = 1e-40, 1e-310
    g = torch.tensor([sub32, 1.0, 1e-44, 2.0])
    y = torch.tensor([1.0, 1e-13, 1.0, 2.0])
    g64 = torch.tensor([sub64, 1.0, 5e-324, 2.0], dtype=torch.float64)
    big_g, big_y = torch.full((1 << 20,), sub32), torch.ones(1 << 20)
    bf = torch.tensor([sub32, -3e-39, 8.0], dtype=torch.bfloat16)
    half = torch.tensor([1e-7, -3e-6, 8.0], dtype=torch.float16)
    calls = {
        "gradient float32": lambda: ct.cbrt_grad(g, y),
        "gradient float64": lambda: ct.cbrt_grad(g64, y.double()),
        "gradient, parallel size": lambda: ct.cbrt_grad(big_g, big_y),
        "gradient, constant g": lambda: ct.cbrt_grad(big_g[:1].expand(1 << 20), big_y),
        "fused": lambda: ct.cbrt_and_grad(y, g)[1],
        "fused, parallel size": lambda: ct.cbrt_and_grad(big_y, big_g)[1],
        "bfloat16": lambda: ct.cbrt(bf),
        "bfloat16 gradient": lambda: ct.cbrt_grad(bf, bf),
        "float16 gradient": lambda: ct.cbrt_grad(half, half),
    }
    kept = _cpu.NATIVE[0]
    _cpu.NATIVE[0] = native if route == "entry" else None
    try:
        expected = {name: call() for name, call in calls.items()}
        if not torch.set_flush_denormal(True):
            pytest.skip("this CPU has no flush-to-zero mode PyTorch can set")
        try:
            got = {name: call() for name, call in calls.items()}
        finally:
            torch.set_flush_denormal(False)
    finally:
        _cpu.NATIVE[0] = kept
    assert expected["gradient float32"][0].item() > 0  # a subnormal g, read as itself
    for name in calls:
        assert torch.equal(got[name], expected[name]), name
