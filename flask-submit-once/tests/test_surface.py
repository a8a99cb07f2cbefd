"""A small surface: a handful of names from the package root, each documented, none of
their signatures showing a private type; a module per stage of a submit; no import circle
inside the library; nothing imported that it does not declare.

``python tests/test_surface.py`` prints the library's modules, their lines and imports.
"""

from __future__ import annotations

import ast
import inspect
import sys
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Response
from werkzeug.datastructures import Headers

import flask_submit_once
import flask_submit_once.testing

PACKAGE = Path(flask_submit_once.__file__).parent
#: Flask-Limiter exports 9, Flask-WTF 6; ours is one more for each kind of model a form
#: writes (a row it adds, a row it edits), and an error for a database it cannot run on
#: (raised by init_app, so an app's own start-up may catch it by name).
MOST_NAMES = 15
#: What the library may import: the standard library, what pyproject.toml declares
#: (flask, blinker, redis, sqlalchemy, psycopg), what Flask itself requires (Werkzeug,
#: Jinja, MarkupSafe, click, itsdangerous), pytest for the plugin, and Flask-WTF's error
#: when it is installed.
DECLARED = {
    "flask",
    "blinker",
    "redis",
    "sqlalchemy",
    "psycopg",
    "werkzeug",
    "jinja2",
    "markupsafe",
    "click",
    "itsdangerous",
    "pytest",
    "flask_wtf",
    "flask_submit_once",
}


#: What ``flask.typing``'s aliases name only under TYPE_CHECKING, for resolving them.
FORWARD = {"Headers": Headers, "Response": Response, "WSGIApplication": typing.Any}


def public_names() -> Iterator[tuple[str, object]]:
    for module in (flask_submit_once, flask_submit_once.testing):
        for name in module.__all__:
            yield f"{module.__name__}.{name}", getattr(module, name)


def members(thing: object) -> Iterator[tuple[str, object]]:
    """A public class's ``__init__`` and public methods and properties; a function."""
    if inspect.isfunction(thing):
        yield "", thing
    elif inspect.isclass(thing) and thing.__module__.startswith("flask_submit_once"):
        for name, member in vars(thing).items():
            if name == "__init__" or not name.startswith("_"):
                if isinstance(member, property):
                    member = member.fget
                if isinstance(member, classmethod | staticmethod):
                    member = member.__func__
                if inspect.isfunction(member):
                    yield f".{name}", member


def classes_in(hint: object) -> Iterator[type]:
    """Every class a resolved annotation names, through unions, generics and aliases."""
    if isinstance(hint, type) and not typing.get_args(hint):
        yield hint
    origin = typing.get_origin(hint)
    if isinstance(origin, type) and origin not in (type(None),):
        yield origin
    for argument in typing.get_args(hint):
        if isinstance(argument, list):
            for each in argument:
                yield from classes_in(each)
        else:
            yield from classes_in(argument)


def test_the_root_exports_a_handful_of_names_each_there_and_documented():
    names = flask_submit_once.__all__
    assert len(names) <= MOST_NAMES, names
    assert len(set(names)) == len(names)
    undocumented = [
        name
        for name, thing in public_names()
        if not isinstance(thing, str) and not (inspect.getdoc(thing) or "").strip()
    ]
    assert undocumented == []


def test_every_public_method_is_documented():
    undocumented = [
        f"{name}{member}"
        for name, thing in public_names()
        for member, function in members(thing)
        if member not in ("", ".__init__") and not inspect.getdoc(function)
    ]
    assert undocumented == []


def test_no_public_signature_shows_a_private_type():
    """What a user passes or gets back is a public name or someone else's (Flask's,
    SQLAlchemy's, redis-py's): never a class of a ``_`` module that the root does not
    export, nor a ``_name`` written in an annotation. A Protocol is no such class: it
    names a shape the user's own object has (``sessions=db``), nothing to import."""
    exported = {id(thing) for _, thing in public_names()}
    shown = []
    for name, thing in public_names():
        for member, function in members(thing):
            written = " ".join(str(value) for value in function.__annotations__.values())
            shown += [
                f"{name}{member}: {word}"
                for word in written.replace("[", " ")
                .replace("]", " ")
                .replace("|", " ")
                .replace(",", " ")
                .split()
                if word.startswith("_") or "._" in word
            ]
            for hint in typing.get_type_hints(function, localns=FORWARD).values():
                shown += [
                    f"{name}{member}: {cls.__module__}.{cls.__qualname__}"
                    for cls in classes_in(hint)
                    if cls.__module__.startswith("flask_submit_once._")
                    and id(cls) not in exported
                    and typing.Protocol not in cls.__bases__
                ]
    assert shown == []


def modules() -> dict[str, Path]:
    """Every module of the library by its dotted name (the package by its own)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = ".".join(("flask_submit_once", *path.relative_to(PACKAGE).with_suffix("").parts))
        found[name.removesuffix(".__init__")] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> tuple[set[str], set[str]]:
    """(the library's modules that ``name`` imports, the top-level packages it imports
    from outside), wherever in the file, except under ``if TYPE_CHECKING:`` (never run).
    Importing ``a.b.c`` runs ``a.b`` first: a package on the way counts, unless it is
    one of this module's own (already running when this module is imported)."""
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
            module = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([module] if module else [])])
            # `from . import x` names a module; `from .x import y` a name in one.
            targets.update(
                f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module
                for alias in node.names
            )
    inside, outside = set(), set()
    for target in targets:
        if target.split(".")[0] not in {n.split(".")[0] for n in known}:
            outside.add(target.split(".")[0])
            continue
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            inside.add(target)
        while "." in target:
            target = target.rpartition(".")[0]
            if not (name == target or name.startswith(target + ".")):
                inside.add(target)
    return inside, outside


def import_graph(found: dict[str, Path]) -> dict[str, set[str]]:
    return {name: imports(name, path, set(found))[0] for name, path in found.items()}


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


def test_no_module_of_the_library_imports_itself_through_others():
    graph = import_graph(modules())
    # the walk found the library
    assert len(graph) > 10
    assert circles(graph) == []


def test_the_check_sees_a_circle_held_by_an_import_inside_a_function(tmp_path):
    package = tmp_path / "flask_submit_once"
    package.mkdir()
    files = {
        "__init__.py": "from ._extension import SubmitOnce\n",
        "_extension.py": "from ._form import ProtectedForm\n",
        "_form.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from ._state import State\n"
        "def handle():\n    from ._extension import SubmitOnce\n",
        "_state.py": "",
    }
    found = {}
    for name, text in files.items():
        (package / name).write_text(text)
        found[f"flask_submit_once.{name[:-3]}".removesuffix(".__init__")] = package / name
    assert circles(import_graph(found)) == [
        ["flask_submit_once._extension", "flask_submit_once._form"]
    ]


def test_the_library_imports_only_what_it_declares():
    found = modules()
    outside = set().union(*(imports(name, path, set(found))[1] for name, path in found.items()))
    undeclared = outside - DECLARED - set(sys.stdlib_module_names)
    assert undeclared == set()


@pytest.mark.parametrize("module", sorted(modules()))
def test_every_module_says_what_it_is_for(module: str):
    assert ast.get_docstring(ast.parse(modules()[module].read_text()))


if __name__ == "__main__":
    graph, paths = import_graph(modules()), modules()
    for name in sorted(graph):
        lines = len(paths[name].read_text().splitlines())
        print(f"{name:34} {lines:4}  -> {', '.join(sorted(graph[name])) or '-'}")
    print("circles:", circles(graph) or "none")
    print(f"root names: {len(flask_submit_once.__all__)}")
