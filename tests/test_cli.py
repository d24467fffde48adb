"""The command line: verify, bench and info, and its errors."""

import argparse
import json
import os
import pathlib
import subprocess
import sys
from types import SimpleNamespace

import pytest

from cbrtgrad.cli import args as _cli_types
from cbrtgrad.cli import main as cli
from cbrtgrad.cli.bench import calls

ROOT = pathlib.Path(__file__).resolve().parents[1]


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


def test_bench_calls_rows(tmp_path, capsys):
    out = tmp_path / "bench.json"
    argv = ["bench", "--sizes", "1000", "--repeat", "1", "--calls", "--json", str(out)]
    assert cli.main(argv) == 0
    assert "cbrt(x, out=o), 1 float64" in capsys.readouterr().out
    small = json.loads(out.read_text())["calls"]
    assert [r["anchor"] for r in small].count("np.cbrt(x), 1 float64") == 5
    assert small[-1]["case"] == "cbrt(x), 1,000 float64"
    assert all(r["ratio"] > 0 and r["cbrtgrad_s"] > 0 and r["anchor_s"] > 0 for r in small)
    with pytest.raises(ValueError, match="repeat must be an int >= 1"):
        calls.call_rows(repeat=0)


def test_bench_engine_rows(tmp_path, capsys):
    out = tmp_path / "bench.json"
    argv = ["bench", "--sizes", "1000", "--repeat", "1", "--engine", "--json", str(out)]
    assert cli.main(argv) == 0
    text = capsys.readouterr().out
    assert "cbrt(x).sum().backward()" in text
    engine = json.loads(out.read_text())["engine"]
    cases = [r["case"] for r in engine]
    assert any("auto" in c for c in cases) and any("1 element" in c for c in cases)
    assert all(r["ratio"] > 0 and r["cbrtgrad_s"] > 0 for r in engine)
    # The JAX bridge's rows moved with its peer comparison: the line names the tool.
    assert "python tools/measure.py jax" in text


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


@pytest.mark.parametrize("flag", sorted(cli.MOVED_FLAGS))
def test_each_moved_bench_flag_names_the_tool_that_runs_it(flag, capsys):
    # The measuring code of these flags is not in the package; the flag
    # is an argparse error (exit 2, nothing measured) naming the command now.
    argv = ["bench", flag, *(["out.png"] if flag == "--plot" else [])]
    with pytest.raises(SystemExit) as excinfo:
        cli.main(argv)
    assert excinfo.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    command, *option = cli.MOVED_FLAGS[flag].split()
    assert f"{flag} moved out of the package" in captured.err
    assert f"python tools/measure.py {command}" in captured.err
    # The named subcommand exists, and takes the flag's option where it had one.
    from tools import measure

    with pytest.raises(SystemExit) as excinfo:
        measure.main([command, "--help"])
    assert excinfo.value.code == 0
    usage = capsys.readouterr().out
    assert f"measure.py {command}" in usage
    assert not option or option[0] in usage


def test_bench_on_the_cuda_backend_names_the_tool(capsys, monkeypatch):
    # The cuda rows (CuPy arrays against the GPU's anchors) moved to
    # tools/measure.py cuda; said before the host table is measured.
    from cbrtgrad.backends import _registry

    real = _registry.availability

    def availability(name):
        return SimpleNamespace(available=True, reason="a GPU") if name == "cuda" else real(name)

    monkeypatch.setattr(_registry, "availability", availability)
    assert cli.main(["bench", "--backends", "cpu,cuda"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "the cuda rows moved out of the package" in captured.err
    assert "python tools/measure.py cuda" in captured.err


def test_info_prints_the_vector_isa_and_each_loops_shape(capsys):
    from cbrtgrad.build.isa import host_isa

    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    assert host_isa().name in out
    assert "ufunc forward" in out and "parallel fused" in out
    # No loop may be compiled wider than the CPU's vectors.
    for line in out.splitlines():
        if "-bit, interleave" in line:
            width = int(line.split("-bit")[0].split()[-1])
            assert width <= host_isa().vector_bits


# -- issue 24: every bad argument is an argparse error (exit 2) before any work --------
BAD_ARGUMENTS = {
    "verify -n inf": (["verify", "-n", "inf"], "positive integer"),
    "verify -n nan": (["verify", "-n", "nan"], "positive integer"),
    "verify -n 1.5": (["verify", "-n", "1.5"], "positive integer"),
    "verify -n -3": (["verify", "-n", "-3"], "positive integer"),
    "verify -n 1e300": (["verify", "-n", "1e300"], "up to 2^53"),
    "bench --sizes inf": (["bench", "--sizes", "inf"], "positive integer"),
    "bench --sizes 10 2.5": (["bench", "--sizes", "10", "2.5"], "positive integer"),
    "bench --repeat inf": (["bench", "--repeat", "inf"], "positive integer"),
    "empty --backends": (["verify", "--backends", ""], "at least one backend"),
    "--backends ,": (["bench", "--backends", " , "], "at least one backend"),
    "accelerate off macOS": (["verify", "--backends", "cpu,accelerate"], "unavailable here"),
}


@pytest.mark.parametrize("case", BAD_ARGUMENTS)
def test_bad_arguments_are_argparse_errors_with_a_message(case, capsys):
    argv, message = BAD_ARGUMENTS[case]
    if "accelerate" in case and sys.platform == "darwin":
        pytest.skip("Accelerate is available on macOS")
    with pytest.raises(SystemExit) as excinfo:
        cli.main(argv)
    assert excinfo.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_json_to_a_folder_or_a_missing_directory_fails_before_the_run(tmp_path, capsys):
    for argv in (
        ["verify", "--json", str(tmp_path)],
        ["verify", "--json", str(tmp_path / "missing" / "out.json")],
        ["bench", "--json", str(tmp_path)],
        ["bench", "--engine", "--json", str(tmp_path / "no" / "such.json")],
    ):
        with pytest.raises(SystemExit) as excinfo:
            cli.main(argv)  # a run would take seconds and print a table first
        assert excinfo.value.code == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        assert "--json" in captured.err and ("directory" in captured.err)


def _run_cli(*argv, **env):
    environment = {**os.environ, **env}
    return subprocess.run(
        [sys.executable, "-m", "cbrtgrad", *argv],
        capture_output=True,
        text=True,
        env=environment,
        cwd=str(ROOT),
    )


def test_cuda_without_a_gpu_is_an_argparse_error():
    done = _run_cli("verify", "--backends", "cuda", "-n", "10", NUMBA_ENABLE_CUDASIM="0")
    from cbrtgrad.backends import _registry

    if "no CUDA GPU" not in done.stderr and done.returncode == 0:
        pytest.skip("this machine has a GPU")
    assert done.returncode == 2, done.stderr
    assert "backend 'cuda' is unavailable here" in done.stderr
    assert "Traceback" not in done.stderr
    assert _registry.known()


def test_unknown_environment_backend_names_the_variable():
    done = _run_cli("info", CBRTGRAD_BACKEND="gpu")
    assert done.returncode == 2
    assert "environment variable CBRTGRAD_BACKEND: unknown backend 'gpu'" in done.stderr
    assert "Traceback" not in done.stderr
    code = "import numpy as np, cbrtgrad; cbrtgrad.cbrt(np.ones(2))"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "CBRTGRAD_BACKEND": "gpu"},
        cwd=str(ROOT),
    )
    assert "ValueError: cbrtgrad: environment variable CBRTGRAD_BACKEND" in done.stderr
    done = _run_cli("info", CBRTGRAD_BACKEND="cpu", CBRTGRAD_PARALLEL_MIN="many")
    assert done.returncode == 2 and "CBRTGRAD_PARALLEL_MIN" in done.stderr


# -- issue 38: counts bounded by memory; a closed pipe ends the command quietly --------
@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["verify", "-n", "1e15"], "-n"),
        (["verify", "-n", str(2**53)], "-n"),  # the largest the number parser takes
        (["bench", "--sizes", "1000", "1e14"], "--sizes"),
    ],
)
def test_counts_beyond_memory_are_argparse_errors(argv, flag, capsys):
    if _cli_types.available_memory() is None:
        assert not sys.platform.startswith("linux")  # /proc/meminfo is always there
        pytest.skip("this platform does not say how much memory it has")
    with pytest.raises(SystemExit) as excinfo:
        cli.main(argv)  # before the bound, a MemoryError traceback after the first tables
    assert excinfo.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    assert f"argument {flag}: " in captured.err and "enough for at most" in captured.err


def test_the_memory_bound_is_bytes_per_element_times_the_count():
    memory = (10 * cli.VERIFY_BYTES_PER_INPUT * 1000 + 5, "available memory")
    assert _cli_types.within_memory(10_000, cli.VERIFY_BYTES_PER_INPUT, memory) == 10_000
    with pytest.raises(argparse.ArgumentTypeError, match=r"available memory .* at most 10000$"):
        _cli_types.within_memory(10_001, cli.VERIFY_BYTES_PER_INPUT, memory)
    assert _cli_types.within_memory(2**53, 64, None) == 2**53  # nothing known: not bounded


def test_available_memory_is_at_most_the_physical_memory():
    memory = _cli_types.available_memory()
    if memory is None or not hasattr(os, "sysconf"):
        pytest.skip("this platform does not say how much memory it has")
    assert 0 < memory[0] <= os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def test_a_widowed_pipe_is_told_from_an_open_one():
    # Only a standard stream whose reader is gone is a closed pipe to quit
    # on; any other BrokenPipeError stays an error.
    read_end, write_end = os.pipe()
    with os.fdopen(write_end, "w") as stream:
        assert not cli._reader_gone(stream)
        os.close(read_end)
        assert cli._reader_gone(stream)
    assert not cli._reader_gone(None)


def test_a_closed_stdout_ends_the_command_quietly():
    # The reader closed before the command writes (as `cbrtgrad verify | head
    # -1` once head has quit): no traceback, no "Exception ignored" at exit,
    # the status a shell gives a program that SIGPIPE ended. `info` is the
    # command that compiles nothing; every command prints through the same
    # main. (argparse's own --help and --version ignore a failed write.)
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "cbrtgrad", "info"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            cwd=str(ROOT),
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert done.stderr == ""
    assert done.returncode == cli.BROKEN_PIPE_STATUS == 141
