"""Write the intersphinx inventories in _inventories/, so the docs build without a network.

    python flask-submit-once/docs/make_inventories.py          # rewrite them
    python flask-submit-once/docs/make_inventories.py --check  # exit 1 if one is stale

Neither this machine nor CI can fetch a project's objects.inv, so each inventory here is
small and made by hand: only the objects these docs link to, each at the page and anchor
that project's own documentation gives it (read from its docs sources: Flask's api.rst,
redis-py's connections.rst, SQLAlchemy's session_api.rst, ...). A name is listed as Sphinx
looks it up, which is where the object's ``__module__`` says it lives; where the project
documents it under a shorter import path (``redis.client.Redis`` is documented as
``redis.Redis``), the entry points at that documented anchor. Every name is imported from
the installed packages first: one that no longer exists fails here, not as a dead link.
"""

from __future__ import annotations

import builtins
import importlib
import sys
import zlib
from pathlib import Path

from sphinx.util.inventory import InventoryFile

HERE = Path(__file__).resolve().parent / "_inventories"

#: file stem -> (project, version label of the docs URL, [(name, role, page#anchor)]).
#: The URLs themselves are in conf.py's intersphinx_mapping.
INVENTORIES: dict[str, tuple[str, str, list[tuple[str, str, str]]]] = {
    "python": (
        "Python",
        "3",
        [
            ("None", "py:data", "library/constants.html#None"),
            ("bool", "py:class", "library/functions.html#bool"),
            ("bytes", "py:class", "library/stdtypes.html#bytes"),
            ("dict", "py:class", "library/stdtypes.html#dict"),
            ("float", "py:class", "library/functions.html#float"),
            ("int", "py:class", "library/functions.html#int"),
            ("list", "py:class", "library/stdtypes.html#list"),
            ("object", "py:class", "library/functions.html#object"),
            ("str", "py:class", "library/stdtypes.html#str"),
            ("tuple", "py:class", "library/stdtypes.html#tuple"),
            ("Exception", "py:exception", "library/exceptions.html#Exception"),
            ("RuntimeError", "py:exception", "library/exceptions.html#RuntimeError"),
            ("TypeError", "py:exception", "library/exceptions.html#TypeError"),
            ("ValueError", "py:exception", "library/exceptions.html#ValueError"),
            (
                "collections.abc.Callable",
                "py:class",
                "library/collections.abc.html#collections.abc.Callable",
            ),
            (
                "collections.abc.Iterable",
                "py:class",
                "library/collections.abc.html#collections.abc.Iterable",
            ),
            (
                "collections.abc.Mapping",
                "py:class",
                "library/collections.abc.html#collections.abc.Mapping",
            ),
            (
                "collections.abc.Sequence",
                "py:class",
                "library/collections.abc.html#collections.abc.Sequence",
            ),
            ("secrets", "py:module", "library/secrets.html#module-secrets"),
        ],
    ),
    "flask": (
        "Flask",
        "stable",
        [
            ("flask.Flask", "py:class", "api/#flask.Flask"),
            ("flask.app.Flask", "py:class", "api/#flask.Flask"),
            ("flask.Response", "py:class", "api/#flask.Response"),
            ("flask.wrappers.Response", "py:class", "api/#flask.Response"),
            ("flask.testing.FlaskClient", "py:class", "api/#flask.testing.FlaskClient"),
        ],
    ),
    "werkzeug": (
        "Werkzeug",
        "stable",
        [
            (
                "werkzeug.exceptions.HTTPException",
                "py:exception",
                "exceptions/#werkzeug.exceptions.HTTPException",
            ),
            (
                "werkzeug.exceptions.BadRequest",
                "py:exception",
                "exceptions/#werkzeug.exceptions.BadRequest",
            ),
            (
                "werkzeug.exceptions.TooManyRequests",
                "py:exception",
                "exceptions/#werkzeug.exceptions.TooManyRequests",
            ),
            (
                "werkzeug.exceptions.Forbidden",
                "py:exception",
                "exceptions/#werkzeug.exceptions.Forbidden",
            ),
            (
                "werkzeug.exceptions.ServiceUnavailable",
                "py:exception",
                "exceptions/#werkzeug.exceptions.ServiceUnavailable",
            ),
            ("werkzeug.test.TestResponse", "py:class", "test/#werkzeug.test.TestResponse"),
        ],
    ),
    "markupsafe": (
        "MarkupSafe",
        "stable",
        [
            ("markupsafe.Markup", "py:class", "escaping/#markupsafe.Markup"),
        ],
    ),
    "redis": (
        "redis-py",
        "stable",
        [
            ("redis.Redis", "py:class", "connections.html#redis.Redis"),
            ("redis.client.Redis", "py:class", "connections.html#redis.Redis"),
            (
                "redis.cluster.RedisCluster",
                "py:class",
                "connections.html#redis.cluster.RedisCluster",
            ),
            ("redis.sentinel.Sentinel", "py:class", "connections.html#redis.sentinel.Sentinel"),
            (
                "redis.asyncio.client.Redis",
                "py:class",
                "connections.html#redis.asyncio.client.Redis",
            ),
            (
                "redis.asyncio.cluster.RedisCluster",
                "py:class",
                "connections.html#redis.asyncio.cluster.RedisCluster",
            ),
            (
                "redis.exceptions.RedisError",
                "py:exception",
                "exceptions.html#redis.exceptions.RedisError",
            ),
        ],
    ),
    "sqlalchemy": (
        "SQLAlchemy",
        "2.0",
        [
            ("sqlalchemy.orm.Session", "py:class", "orm/session_api.html#sqlalchemy.orm.Session"),
            (
                "sqlalchemy.orm.session.Session",
                "py:class",
                "orm/session_api.html#sqlalchemy.orm.Session",
            ),
            (
                "sqlalchemy.orm.sessionmaker",
                "py:class",
                "orm/session_api.html#sqlalchemy.orm.sessionmaker",
            ),
            (
                "sqlalchemy.orm.session.sessionmaker",
                "py:class",
                "orm/session_api.html#sqlalchemy.orm.sessionmaker",
            ),
            (
                "sqlalchemy.orm.scoped_session",
                "py:class",
                "orm/contextual.html#sqlalchemy.orm.scoped_session",
            ),
            (
                "sqlalchemy.orm.scoping.scoped_session",
                "py:class",
                "orm/contextual.html#sqlalchemy.orm.scoped_session",
            ),
            (
                "sqlalchemy.engine.Connection.exec_driver_sql",
                "py:method",
                "core/connections.html#sqlalchemy.engine.Connection.exec_driver_sql",
            ),
        ],
    ),
    "pytest": (
        "pytest",
        "stable",
        [
            ("pytest.FixtureRequest", "py:class", "reference/reference.html#pytest.FixtureRequest"),
            (
                "_pytest.fixtures.FixtureRequest",
                "py:class",
                "reference/reference.html#pytest.FixtureRequest",
            ),
        ],
    ),
}


def _exists(name: str) -> bool:
    """Whether ``name`` (a module, or a dotted path into one) is there to import."""
    if hasattr(builtins, name):
        return True
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def render(project: str, version: str, entries: list[tuple[str, str, str]]) -> bytes:
    """The inventory in Sphinx's format 2: a plain header, then zlib-compressed lines."""
    missing = [name for name, _, _ in entries if not _exists(name)]
    if missing:
        raise SystemExit(f"{project}: not in the installed packages: {', '.join(missing)}")
    header = (
        f"# Sphinx inventory version 2\n# Project: {project}\n# Version: {version}\n"
        "# The remainder of this file is compressed using zlib.\n"
    )
    body = "".join(f"{name} {role} 1 {uri} -\n" for name, role, uri in sorted(entries))
    return header.encode() + zlib.compress(body.encode(), 9)


def main(check: bool) -> int:
    stale = []
    for stem, (project, version, entries) in INVENTORIES.items():
        data = render(project, version, entries)
        # what Sphinx will read: it must parse
        InventoryFile.loads(data, uri="")
        path = HERE / f"{stem}.inv"
        if check:
            if not path.exists() or path.read_bytes() != data:
                stale.append(path.name)
        else:
            HERE.mkdir(exist_ok=True)
            path.write_bytes(data)
    for extra in sorted(set(HERE.glob("*.inv")) - {HERE / f"{s}.inv" for s in INVENTORIES}):
        if check:
            stale.append(extra.name)
        else:
            extra.unlink()
    if stale:
        print(f"stale inventories: {', '.join(stale)}; run {Path(__file__).name}", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(check="--check" in sys.argv[1:]))
