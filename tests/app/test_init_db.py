"""init-db: the migrations always, the demo catalogue only when asked (--demo, the
default in development and testing), never in production unless asked."""

from __future__ import annotations

import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from webapp import create_app
from webapp.db import make_engine

# in scripts/test --quick
pytestmark = pytest.mark.quick

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fresh_database(servers):
    name = f"init_{secrets.token_hex(4)}"
    servers.postgres.create_database(name)
    engine = make_engine(servers.postgres.url(name))
    yield servers.postgres.url(name), engine
    engine.dispose()


def products(engine) -> int:
    with engine.connect() as conn:
        return conn.scalar(text("SELECT count(*) FROM products"))


@pytest.mark.parametrize(
    ("env", "args", "seeded"),
    [
        ("production", [], False),
        ("production", ["--demo"], True),
        ("development", [], True),
        ("development", ["--no-demo"], False),
    ],
)
def test_the_demo_catalogue_is_added_only_when_asked(servers, fresh_database, env, args, seeded):
    url, engine = fresh_database
    app = create_app(
        servers.config(APP_ENV=env, DATABASE_URL=url, SECRET_KEY=secrets.token_hex(32))
    )
    try:
        result = app.test_cli_runner().invoke(args=["init-db", *args])
        listed = app.test_cli_runner().invoke(args=["products", "list"])
    finally:
        app.extensions["db"].kw["bind"].dispose()
        app.extensions["submit_once"].store.client.close()
    assert result.exit_code == 0, result.output
    assert products(engine) == (4 if seeded else 0)
    assert ("demo catalogue seeded" in result.output) is seeded
    # an empty catalogue says how to stock it
    if not seeded:
        assert "init-db --demo adds it" in result.output
        assert "'flask --app webapp products import FILE.csv' or 'products add'" in result.output
        assert listed.output.startswith(
            "No products yet: add one with 'flask --app webapp products add SKU NAME PRICE'"
        )
    else:
        assert "MUG-STONE" in listed.output


def test_the_database_module_imports_no_model():
    """Seeding lives with the command (webapp/cli.py): webapp.db needs no model."""
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, importlib.util as u; "
            "spec = u.spec_from_file_location('db_alone', 'webapp/db.py'); "
            "m = u.module_from_spec(spec); spec.loader.exec_module(m); "
            "print('webapp.shop.models' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert loaded.stdout.strip() == "False", loaded.stderr
