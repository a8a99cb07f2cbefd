"""Configuration and database set-up."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory
from flask import Flask
from sqlalchemy import text

from flask_submit_once.signals import submit_committed, token_consumed
from tests.app.test_hardening import KEY
from webapp import api, create_app, db, health, redis_urls, webhooks
from webapp.config import DEV_SECRET_KEY, RENAMED
from webapp.extensions import submit_once
from webapp.webhooks.signatures import HEADER, sign

# in scripts/test --quick
pytestmark = pytest.mark.quick

ROOT = Path(__file__).resolve().parents[2]
#: The newest migration, as Alembic finds it (init-db must leave the database there).
MIGRATIONS_HEAD = ScriptDirectory(str(ROOT / "webapp/migrations")).get_current_head()


@pytest.fixture
def environ(monkeypatch, servers):
    for name in (
        "APP_ENV",
        "SECRET_KEY",
        "DATABASE_URL",
        "REDIS_URL",
        "SUBMIT_ONCE_TTL_SECONDS",
        *RENAMED,
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATABASE_URL", servers.database_url)
    monkeypatch.setenv("REDIS_URL", servers.redis.url)
    return monkeypatch


def test_production_without_secret_key_refuses_to_start_and_says_how_to_fix_it(environ):
    with pytest.raises(RuntimeError, match="(?s)SECRET_KEY is not set.*secrets.token_hex"):
        create_app()


def test_production_refuses_the_development_secret(environ):
    environ.setenv("SECRET_KEY", DEV_SECRET_KEY)
    with pytest.raises(RuntimeError, match="development secret"):
        create_app()


def test_production_with_a_secret_starts_with_secure_cookies(environ):
    environ.setenv("SECRET_KEY", KEY)
    app = create_app()
    assert app.config["SESSION_COOKIE_SECURE"] and app.config["SESSION_COOKIE_HTTPONLY"]
    assert app.config["SESSION_COOKIE_SAMESITE"] == "Lax"
    assert app.config["SUBMIT_ONCE_TTL_SECONDS"] == 3600


def test_development_runs_on_the_dev_secret(environ):
    environ.setenv("APP_ENV", "development")
    environ.setenv("SUBMIT_ONCE_TTL_SECONDS", "600")
    app = create_app()
    assert (
        app.config["SECRET_KEY"] == DEV_SECRET_KEY and app.config["SUBMIT_ONCE_TTL_SECONDS"] == 600
    )
    # the CSRF token lives as long
    assert app.config["WTF_CSRF_TIME_LIMIT"] == 600


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("SUBMIT_ONCE_TTL_SECONDS", "soon", "must be a number"),
        ("SUBMIT_ONCE_TTL_SECONDS", "1.5", "whole number"),
        ("APP_ENV", "staging", "is not one of"),
        ("SUBMIT_ONCE_REDIS_AWAY_ACCEPT_SUBMITS", "maybe", "true or false"),
        ("SUBMIT_ONCE_MAX_FORMS_PER_SESSION", "-1", "must not be negative"),
        ("SUBMIT_ONCE_WAIT_SECONDS", "-1", "must not be negative"),
    ],
)
def test_bad_settings_stop_start_up_with_a_clear_message(environ, name, value, message):
    environ.setenv("SECRET_KEY", KEY)
    environ.setenv(name, value)
    with pytest.raises(RuntimeError, match=message):
        create_app()


def test_missing_database_url_says_what_to_set(environ):
    environ.setenv("APP_ENV", "development")
    environ.delenv("DATABASE_URL")
    with pytest.raises(RuntimeError, match="DATABASE_URL is not set"):
        create_app()


@pytest.mark.parametrize("old, new", sorted(RENAMED.items()))
def test_an_old_setting_name_stops_start_up_naming_the_new_one(environ, old, new):
    environ.setenv("SECRET_KEY", KEY)
    with pytest.raises(RuntimeError, match=f"{old} was renamed: set {new} instead"):
        create_app({old: "1"})
    environ.setenv(old, "1")
    with pytest.raises(RuntimeError, match=f"{old} was renamed: set {new} instead"):
        create_app()


def test_there_are_no_test_hook_settings(environ):
    # Pauses for tests are receivers of the product's signals (tests/support/pauses.py);
    # the product neither reads nor refuses TEST_* settings: they mean nothing to it.
    environ.setenv("SECRET_KEY", KEY)
    environ.setenv("TEST_PAUSE_AFTER_CONSUME", "60")
    app = create_app({"TEST_PAUSE_AFTER_COMMIT": 60})
    assert not [*token_consumed.receivers_for(app), *submit_committed.receivers_for(app)]
    # SQLAlchemy's session event "after_commit" (webapp/metrics.py counts orders on it)
    # is no test hook.
    packages = (ROOT / "webapp", ROOT / "flask-submit-once/src/flask_submit_once")
    assert all(package.is_dir() for package in packages)
    offenders = [
        f"{path.relative_to(ROOT)}: {word}"
        for package in packages
        for path in package.rglob("*.py")
        for word in ("TEST_", "test_hooks", "after_consume", "after_commit")
        if word in path.read_text().replace('"after_commit"', "")
    ]
    assert offenders == []


def test_init_db_is_safe_to_run_twice(app, servers):
    runner = app.test_cli_runner()
    for _ in range(2):
        result = runner.invoke(args=["init-db"])
        assert result.exit_code == 0, result.output
        assert "catalogue seeded" in result.output
    with servers.engine.connect() as conn:
        assert conn.scalar(text("SELECT count(*) FROM products")) == 4
        assert conn.scalar(text("SELECT version_num FROM alembic_version")) == MIGRATIONS_HEAD


def test_testing_set_by_create_app_reads_the_catalogue_afresh_and_production_caches_it(
    environ, servers
):
    assert create_app(servers.config()).config["CATALOGUE_CACHE_SECONDS"] == 0
    environ.setenv("SECRET_KEY", KEY)
    assert create_app().config["CATALOGUE_CACHE_SECONDS"] == 5


def test_blueprints_take_redis_when_they_use_it_so_init_order_carries_no_meaning(servers):
    """The API and the webhook register before SubmitOnce, which owns the Redis
    client; they ask it for the client per request, so both still work. SubmitOnce is
    given the client and the sessions as the factory gives them (webapp/__init__.py)."""
    app = Flask(__name__)
    app.config.update(servers.config(SUBMIT_ONCE_WAIT_SECONDS=1))
    api.init_app(app)
    webhooks.init_app(app)
    app.register_blueprint(health.bp)
    db.init_app(app)
    submit_once.init_app(
        app, sessions=app.extensions["db"], client=redis_urls.make_client(app.config["REDIS_URL"])
    )
    try:
        client = app.test_client()
        assert client.get("/readyz").get_json()["checks"]["redis"]["status"] == "up"
        body = json.dumps(
            {
                "id": "evt_1",
                "type": "payment.succeeded",
                "order_id": "AAAAAAAAAAAAAAAAAAAAAA",
                "amount_cents": 100,
                "currency": "EUR",
            }
        ).encode()
        response = client.post(
            "/webhooks/payments",
            data=body,
            content_type="application/json",
            headers={HEADER: sign(webhooks.DEV_SECRET, body)},
        )
        assert response.status_code == 422 and response.get_json()["errors"] == {
            "order_id": "unknown order"
        }
    finally:
        app.extensions["db"].kw["bind"].dispose()
        with app.app_context():
            submit_once.redis.close()
