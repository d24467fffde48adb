"""The command line: verify, bench and info, and its errors."""

import json
import subprocess
import sys

import pytest

from cbrtgrad import cli


def test_verify_small_run_passes(tmp_path, capsys):
    out = tmp_path / "verify.json"
    assert cli.main(["verify", "-n", "500", "--backends", "cpu,numpy", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "cpu" in text and "pass" in text
    rows = json.loads(out.read_text())["rows"]
    assert {r["backend"] for r in rows} == {"cpu", "numpy"}


def test_bench_writes_json(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert cli.main(["bench", "--sizes", "2000", "--repeat", "2", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    anchors = {r["anchor"] for r in rows}
    assert {"np.cbrt", "scipy.special.cbrt", "copy", "g/(3*y*y)"} <= anchors
    assert all(r["speedup"] > 0 for r in rows)


def test_bench_engine_rows(tmp_path, capsys):
    out = tmp_path / "bench.json"
    argv = ["bench", "--sizes", "1000", "--repeat", "1", "--engine", "--json", str(out)]
    assert cli.main(argv) == 0
    assert "cbrt(x).sum().backward()" in capsys.readouterr().out
    engine = json.loads(out.read_text())["engine"]
    cases = [r["case"] for r in engine]
    assert any("auto" in c for c in cases) and any("1 element" in c for c in cases)
    assert all(r["ratio"] > 0 and r["cbrtgrad_s"] > 0 for r in engine)


def test_info_lists_backends(capsys):
    assert cli.main(["info"]) == 0
    text = capsys.readouterr().out
    assert "numba" in text and "cpu" in text and "available" in text


@pytest.mark.parametrize(
    "argv",
    [
        ["verify", "-n", "0"],
        ["verify", "-n", "ten"],
        ["bench", "--backends", "gpu9"],
        ["frobnicate"],
        [],
    ],
)
def test_bad_arguments_exit_2(argv):
    with pytest.raises(SystemExit) as excinfo:
        cli.main(argv)
    assert excinfo.value.code == 2


def test_python_dash_m():
    done = subprocess.run(
        [sys.executable, "-m", "cbrtgrad", "--version"], capture_output=True, text=True, check=True
    )
    assert done.stdout.startswith("cbrtgrad ")


@pytest.mark.parametrize(
    "argv",
    [
        ["bench", "--dask", "--dask-gb", "0"],
        ["bench", "--dask", "--dask-gb", "two"],
        ["bench", "--dask", "--workers", "0"],
    ],
)
def test_bad_dask_bench_arguments_exit_2(argv):
    with pytest.raises(SystemExit) as excinfo:
        cli.main(argv)
    assert excinfo.value.code == 2


def test_bench_dask_prints_and_writes_the_rows(tmp_path, capsys, monkeypatch):
    # The measurement itself runs in tests/test_distributed.py on its cluster;
    # here only the command's wiring (arguments in, table and JSON out).
    from cbrtgrad import benchmarking

    seen = {}

    def rows(**kwargs):
        seen.update(kwargs)
        return [benchmarking.DaskBenchRow("cbrt", "dask, 3 workers", 0.5, 0.25, 2.0)]

    monkeypatch.setattr(benchmarking, "dask_rows", rows)
    out = tmp_path / "dask.json"
    argv = ["bench", "--dask", "--dask-gb", "0.5", "--workers", "3", "--json", str(out)]
    assert cli.main(argv) == 0
    assert seen == {"gigabytes": 0.5, "n_workers": 3, "repeat": 5}
    assert "dask, 3 workers" in capsys.readouterr().out
    assert json.loads(out.read_text())["dask_rows"][0]["gb_per_s"] == 2.0


def test_info_prints_the_vector_isa_and_each_loops_shape(capsys):
    from cbrtgrad._isa import host_isa

    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    assert host_isa().name in out
    assert "ufunc forward" in out and "parallel fused" in out
    # No loop may be compiled wider than the CPU's vectors.
    for line in out.splitlines():
        if "-bit, interleave" in line:
            width = int(line.split("-bit")[0].split()[-1])
            assert width <= host_isa().vector_bits
