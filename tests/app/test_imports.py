"""No import circle in the shop or the library: the graph of who imports whom, read from
the source with ast. Every import counts, at module level or inside a function (an
import moved into a function to break a circle still is one), and so does every package
on the way to a module (importing ``a.b.c`` runs ``a.b``'s ``__init__`` first); only
``if TYPE_CHECKING:`` blocks are left out, since they never run.

``python tests/app/test_imports.py`` prints the module map: modules, lines, and the imports
between the shop's features.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

# in scripts/test --quick
pytestmark = pytest.mark.quick

ROOT = Path(__file__).resolve().parents[2]
TREES = {
    "webapp": ROOT / "webapp",
    "flask_submit_once": ROOT / "flask-submit-once/src/flask_submit_once",
}


def modules() -> dict[str, Path]:
    """Every module by its dotted name (a package by its own name)."""
    found = {}
    for top, folder in TREES.items():
        for path in sorted(folder.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            name = ".".join((top, *path.relative_to(folder).with_suffix("").parts))
            found[name.removesuffix(".__init__")] = path
    return found


def imported_by(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``name`` imports, wherever in the file."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    never_run = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for node in ast.walk(block)
    }
    targets: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in never_run:
            continue
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            # `from . import x` names a module; `from .x import y` a name in one.
            targets.update(
                f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module
                for alias in node.names
            )
    found = set()
    for target in targets:
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)
        # Importing a.b.c runs a and a.b first: a package on the way counts, unless it
        # is one of this module's own (already running when this module is imported).
        while "." in target:
            target = target.rpartition(".")[0]
            if not (name == target or name.startswith(target + ".")):
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    paths = modules()
    return {name: imported_by(name, path, set(paths)) for name, path in paths.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while (top := stack.pop()) != module:
                group.append(top)
            if group:
                found.append(sorted([module, *group]))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_no_module_of_the_shop_or_the_library_imports_itself_through_others():
    graph = import_graph()
    # the walk found the shop and the library
    assert len(graph) > 50
    assert {name.split(".")[0] for name in graph} == set(TREES)
    assert circles(graph) == []


def test_the_check_sees_a_circle_held_by_an_import_inside_a_function(tmp_path, monkeypatch):
    """The circle this test was written for: db → models → order_rules → db, the last
    step an import inside a function."""
    package = tmp_path / "webapp"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "db.py").write_text("from .models import Product\n")
    (package / "models.py").write_text("from .order_rules import NAME_MAX\n")
    (package / "order_rules.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .models import Order\n"
        "def find_order():\n    from .db import sessions\n"
    )
    monkeypatch.setitem(TREES, "webapp", package)
    monkeypatch.setitem(TREES, "flask_submit_once", tmp_path / "none")
    assert circles(import_graph()) == [["webapp.db", "webapp.models", "webapp.order_rules"]]


def test_the_check_sees_a_circle_through_a_package_on_the_way(tmp_path, monkeypatch):
    """The loop the API and the webhook had: importing ``api.problems`` runs ``api``
    first, whose ``__init__`` imports ``api.openapi``, which imports the webhook."""
    package = tmp_path / "webapp"
    for folder, files in {
        "api": {
            "__init__.py": "from . import openapi\n",
            "openapi.py": "from ..webhooks.event import Event\n",
            "problems.py": "",
        },
        "webhooks": {"__init__.py": "", "event.py": "from ..api.problems import ApiProblem\n"},
    }.items():
        (package / folder).mkdir(parents=True)
        for name, text in files.items():
            (package / folder / name).write_text(text)
    (package / "__init__.py").write_text("")
    monkeypatch.setitem(TREES, "webapp", package)
    monkeypatch.setitem(TREES, "flask_submit_once", tmp_path / "none")
    assert circles(import_graph()) == [
        ["webapp.api", "webapp.api.openapi", "webapp.webhooks.event"]
    ]


def test_the_check_sees_a_circle_in_the_library(tmp_path, monkeypatch):
    """The circle the library once had: the extension used its form helper, which called
    back into the extension."""
    package = tmp_path / "flask_submit_once"
    package.mkdir()
    (package / "__init__.py").write_text("from ._extension import SubmitOnce\n")
    (package / "_extension.py").write_text("from ._form import ProtectedForm\n")
    (package / "_form.py").write_text("def handle():\n    from . import _extension\n")
    monkeypatch.setitem(TREES, "webapp", tmp_path / "none")
    monkeypatch.setitem(TREES, "flask_submit_once", package)
    assert circles(import_graph()) == [["flask_submit_once._extension", "flask_submit_once._form"]]


def feature(module: str) -> str:
    """``webapp.orders.views`` → ``webapp.orders``; the library is one feature."""
    return (
        "flask_submit_once"
        if module.startswith("flask_submit_once")
        else ".".join(module.split(".")[:2])
    )


if __name__ == "__main__":
    graph, paths = import_graph(), modules()
    for top in TREES:
        names = [name for name in graph if name.split(".")[0] == top]
        lines = sum(len(paths[name].read_text().splitlines()) for name in names)
        print(f"{top}: {len(names)} modules, {lines} lines")
    between: dict[str, set[str]] = defaultdict(set)
    for module, targets in graph.items():
        between[feature(module)].update(
            feature(target) for target in targets if feature(target) != feature(module)
        )
    print(f"imports between features: {sum(map(len, between.values()))}")
    for name in sorted(between):
        print(f"  {name} -> {', '.join(sorted(between[name])) or '-'}")
    print("circles:", circles(graph) or "none")
