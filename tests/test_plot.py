"""``python tools/measure.py plot``: the curve it measures, the figure it draws, and its errors."""

import json
import subprocess
import sys
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest

from tools import measure
from tools.measuring import curves, plotting
from tools.measuring.curves import CurvePoint

ROOT = Path(__file__).resolve().parents[1]


def test_bench_plot_measures_and_draws(tmp_path, capsys):
    png, data = tmp_path / "curve.png", tmp_path / "curve.json"
    argv = ["plot", str(png), "--sizes", "64", "4096", "--repeat", "2"]
    assert measure.main([*argv, "--backends", "cpu,numpy", "--json", str(data)]) == 0
    captured = capsys.readouterr()
    assert "100.0%" in captured.err  # the progress bar reached its end
    assert "cbrtgrad[cpu]" in captured.out and f"plot written to {png}" in captured.out
    points = json.loads(data.read_text())["curve"]
    assert {(p["series"], p["dtype"], p["n"]) for p in points} == {
        (s, d, n)
        for s in ("cbrtgrad[cpu]", "cbrtgrad[numpy]", "np.cbrt", "scipy.special.cbrt")
        for d in ("float32", "float64")
        for n in (64, 4096)
    }
    assert all(np.isfinite(p["ns_per_element"]) and p["ns_per_element"] > 0 for p in points)
    image = matplotlib.image.imread(png)
    assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 400
    assert image[..., :3].std() > 0.05  # lines and text, not a blank canvas


def test_plot_defaults_to_every_host_backend(tmp_path, capsys):
    # Under the test session's CUDA simulator, cuda is available but takes
    # device arrays only, so the curve leaves it out.
    png = tmp_path / "c.png"
    assert measure.main(["plot", str(png), "--sizes", "32", "--repeat", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("CPU: ")  # every table says its CPU and ISA
    header = lines[1]
    hosts = curves.host_backends()
    assert "cuda" not in hosts and {"cpu", "numpy", "parallel"} <= set(hosts)
    for name in hosts:
        assert f"cbrtgrad[{name}]" in header


def test_figure_has_one_line_per_series_and_the_measured_values(tmp_path):
    points = [
        CurvePoint(series, dtype, n, value * (1 + 10 / n))
        for series, value in (("cbrtgrad[cpu]", 1.3), ("np.cbrt", 0.4), ("scipy.special.cbrt", 18))
        for dtype in ("float32", "float64")
        for n in (10, 1000, 100_000)
    ]
    figure = plotting.plot_curve(points, str(tmp_path / "f.svg"), title="t")
    assert [ax.get_title() for ax in figure.axes] == ["float32", "float64"]
    for ax in figure.axes:
        assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
        lines = {line.get_label(): line for line in ax.get_lines()}
        assert set(lines) == {"cbrtgrad[cpu]", "np.cbrt", "scipy.special.cbrt"}
        np.testing.assert_allclose(lines["np.cbrt"].get_xdata(), [10, 1000, 100_000])
        np.testing.assert_allclose(
            lines["np.cbrt"].get_ydata(), [0.4 * 2, 0.4 * 1.01, 0.4 * 1.0001]
        )
    assert (tmp_path / "f.svg").read_text().lstrip().startswith("<?xml")


def test_missing_matplotlib_fails_before_measuring(tmp_path):
    # NOTE: a None entry in sys.modules makes ``import matplotlib`` raise
    # ModuleNotFoundError (the documented "module cache" rule of the import
    # system), as on a machine without the plot extra.
    png = tmp_path / "never.png"
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from tools import measure\n"
        f"sys.exit(measure.main(['plot', {str(png)!r}]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2
    assert "needs matplotlib" in done.stderr and "cbrtgrad[plot]" in done.stderr
    assert "elapsed" not in done.stderr and not png.exists()


@pytest.mark.parametrize(
    ("name", "message"), [("curve.docx", "unknown format 'docx'"), ("nowhere/c.png", "no folder")]
)
def test_bad_plot_path_exits_2(tmp_path, capsys, name, message):
    with pytest.raises(SystemExit) as excinfo:
        measure.main(["plot", str(tmp_path / name)])
    assert excinfo.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"sizes": ()}, "sizes must be positive ints"),
        ({"sizes": (0,)}, "sizes must be positive ints"),
        ({"sizes": (10,), "repeat": 0}, "repeat must be an int >= 1"),
        ({"sizes": (10,), "backends": ("cuda",)}, "does not take numpy arrays"),
        ({"sizes": (10,), "backends": ("gpu9",)}, "unknown backend 'gpu9'"),
    ],
)
def test_curve_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        curves.curve(progress=False, **kwargs)


def test_plot_curve_needs_points(tmp_path):
    with pytest.raises(ValueError, match="at least one point"):
        plotting.plot_curve([], str(tmp_path / "x.png"))
