"""``import cbrtgrad`` loads the core only: no scipy, tqdm or matplotlib, no measuring module.

The measuring code a user runs is the subpackage ``cbrtgrad.cli.bench``: no core
module imports it (checked in the source, by walking each module's imports),
and ``import cbrtgrad`` loads none of it (checked in a fresh interpreter). The
rest, behind the docs' tables and figures, is ``tools/measuring`` (issue 34),
which no module of the package imports at all: it is not shipped.
"""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "cbrtgrad"

MEASURING = [
    "cbrtgrad.verification.progress",
    "cbrtgrad.verification.text",
    "cbrtgrad.verification.report",
    "cbrtgrad.verification.exhaustive",
]
HEAVY = ["scipy", "tqdm", "matplotlib", "mpmath", "jax", "dask", "torch"]

#: The modules outside the core: the measuring package and the command line
#: that runs it (its subcommands import it when they run).
NOT_CORE = {"cli", "__main__.py"}


def _loaded_after(statement):
    # A fresh interpreter: this test session has imported everything already.
    code = f"import json, sys; {statement}; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(done.stdout))


def _is_bench(module):
    return module == "cbrtgrad.cli.bench" or module.startswith("cbrtgrad.cli.bench.")


@pytest.mark.parametrize("statement", ["import cbrtgrad", "import cbrtgrad.cli.main"])
def test_import_leaves_the_measuring_tools_out(statement):
    loaded = _loaded_after(statement)
    assert "cbrtgrad" in loaded
    assert not [m for m in MEASURING if m in loaded]
    assert not [m for m in loaded if _is_bench(m)]
    assert not [m for m in HEAVY if m in loaded]


def test_the_subcommand_that_measures_imports_them():
    loaded = _loaded_after("from cbrtgrad.cli.bench import anchors")
    assert {"cbrtgrad.cli.bench.anchors", "cbrtgrad.verification.text", "scipy"} <= loaded


def _core_modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] not in NOT_CORE:
            yield relative


def _imported(source, relative):
    """Every module an ``import`` statement of ``source`` (the file ``relative``) names."""
    # The package a relative import starts from: the file's folder, for a
    # module and for an __init__.py alike.
    package = ["cbrtgrad", *relative.parts[:-1]]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            start = ".".join([*base, node.module] if node.module else base)
            yield start
            # ``from .. import bench`` names the module in the alias.
            yield from (f"{start}.{alias.name}" for alias in node.names)


def test_the_core_imports_nothing_of_the_measuring_package():
    # Every import in the source counts, also those inside functions or under
    # TYPE_CHECKING: the core must not need cbrtgrad.cli.bench at any time.
    core = list(_core_modules())
    assert Path("api.py") in core and Path("engine", "tensor.py") in core
    offenders = {}
    for relative in core:
        source = (PACKAGE / relative).read_text(encoding="utf-8")
        found = sorted(m for m in _imported(source, relative) if _is_bench(m))
        if found:
            offenders[str(relative)] = found
    assert offenders == {}


@pytest.mark.parametrize(
    ("source", "caught"),
    [
        ("from .bench import timing", True),
        ("from . import bench", True),
        ("import cbrtgrad.cli.bench.anchors", True),
        ("def f():\n    from .bench.calls import call_rows", True),
        ("from .. import benchmarking, engine", False),
        ("from ..engine import bench", False),  # cbrtgrad.engine.bench: not the package
        ("from ._bench_helpers import x", False),
    ],
)
def test_the_import_walk_resolves_relative_imports(source, caught):
    # As if the line were in cbrtgrad/cli/main.py.
    names = list(_imported(source, Path("cli", "main.py")))
    assert any(_is_bench(m) for m in names) == caught, names


def test_no_module_of_the_package_imports_the_tools():
    # tools/ (the measuring code behind the docs, the fits, the GPU checks) is
    # not in the wheel: an import of it anywhere in cbrtgrad, also inside a
    # function, would fail on a user's machine.
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        names = _imported(path.read_text(encoding="utf-8"), relative)
        found = sorted(m for m in names if m == "tools" or m.startswith("tools."))
        if found:
            offenders[str(relative)] = found
    assert offenders == {}
    # The walk sees such an import inside a function.
    walked = _imported("def f():\n    from tools.measuring import gpu", Path("cli.py"))
    assert "tools.measuring.gpu" in set(walked)
