"""``python tools/measure.py``: the measurements that left ``cbrtgrad bench`` (issue 34).

Each subcommand's wiring (arguments in, table and JSON out, its errors); the
measurements themselves are checked by their modules' doctests and tests
(tests/test_peers.py, test_plot.py, test_distributed.py, test_measuring.py).
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools import measure
from tools.measuring import dask_table, mlx_threads, pytorch

ROOT = Path(__file__).resolve().parents[1]


def _installed(monkeypatch, name, installed):
    # What a subcommand asks before measuring, answered for ``name`` alone.
    real = measure.importlib.util.find_spec

    def find_spec(module, *args):
        if module == name:
            return object() if installed else None
        return real(module, *args)

    monkeypatch.setattr(measure.importlib.util, "find_spec", find_spec)


def test_torch_rows_are_printed_and_written(tmp_path, capsys, monkeypatch):
    # The wiring: the rows of tools.measuring.pytorch (measured by its doctest and
    # asv), printed and in the JSON; a stand-in keeps inductor's compile out of here.
    row = {"case": "c", "cbrtgrad_s": 2e-3, "anchor": "a", "anchor_s": 1e-2, "ratio": 0.2}
    monkeypatch.setattr(pytorch, "torch_rows", lambda repeat: [dict(row, case=f"r{repeat}")])
    _installed(monkeypatch, "torch", True)
    out = tmp_path / "torch.json"
    assert measure.main(["torch", "--repeat", "1", "--json", str(out)]) == 0
    assert "r1" in capsys.readouterr().out
    assert json.loads(out.read_text())["torch"] == [dict(row, case="r1")]


def test_torch_without_torch_is_an_error_naming_the_extra(capsys, monkeypatch):
    _installed(monkeypatch, "torch", False)
    assert measure.main(["torch"]) == 2
    assert "cbrtgrad[torch]" in capsys.readouterr().err


@pytest.mark.parametrize("sizes", [(0,), (10**5, 2.5), (True,)])
def test_torch_rows_name_a_bad_compile_size(sizes):
    with pytest.raises(ValueError, match="compile_sizes must be ints >= 1"):
        pytorch.torch_rows(repeat=1, compile_sizes=sizes)


def test_bare_kernels_put_the_kernels_back_after_an_error():
    pytest.importorskip("torch")
    from cbrtgrad.torch import _cpu

    kept = _cpu.cube_root, _cpu.cube_root_grad
    with pytest.raises(KeyError), pytorch.bare_kernels():
        assert _cpu.cube_root is not kept[0] and _cpu.cube_root_grad is not kept[1]
        raise KeyError("inside")
    assert (_cpu.cube_root, _cpu.cube_root_grad) == kept


def test_mlx_threads_rows_are_printed_and_written(tmp_path, capsys, monkeypatch):
    # The wiring: the arguments reach tools.measuring.mlx_threads (measured by
    # its doctest), whose rows are printed and in the JSON.
    row = {"load": 2, "case": "c", "calls": 3, "median_ms": 1.0, "p90_ms": 2.0, "max_ms": 6.0,
           "stalled": 1}  # fmt: skip
    seen = []

    def thread_rows(calls, rounds, loads):
        seen.append((calls, rounds, loads))
        return [row]

    monkeypatch.setattr(mlx_threads, "thread_rows", thread_rows)
    _installed(monkeypatch, "mlx", True)
    out = tmp_path / "threads.json"
    argv = ["mlx-threads", "--calls", "3", "--rounds", "2", "--loads", "0", "2", "--json", str(out)]
    assert measure.main(argv) == 0
    assert seen == [(3, 2, [0, 2])]
    assert "over 5 ms" in capsys.readouterr().out
    assert json.loads(out.read_text())["mlx_threads"] == [row]


def test_mlx_threads_without_mlx_names_the_extra(capsys, monkeypatch):
    _installed(monkeypatch, "mlx", False)
    assert measure.main(["mlx-threads"]) == 2
    assert "cbrtgrad[mlx]" in capsys.readouterr().err


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is an extra")
def test_jax_rows_are_printed_and_written(tmp_path, capsys):
    out = tmp_path / "jax.json"
    assert measure.main(["jax", "--repeat", "1", "--json", str(out)]) == 0
    assert "jnp.cbrt" in capsys.readouterr().out
    cases = [r["case"] for r in json.loads(out.read_text())["jax"]]
    assert any("jax.grad" in c and "1e6" in c for c in cases)
    assert any("FFI route" in c for c in cases) and any("pure_callback" in c for c in cases)


def test_jax_without_jax_says_what_to_install(capsys, monkeypatch):
    from tools.measuring import jax_rows

    monkeypatch.setattr(jax_rows, "absent", lambda: "jax is not installed (cbrtgrad[jax])")
    assert measure.main(["jax"]) == 2
    assert "cbrtgrad[jax]" in capsys.readouterr().err


def test_dask_prints_and_writes_the_rows(tmp_path, capsys, monkeypatch):
    # The measurement itself runs in tests/test_distributed.py on its cluster;
    # here only the command's wiring (arguments in, table and JSON out).
    seen = {}

    def rows(**kwargs):
        seen.update(kwargs)
        return [dask_table.DaskBenchRow("cbrt", "dask, 3 workers", 0.5, 0.25, 2.0)]

    monkeypatch.setattr(dask_table, "dask_rows", rows)
    _installed(monkeypatch, "distributed", True)
    out = tmp_path / "dask.json"
    argv = ["dask", "--dask-gb", "0.5", "--workers", "3", "--json", str(out)]
    assert measure.main(argv) == 0
    assert seen == {"gigabytes": 0.5, "n_workers": 3, "repeat": 5}
    assert "dask, 3 workers" in capsys.readouterr().out
    assert json.loads(out.read_text())["dask_rows"][0]["gb_per_s"] == 2.0


BAD_ARGUMENTS = {
    "--dask-gb 0": (["dask", "--dask-gb", "0"], "positive number"),
    "--dask-gb inf": (["dask", "--dask-gb", "inf"], "positive number"),
    "--dask-gb nan": (["dask", "--dask-gb", "nan"], "positive number"),
    "--dask-gb -1": (["dask", "--dask-gb", "-1"], "positive number"),
    "--dask-gb two": (["dask", "--dask-gb", "two"], "positive number"),
    "--workers 0": (["dask", "--workers", "0"], "positive integer"),
    "--workers 1.5": (["dask", "--workers", "1.5"], "positive integer"),
    "--runs 0": (["startup", "--runs", "0"], "positive integer"),
    "peers --sizes 2.5": (["peers", "--sizes", "10", "2.5"], "positive integer"),
    "numba --repeat inf": (["numba", "--repeat", "inf"], "positive integer"),
    "mlx-threads --loads x": (["mlx-threads", "--loads", "x"], "integer from 0 to 16"),
    "mlx-threads --loads 17": (["mlx-threads", "--loads", "0", "17"], "integer from 0 to 16"),
    "mlx-threads --calls 0": (["mlx-threads", "--calls", "0"], "positive integer"),
    "plot --backends gpu9": (["plot", "x.png", "--backends", "gpu9"], "unknown backend"),
}


@pytest.mark.parametrize("case", BAD_ARGUMENTS)
def test_bad_arguments_are_argparse_errors_with_a_message(case, capsys):
    # The same argparse types as cbrtgrad bench: exit 2 before any work.
    argv, message = BAD_ARGUMENTS[case]
    with pytest.raises(SystemExit) as excinfo:
        measure.main(argv)
    assert excinfo.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_cuda_without_a_gpu_says_so_and_exits_2(capsys):
    from cbrtgrad.backends import availability

    status = availability("cuda")
    if status.available and "simulator" not in status.reason:
        pytest.skip("this machine has a GPU")
    assert measure.main(["cuda", "--sizes", "1000", "--repeat", "1"]) == 2
    assert "the cuda backend needs a GPU" in capsys.readouterr().err


def test_runs_as_a_script_from_anywhere(tmp_path):
    # By hand, ``python tools/measure.py``: the script finds this tree's
    # cbrtgrad and tools.measuring itself, from any folder.
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "measure.py"), "--help"],
        capture_output=True, text=True, cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    for command in ("peers", "plot", "dask", "startup", "torch", "jax", "numba", "cuda"):
        assert command in done.stdout
