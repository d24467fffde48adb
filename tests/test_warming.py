"""``cbrtgrad warm``: every kernel compiled into the cache ahead of first use."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import cbrtgrad
from cbrtgrad import _cache, _config, cli, warming
from cbrtgrad.kernels import cpu

ROOT = Path(__file__).resolve().parents[1]

_FIRST_CALL = """
import numpy as np, cbrtgrad
from cbrtgrad import _compile
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
    assert len(names) == len(set(names)) == sum(len(g) for g in warming._units().values())
    for group in warming.GROUPS:
        assert warming.kernel_names(group)
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
