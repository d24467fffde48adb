"""The documentation site: its examples run, the API reference lists every public
name, and every public function has an example that the doctest run collects.

The build itself (warnings as errors) is a step of ``.ci/run``; the tests marked
``built_docs`` check the site that step built (``CBRTGRAD_DOCS_HTML``) and are
skipped without one (tests/conftest.py)."""

import configparser
import doctest
import importlib
import importlib.util
import inspect
import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

import cbrtgrad
import cbrtgrad.backends
import cbrtgrad.engine
import cbrtgrad.numba

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md")) + [ROOT / "README.md"]
NAMESPACES: tuple[object, ...] = (cbrtgrad, cbrtgrad.backends, cbrtgrad.engine, cbrtgrad.numba)
# The JAX bridge is an extra ('cbrtgrad[jax]'): its names and its page are checked where jax is.
HAS_JAX = importlib.util.find_spec("jax") is not None
if HAS_JAX:
    NAMESPACES += (importlib.import_module("cbrtgrad.jax"),)
NEEDS_JAX = {"jax.md"}
#: The MLX bridge likewise where MLX is (the mlx extra).
HAS_MLX = importlib.util.find_spec("mlx") is not None
if HAS_MLX:
    NAMESPACES += (importlib.import_module("cbrtgrad.mlx"),)
NEEDS_MLX = {"mlx.md"}
#: The PyTorch bridge is checked where PyTorch is installed (the torch extra).
HAS_TORCH = importlib.util.find_spec("torch") is not None
if HAS_TORCH:
    import cbrtgrad.torch

    NAMESPACES += (cbrtgrad.torch,)


def _public() -> dict[str, object]:
    names = {}
    for module in NAMESPACES:
        for name in module.__all__:
            obj = getattr(module, name)
            if not inspect.ismodule(obj) and not name.startswith("__"):
                names[f"{module.__name__}.{name}"] = obj
    return names


def _needs_example() -> list[str]:
    # Every public function, and the classes of cbrtgrad and cbrtgrad.backends
    # (cbrtgrad.engine's op nodes are documented by the ops that record them).
    return sorted(
        name
        for name, obj in _public().items()
        if inspect.isfunction(obj)
        or (inspect.isclass(obj) and not name.startswith("cbrtgrad.engine."))
    )


@pytest.fixture(scope="module")
def built_site() -> Path:
    """The site ``.ci/run`` built with warnings as errors (``CBRTGRAD_DOCS_HTML``)."""
    html = Path(os.environ["CBRTGRAD_DOCS_HTML"]).resolve()
    assert (html / "index.html").is_file(), f"no built site in {html}"
    return html


class _Assets(HTMLParser):
    """The scripts, style sheets and images a page loads, and the maths elements it holds."""

    def __init__(self) -> None:
        super().__init__()
        self.loads: list[str] = []
        self.maths = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag in ("script", "img") and found.get("src"):
            self.loads.append(found["src"] or "")
        if tag == "link" and "stylesheet" in (found.get("rel") or "") and found.get("href"):
            self.loads.append(found["href"] or "")
        if "math" in (found.get("class") or "").split():
            self.maths += 1


@pytest.mark.built_docs
def test_built_site_has_every_page_and_api_entry(built_site):
    html = built_site
    api = (html / "api.html").read_text(encoding="utf-8")
    for qualified, obj in _public().items():
        # A name cbrtgrad re-exports is documented under cbrtgrad.
        name = qualified.rsplit(".", 1)[1]
        target = f"cbrtgrad.{name}" if getattr(cbrtgrad, name, None) is obj else qualified
        assert f'id="{target}"' in api, f"{qualified} has no entry in the API reference"
    pages = ("quickstart", "mathematics", "accuracy", "performance", "backends", "engine")
    for page in (*pages, "pytorch", "mlx"):
        assert (html / f"{page}.html").is_file()
    assert (html / "_images" / "bench_curve.png").is_file()
    assert "MathJax" in (html / "mathematics.html").read_text(encoding="utf-8")


@pytest.mark.built_docs
def test_built_site_loads_nothing_from_the_network(built_site):
    # The site renders offline: every script, style sheet and image a page
    # loads is a file of the build (no CDN), MathJax included, and the pages
    # with maths load it. (tools/check_docs_site.py checks the same, and that
    # the maths is rendered, in a headless browser.)
    html = built_site
    mathjax = set()
    for page in sorted(html.glob("*.html")):
        assets = _Assets()
        assets.feed(page.read_text(encoding="utf-8"))
        for src in assets.loads:
            assert not re.match(r"^([a-z]+:)?//", src), f"{page.name} loads {src}"
            path = (page.parent / src.split("?")[0]).resolve()
            assert path.is_file() and html.resolve() in path.parents, f"{page.name}: {src}"
        scripts = {src.split("?")[0] for src in assets.loads if "mathjax" in src.lower()}
        if assets.maths:
            assert scripts, f"{page.name} has maths but loads no MathJax"
        mathjax |= scripts
    assert mathjax, "no page loads MathJax"
    for css in (html / "_static").rglob("*.css"):
        text = css.read_text(encoding="utf-8", errors="replace")
        assert not re.search(r"(@import|url\()\s*[\"']?(https?:)?//", text), css.name


@pytest.mark.built_docs
def test_pages_lead_with_the_generated_tables(built_site):
    # The performance and accuracy pages open with the short tables that
    # docs/_ext/generated_tables.py renders from docs/generated/, above the
    # method and the raw dumps, each table naming its file and machine.
    html = built_site
    performance = (html / "performance.html").read_text(encoding="utf-8")
    lead = performance.split('id="how-it-is-measured"')[0]
    assert "bench_curve.png" in lead
    for source in ("bench_table.txt", "peers_table.txt", "gpu_check_h200.json"):
        assert f"docs/generated/{source}" in lead
    assert "CPU: " in lead and "GPU: " in lead
    assert lead.count("<table") == 2
    accuracy = (html / "accuracy.html").read_text(encoding="utf-8")
    lead = accuracy.split('id="how-it-is-measured"')[0]
    assert "docs/generated/verify_table.txt" in lead and lead.count("<table") == 1


def test_api_reference_lists_every_public_name():
    text = (DOCS / "api.rst").read_text(encoding="utf-8")
    listed = set()
    module = "cbrtgrad"
    for line in text.splitlines():
        current = re.match(r"\.\. currentmodule:: (\S+)", line)
        if current:
            module = current.group(1)
        entry = re.match(r"\.\. auto(?:function|class|exception):: (\S+)", line)
        if entry:
            name = entry.group(1)
            listed.add(name if name.startswith("cbrtgrad.") else f"{module}.{name}")
    # A name exported from two namespaces (cbrtgrad.Tensor is cbrtgrad.engine.Tensor)
    # needs one entry.
    documented = {id(obj) for name, obj in _public().items() if name in listed}
    missing = [name for name, obj in _public().items() if id(obj) not in documented]
    assert missing == []


@pytest.mark.parametrize("qualified", _needs_example())
def test_public_function_has_a_collected_example(qualified):
    obj = _public()[qualified]
    doc = inspect.getdoc(obj) or ""
    assert "Examples\n--------" in doc, f"{qualified} has no Examples section"
    # The example must be one that `pytest --doctest-modules cbrtgrad` runs:
    # found in the defining module, under that module's name.
    target = inspect.unwrap(obj)
    home = importlib.import_module(target.__module__)
    tests = {t.name: t for t in doctest.DocTestFinder().find(home) if t.examples}
    assert f"{home.__name__}.{target.__qualname__}" in tests


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_page_examples_run(page):
    if page.name in NEEDS_JAX and not HAS_JAX:
        pytest.skip("jax is not installed (pip install 'cbrtgrad[jax]')")
    if page.name in NEEDS_MLX and not HAS_MLX:
        pytest.skip("MLX is not installed (pip install 'cbrtgrad[mlx]')")
    if page.stem == "pytorch" and not HAS_TORCH:
        pytest.skip("the PyTorch page's examples need PyTorch (the torch extra)")
    if page.stem == "frameworks" and not (HAS_TORCH and HAS_JAX and HAS_MLX):
        pytest.skip("the frameworks page runs PyTorch, JAX and MLX (the torch, jax and mlx extras)")
    result = doctest.testfile(
        str(page),
        module_relative=False,
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
        encoding="utf-8",
        verbose=False,
        report=True,
    )
    assert result.failed == 0
    runnable = ("quickstart", "mathematics", "engine", "frameworks", "jax", "pytorch", "mlx")
    if page.stem in (*runnable, "README"):
        assert result.attempted >= 2, f"{page.name} lost its runnable examples"


def test_test_extra_installs_docs_and_plot_extras():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    extras = config["options.extras_require"]

    def names(extra: str) -> set[str]:
        return {re.split(r"[<>=\[ ]", r.strip())[0] for r in extras[extra].split("\n") if r.strip()}

    docs = {"sphinx", "numpydoc", "pydata-sphinx-theme", "myst-parser", "sphinx-mathjax-offline"}
    assert docs <= names("docs")
    assert names("docs") | names("plot") <= names("test")


def test_make_plots_writes_the_page_figures(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("make_plots", DOCS / "make_plots.py")
    make_plots = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_plots)
    argv = ["--out", str(tmp_path), "--table-sizes", "1000", "--curve-sizes", "64", "--repeat", "1"]
    argv += ["-n", "64"]
    assert make_plots.main(argv) == 0
    assert "kernel" in (tmp_path / "bench_table.txt").read_text()
    assert "max ulp" in (tmp_path / "verify_table.txt").read_text()
    curve = (tmp_path / "bench_curve.txt").read_text()
    assert (
        "cbrtgrad[cpu]" in curve and "scipy.special.cbrt" in curve and "plot written" not in curve
    )
    assert "custom run" in (tmp_path / "machine.txt").read_text()
    assert (tmp_path / "bench_curve.png").read_bytes()[1:4] == b"PNG"
    # The committed figures the performance page includes exist.
    committed = ("verify_table.txt", "exhaustive.txt", "bench_table.txt", "bench_curve.txt")
    for name in (*committed, "machine.txt", "bench_curve.png"):
        assert (DOCS / "generated" / name).is_file()


def test_documented_accuracy_is_the_verification_bars():
    # The bounds the README, the api docstring and the accuracy page state
    # are the ones cbrtgrad.verification.cases.BARS holds (and verify checks).
    from cbrtgrad.verification.cases import BARS

    f32, f64 = BARS[np.dtype(np.float32)], BARS[np.dtype(np.float64)]
    both_correctly_rounded = f32.forward_correctly_rounded and f64.forward_correctly_rounded
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split("\n\n")[1].split())
    claim = "correctly rounded in float32" in readme and "and in float64" in readme
    assert claim == both_correctly_rounded
    api_doc = " ".join(cbrtgrad.cbrt.__doc__.split())
    assert ("Correctly rounded for every float32 and float64 input" in api_doc) == (
        both_correctly_rounded
    )
    page = (DOCS / "accuracy.md").read_text(encoding="utf-8")
    paragraph = " ".join(page.split("The bars are stated once", 1)[1].split("\n\n")[0].split())
    stated = {float(v) for v in re.findall(r"(\d+(?:\.\d+)?) ulp", paragraph)}
    bars = {
        value
        for bar in (f32, f64)
        for value in (bar.forward_max_ulp, bar.grad_max_ulp, bar.grad_given_y_max_ulp)
    }
    assert stated and stated <= bars | {0.5}
    if both_correctly_rounded:
        assert f32.forward_max_ulp == f64.forward_max_ulp == 0.5
        assert "float32 and float64 forward correctly rounded (0.5 ulp)" in paragraph


def test_generated_tables_are_the_files_figures(tmp_path):
    # The lead tables (docs/_ext/generated_tables.py) print each bench and
    # verify figure as its file has it, compute the GPU ratios from the JSON's
    # microseconds, and refuse a file of another layout by name.
    pytest.importorskip("sphinx")
    from sphinx.errors import ExtensionError

    spec = importlib.util.spec_from_file_location(
        "generated_tables", DOCS / "_ext" / "generated_tables.py"
    )
    tables = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tables)
    generated = DOCS / "generated"
    bench = (generated / "bench_table.txt").read_text(encoding="utf-8").splitlines()
    machine, ratios = tables.bench_ratios(generated / "bench_table.txt")
    assert f"CPU: {machine}" == bench[0]
    rows = [line.split() for line in bench[3:] if line.strip()]
    assert rows and sum(len(cells) for cells in ratios.values()) == len(rows)
    for row in rows:
        assert row[-1] in ratios[(row[0], f"`{' '.join(row[5:-2])}`")].values()
    device, gpu = tables.gpu_ratios(generated / "gpu_check_h200.json")
    assert "H200" in device
    times = {
        (row["dtype"], row["kernel"]): row["us"]
        for row in json.loads((generated / "gpu_check_h200.json").read_text())["throughput"]
    }
    cupy = times[("float64", "cupy.cbrt (libdevice)")]
    assert gpu[("cbrt", "`cupy.cbrt (libdevice)`")]["float64"] == (
        f"{cupy / times[('float64', 'cbrtgrad forward, out=')]:.2f}"
    )
    bad = tmp_path / "bench.txt"
    bad.write_text("CPU: somewhere\nno table here\n", encoding="utf-8")
    with pytest.raises(ExtensionError, match="bench.txt"):
        tables.bench_ratios(bad)
    with pytest.raises(ExtensionError, match="bench.txt"):
        tables.peer_ratios(bad)
    with pytest.raises(ExtensionError, match="bench.txt"):
        tables.gpu_ratios(bad)
