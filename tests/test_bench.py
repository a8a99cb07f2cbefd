"""The benchmark is a client of the library like any other: it imports only public names
of ``flask_submit_once``, and it stays smaller than the library it measures."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = ROOT / "flask-submit-once/src/flask_submit_once"


def library_names_imported(path: Path) -> set[tuple[str, str]]:
    """(module, name) for every ``from flask_submit_once... import name`` in ``path``."""
    return {(node.module, alias.name) for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom) and node.level == 0
            and (node.module or "").split(".")[0] == "flask_submit_once" for alias in node.names}


def test_the_benchmark_imports_only_public_names_of_the_library():
    imported = set().union(*map(library_names_imported, ROOT.glob("bench/*.py")))
    assert ("flask_submit_once", "TokenStore") in imported  # the walk found the imports
    for module, name in sorted(imported):
        public = getattr(importlib.import_module(module), "__all__", ())
        assert name in public, f"bench imports {module}.{name}, which is not public"
        assert not any(part.startswith("_") for part in module.split(".")), module


def test_the_benchmark_is_smaller_than_the_library():
    def lines(paths) -> int:
        return sum(len(path.read_text().splitlines()) for path in paths)
    assert lines(ROOT.glob("bench/**/*.py")) < lines(LIBRARY.glob("*.py"))
