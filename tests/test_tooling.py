"""The project's tools (the fits behind the kernels' coefficients, the GPU scripts, the
kernel comparison) behave as documented.

ruff, mypy, the docs build and the asv smoke run are steps of ``.ci/run`` of their
own (each with its own clear failure), not tests; the whole asv suite runs under
the slow marker in tests/test_asv.py."""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _run(*argv, cwd=ROOT, timeout=900, env=None):
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def _load_tool(name: str):  # type: ignore[no-untyped-def]
    import importlib.util

    path = pathlib.Path(__file__).resolve().parent.parent / "tools" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_float32_quadratic_is_the_fit_the_kernel_uses():
    # The coefficients in formulas_f32.py are the tool's minimax quadratic (to the
    # precision Lawson's iteration reaches), and their error, by mpmath, is
    # the 2^-27.4 docs/mathematics.md uses.
    from cbrtgrad.kernels.formulas import f32 as formulas

    tool = _load_tool("fit_cbrt_f32_series")
    coefficients, worst = tool.fit(-0.00705, 6e-7)
    kernel = (formulas._P0, formulas._P1, formulas._P2)
    assert all(abs(c - k) <= 1e-8 * abs(k) for c, k in zip(coefficients, kernel, strict=True))
    assert 2.0**-27.5 < worst < 2.0**-27.4
    assert tool.max_error(kernel, -0.00705, 6e-7) < 2.0**-27.4
    with pytest.raises(ValueError, match="LO"):
        tool.fit(0.1, -0.1)


@pytest.mark.slow
def test_float32_newton_step_range_covers_every_float32():
    # The range the quadratic is fitted on holds e = xs r^3 - 1 for every
    # normal float32 (2^31 of them through the kernel's own step 1).
    lo, hi = _load_tool("fit_cbrt_f32_series").e_range()
    assert -0.00705 < lo < -0.0069 and 0.0 < hi < 6e-7


def test_float64_inverse_polynomial_error_is_the_one_the_proof_uses():
    # The kernel's coefficients (formulas_f64.py, as the tool lists them):
    # their error, by mpmath, is the 2^-32.2 docs/mathematics.md uses (the
    # proof needs 2^-31.5).
    from cbrtgrad.kernels.formulas import f64 as formulas

    tool = _load_tool("fit_cbrt_f64_inverse")
    kernel = tool.KERNEL_COEFFICIENTS
    assert kernel[0] == formulas._Q0 and kernel[-1] == formulas._Q5
    assert tool.max_error(kernel, -0.0993, 0.1064) < 2.0**-32.2
    with pytest.raises(ValueError, match="LO"):
        tool.fit(0.1, -0.1)


@pytest.mark.slow
def test_float64_inverse_polynomial_is_the_fit_the_kernel_uses():
    # The coefficients are the tool's minimax polynomial (2000 Lawson steps
    # of a 40,000-point least squares: 13 s on 2 cores, so nightly).
    tool = _load_tool("fit_cbrt_f64_inverse")
    coefficients, worst = tool.fit(-0.0993, 0.1064)
    kernel = tool.KERNEL_COEFFICIENTS
    assert all(abs(c - k) <= 1e-7 * abs(k) for c, k in zip(coefficients, kernel, strict=True))
    assert 2.0**-32.3 < worst < 2.0**-32.2


@pytest.mark.slow
def test_float64_bit_trick_range_covers_every_float64():
    # The range the polynomial is fitted on holds e = a r0^3 - 1 for every
    # positive normal float64 (2^31 high words, both ends of each; 7 s).
    lo, hi = _load_tool("fit_cbrt_f64_inverse").e_range()
    assert -0.0993 < lo < -0.099 and 0.106 < hi < 0.1064


@pytest.mark.parametrize(
    "argv",
    [
        ["no-such-ref-cbrtgrad"],
        ["HEAD", "--rounds", "0"],
        ["HEAD", "--sizes", "0"],
        ["HEAD", "--dtypes", "float16"],
    ],
)
def test_compare_tool_rejects_bad_arguments_before_compiling(argv, capsys):
    tool = _load_tool("compare_kernels_with_commit")
    with pytest.raises(SystemExit) as exit_info:
        tool.main(argv)
    assert exit_info.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_gpu_check_without_a_gpu_says_so_and_exits_2():
    """tools/gpu_check.py on a machine without a GPU (or CuPy): a sentence and exit 2."""
    root = pathlib.Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, str(root / "tools" / "gpu_check.py"), "--repeat", "1"],
        capture_output=True, text=True, cwd=root, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "no GPU to check" in done.stdout or "no CuPy" in done.stdout


def test_gpu_session_without_a_gpu_says_so_and_exits_2(tmp_path):
    """tools/gpu_session.sh (every GPU check in one run) here, with no GPU: a sentence, exit 2."""
    done = subprocess.run(
        ["bash", str(ROOT / "tools" / "gpu_session.sh")],
        capture_output=True, text=True, timeout=300, env=dict(os.environ, OUT=str(tmp_path)),
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "no CUDA GPU here" in done.stdout
