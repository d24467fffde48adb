"""No import circle inside the package, deferred or not, and no import to a higher layer.

The graph has an edge from module A to module B when A imports B anywhere:
at the top, inside a function, or under ``if TYPE_CHECKING`` (a circle that
only a deferred import keeps from failing is still a circle for a reader).
``from . import x`` counts as importing ``x`` when ``x`` is a module, else
the package; ``from .m import name`` as importing ``m`` (and ``m``'s
packages, which Python runs first, are not counted: a package's
``__init__`` importing its own modules is how packages work).
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "cbrtgrad"

#: Circles known today, by their sorted members, each to be removed by its
#: own change (none since the engine was split, issue 25). A circle not listed
#: here fails; one listed here that is gone fails too, so the list shrinks.
KNOWN_CIRCLES: set[tuple[str, ...]] = set()


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, pathlib.Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, path: pathlib.Path, modules: dict[str, pathlib.Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                stem = f"{base}.{node.module}" if node.module else base
            else:
                stem = node.module or ""
            # ``from pkg import mod`` imports the module; ``from mod import name`` the module.
            targets = [
                f"{stem}.{alias.name}" if f"{stem}.{alias.name}" in modules else stem
                for alias in node.names
            ]
        else:
            continue
        found.update(t for t in targets if t in modules and t != name)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    # A module's import of its own package (``from . import x`` resolving to
    # the package) is not a circle in itself: Python has run the package first.
    for name, targets in graph.items():
        targets -= {p for p in targets if name.startswith(p + ".")}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[tuple[str, ...]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(tuple(sorted(component)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_imports_inside_functions():
    graph = _graph()
    # cli.py imports the verification package only inside its commands.
    assert "cbrtgrad.verification.exhaustive" in graph["cbrtgrad.cli.main"]
    assert "cbrtgrad.backends._catalog" in graph["cbrtgrad.backends.dask_blocks"]


def test_the_finder_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [("a", "b", "c")]


def test_no_import_circle_but_the_known_ones():
    circles = set(_circles(_graph()))
    assert circles - KNOWN_CIRCLES == set(), "new import circles"


@pytest.mark.parametrize("circle", sorted(KNOWN_CIRCLES), ids=lambda c: "+".join(c))
@pytest.mark.xfail(reason="a known circle (KNOWN_CIRCLES), to be removed by issue 25", strict=True)
def test_known_circle_is_gone(circle):
    assert circle not in set(_circles(_graph()))


#: The package's layers, from the bottom: a module imports only modules of its
#: own layer or of the layers below (docs/architecture.md draws them). The
#: bridges sit side by side on the engine; verification and the command line
#: use everything below them.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("_config", "_version"),
    ("build",),
    ("kernels",),
    ("arrays",),
    ("backends",),
    ("api", "ufunc"),
    ("engine",),
    ("numba", "torch", "jax", "mlx"),
    ("verification",),
    ("cli", "warming", "__main__", ""),
)


def _layer(module: str) -> int:
    top = module.split(".")[1] if "." in module else ""
    for level, rooms in enumerate(LAYERS):
        if top in rooms:
            return level
    raise AssertionError(f"{module} is in no layer of LAYERS: place its folder in the picture")


def test_every_module_is_in_a_layer():
    for module in _modules():
        _layer(module)


def test_no_import_from_a_lower_layer_to_a_higher_one():
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in _graph().items()
        for target in targets
        if _layer(target) > _layer(module)
    )
    assert upward == []


def test_the_layer_check_sees_an_upward_import():
    assert _layer("cbrtgrad.kernels.cpu.blocks") < _layer("cbrtgrad.engine.tensor")
    assert _layer("cbrtgrad.build.cache") < _layer("cbrtgrad.torch._native")
