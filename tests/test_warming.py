"""``cbrtgrad warm``: every kernel compiled into the cache ahead of first use."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import cbrtgrad
from cbrtgrad import _config, warming
from cbrtgrad.build import cache as _cache
from cbrtgrad.cli import main as cli
from cbrtgrad.kernels.cpu import catalog as cpu

ROOT = Path(__file__).resolve().parents[1]

_FIRST_CALL = """
import numpy as np, cbrtgrad
from cbrtgrad.build import compile as _compile
cbrtgrad.cbrt(np.ones(3, np.float32), backend="cpu")
cbrtgrad.cbrt(np.ones(3, np.float32), backend="parallel")
print(sorted(_compile.built_kernels().items()))
"""


@pytest.fixture
def empty_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("CBRTGRAD_CACHE_DIR", str(tmp_path))
    _config.settings.cache_clear()
    yield tmp_path
    monkeypatch.undo()
    _config.settings.cache_clear()


def test_warm_compiles_into_the_cache_and_a_fresh_process_loads_from_it(empty_cache):
    # The two cheapest kernels to compile (about 3 s together on 2 cores).
    names = ["ufunc cube_root float32", "parallel forward float32"]
    seen = []
    report = cbrtgrad.warm(names, jobs=2, progress=seen.append)
    assert sorted(k.name for k in report.kernels) == sorted(names)
    assert [k.name for k in seen] == [k.name for k in report.kernels]
    assert {k.outcome for k in report.kernels} == {"compiled"}
    assert report.jobs == 2 and Path(report.folder).parent.parent == empty_cache
    status = _cache.status({n: cpu.cached_kernels()[n] for n in names})
    assert status.cached == tuple(names) and status.missing == ()
    # Warm again: found, not compiled. A fresh process's first calls load them.
    assert {k.outcome for k in cbrtgrad.warm(names, jobs=1).kernels} == {"loaded"}
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", _FIRST_CALL], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.strip() == str([(name, "loaded") for name in sorted(names)])


def test_every_kernel_the_cache_can_hold_is_warmed():
    names = warming.kernel_names()
    assert set(cpu.cached_kernels()) <= set(names)
    assert len(names) == len(set(names))
    # Every kernel in a group (a kernel may be in several: a bridge's group
    # holds the api's kernels it runs too).
    grouped = set()
    for group in warming.GROUPS:
        try:
            grouped |= set(warming.kernel_names(group))
        except ValueError as error:  # a bridge's library not installed here
            assert "needs" in str(error)
    assert grouped == set(names)
    assert warming.kernel_names("ufunc, parallel fused float32") == [
        *warming.kernel_names("ufunc"),
        "parallel fused float32",
    ]


def test_the_command_prints_each_kernel_and_where(capsys):
    # This run's cache, where the kernel is (or is put).
    cbrtgrad.warm("ufunc cube_root float32", jobs=1)
    status = cli.main(["warm", "--only", "ufunc cube_root float32", "--no-progress", "-j", "1"])
    out = capsys.readouterr().out
    assert status == 0
    assert "1 kernels for" not in out and "cbrtgrad warm: 1 kernel" in out
    assert "  loaded    ufunc cube_root float32" in out
    assert f"1 kernel in {_cache.directory()}: 0 compiled, 1 already cached" in out


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"jobs": 0}, ValueError, "jobs must be a positive integer, got 0"),
        ({"jobs": 1.5}, TypeError, "jobs must be a positive integer, got float"),
        ({"jobs": True}, TypeError, "jobs must be a positive integer, got bool"),
        ({"only": "gpu"}, ValueError, "'gpu' is neither a group"),
        ({"only": ["ufunc", 3]}, TypeError, "only must be group or kernel names, got an item 3"),
        ({"only": 5}, TypeError, "only must be group or kernel names, got int"),
        ({"only": []}, ValueError, "only must name at least one"),
        ({"progress": 3}, TypeError, "progress must be callable, got int"),
    ],
)
def test_bad_arguments_name_themselves(kwargs, error, match):
    with pytest.raises(error, match=match):
        cbrtgrad.warm(**kwargs)


def test_the_command_rejects_an_unknown_name(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["warm", "--only", "ufunc,gpu"])
    assert exit_info.value.code == 2
    assert (
        "'gpu' is neither a group (ufunc, parallel, numba, jax, mlx, torch, buffers)"
        in capsys.readouterr().err
    )


def test_with_the_cache_off_warm_says_there_is_nowhere_to_keep_them(monkeypatch, capsys):
    monkeypatch.setenv("CBRTGRAD_CACHE", "0")
    _config.settings.cache_clear()
    try:
        with pytest.raises(RuntimeError, match="the kernel cache is off"):
            cbrtgrad.warm("ufunc cube_root float32")
        assert cli.main(["warm", "--no-progress"]) == 2
        assert "error: the kernel cache is off" in capsys.readouterr().err
    finally:
        monkeypatch.undo()
        _config.settings.cache_clear()


def test_the_report_reads_as_a_table():
    kernels = (
        warming.WarmedKernel("parallel fused float64", "compiled", 12.25),
        warming.WarmedKernel("ufunc cube_root float32", "loaded", 0.5),
    )
    text = warming.WarmReport("/c/k", kernels, 13.0, 2).describe()
    assert text.splitlines() == [
        "  compiled  parallel fused float64   12.2 s",
        "  loaded    ufunc cube_root float32   0.5 s",
        "2 kernels in /c/k: 1 compiled, 1 already cached, in 13.0 s with 2 processes",
    ]


def test_the_help_lists_every_group_one_line_each(capsys):
    with pytest.raises(SystemExit):
        cli.main(["warm", "--help"])
    lines = capsys.readouterr().out.splitlines()
    for group, what in warming.GROUPS.items():
        (line,) = [line for line in lines if line.split()[:1] == [group]]
        assert line.split(None, 1)[1] == what


#: What each bridge runs, in a fresh process: its calls on the CPU, one per
#: route (autograd or not, a few elements, a middle size, the size from
#: which the automatic choice takes the parallel backend; float32, float64,
#: half precision; the threaded handlers and loops from the size the
#: environment sets). Prints the kernels built or loaded, and how many numba
#: functions were compiled at all (numba's compile events: any dispatcher,
#: cached by cbrtgrad or not).
_BRIDGE_PRELUDE = """
import json, sys
from numba.core import event
from cbrtgrad.build import compile as _compile
from cbrtgrad import warming
compiled = []
class Compiled(event.Listener):
    def on_start(self, e):
        compiled.append(e.data["dispatcher"].py_func.__qualname__)
    def on_end(self, e):
        pass
names = warming.kernel_names(sys.argv[1]) if len(sys.argv) > 1 else []
for name in names:  # what a warm worker builds (compiled, or loaded from the cache)
    warming._build(name)
warming.use_built(names)
before = _compile.built_kernels()
event.register("numba:compile", Compiled())
"""
_BRIDGE_REPORT = """
after = _compile.built_kernels()
print(json.dumps({"before": before, "after": after, "compiled": compiled}))
"""
_BRIDGE_CALLS = {
    "torch": """
import torch, cbrtgrad.torch as ct
from cbrtgrad.torch import _native
if _native.compiler() is not None and _native.NATIVE[0] is None:
    _native.build()  # the entry's route too: built once into this cache
for dtype in (torch.float32, torch.float64):
    for n in (1, 4099, 1 << 20):
        x = torch.linspace(0.01, 2.0, n, dtype=dtype).requires_grad_()
        y = ct.cbrt(x)
        y.sum().backward()  # a broadcast gradient (one value)
        y = ct.cbrt(x)
        y.backward(x.detach() + 0.5)
        with torch.no_grad():
            ct.cbrt_grad(x, ct.cbrt(x))
            ct.cbrt_and_grad(x, x)
for dtype in (torch.float16, torch.bfloat16):
    x = torch.linspace(0.01, 2.0, 300, dtype=dtype).requires_grad_()
    ct.cbrt(x).sum().backward()
""",
    "jax": """
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp, cbrtgrad.jax as cj
for dtype in (jnp.float32, jnp.float64, jnp.float16, jnp.bfloat16):
    for n in (3, 4099, 1 << 20):
        x = jnp.linspace(0.01, 2.0, n, dtype=dtype)
        jax.jit(jax.grad(lambda v: cj.cbrt(v).astype(jnp.float32).sum()))(x).block_until_ready()
        cj.cbrt_grad(x, cj.cbrt(x)).block_until_ready()
""",
    "mlx": """
import mlx.core as mx, cbrtgrad.mlx as cm
for dtype in (mx.float32, mx.float64, mx.float16, mx.bfloat16):
    for n in (3, 4099):
        x = mx.linspace(0.01, 2.0, n).astype(dtype)
        mx.eval(mx.grad(lambda v: cm.cbrt(v).astype(mx.float32).sum())(x))
        mx.eval(cm.cbrt_grad(x, cm.cbrt(x)))
""",
}
#: The threaded routes from a small size (the sizes the bridges take otherwise are large).
_BRIDGE_ENV = {"CBRTGRAD_JAX_PARALLEL_MIN": "1000", "CBRTGRAD_MLX_PARALLEL_MIN": "1000"}


def _bridge_run(bridge: str, *warm_first: str, cache: Path | None = None) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), **_BRIDGE_ENV)
    if cache is not None:
        env["CBRTGRAD_CACHE_DIR"] = str(cache)
    script = _BRIDGE_PRELUDE + _BRIDGE_CALLS[bridge] + _BRIDGE_REPORT
    done = subprocess.run(
        [sys.executable, "-c", script, *warm_first],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("bridge", ["torch", "jax", "mlx"])
def test_a_bridges_group_holds_every_kernel_the_bridge_runs(bridge):
    pytest.importorskip(bridge)
    # In a fresh process, what the bridge's calls build; in another, what
    # warm's workers build for the group: the first is in the second.
    ran = set(_bridge_run(bridge)["after"])
    warmed = set(_bridge_run(bridge, bridge)["before"])
    assert ran <= warmed, ran - warmed
    # Every route ran (so the check has something to find): the api's
    # kernels, the parallel loops for large arrays and the subnormal mode
    # of the bridges that call the api; their own loops.
    kinds = {name.split()[0] for name in ran} | {" ".join(name.split()[:2]) for name in ran}
    expected = {
        "torch": {"ufunc", "parallel", "keep subnormals"},
        "jax": {"XLA FFI", "ufunc", "parallel", "keep subnormals"},
        "mlx": {"MLX primitive", "buffer loop"},
    }[bridge]
    if bridge == "torch" and "PyTorch entry" in warmed:
        expected |= {"PyTorch entry", "buffer loop"}
    assert expected <= kinds, expected - kinds


@pytest.mark.slow
def test_after_warm_only_torch_a_fresh_process_compiles_nothing(tmp_path):
    # Into an empty cache, the command itself; then a new process's first
    # forward and backward of float32 and float64 through cbrtgrad.torch,
    # every route, loads every kernel and compiles no numba function at all,
    # and writes nothing into the cache.
    pytest.importorskip("torch")
    env = dict(os.environ, PYTHONPATH=str(ROOT), CBRTGRAD_CACHE_DIR=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-m", "cbrtgrad", "warm", "--only", "torch", "--no-progress"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    files = sorted(tmp_path.rglob("*"))
    first = _bridge_run("torch", cache=tmp_path)
    assert first["compiled"] == []
    assert first["after"] and set(first["after"].values()) == {"loaded"}
    assert sorted(tmp_path.rglob("*")) == files


def test_a_bridges_group_says_what_it_needs_where_its_library_is_missing(monkeypatch):
    # Where neither PyTorch nor MLX is installed (their detection stood in
    # for: both are installed here), their groups name what to install, and
    # no kernel of theirs is warmed; the jax group needs no jax (its handlers
    # are numba's).
    from cbrtgrad.cli import warm_units as _warm_units

    monkeypatch.setattr(_warm_units, "_has_torch", lambda: False)
    monkeypatch.setattr(_warm_units, "_has_mlx", lambda: False)
    needs = {
        "torch": "needs PyTorch: pip install 'cbrtgrad[torch]'",
        "mlx": "needs MLX: pip install 'cbrtgrad[mlx]'",
        "buffers": "needs MLX or PyTorch",
    }
    for group, message in needs.items():
        with pytest.raises(ValueError, match=re.escape(f"only: the group '{group}' {message}")):
            warming.kernel_names(group)
    names = warming.kernel_names()
    assert not [n for n in names if n.startswith(("PyTorch", "MLX", "buffer"))]
    assert "keep subnormals" in warming.kernel_names("jax")
