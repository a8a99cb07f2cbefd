"""``flask --app webapp`` without the environment: the app's commands are listed,
and running one says what to set, never with a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from webapp.cli import RENAMED

ROOT = Path(__file__).resolve().parents[2]
UNSET = ("APP_ENV", "SECRET_KEY", "DATABASE_URL", "REDIS_URL", "FLASK_APP")


def flask(*args: str) -> subprocess.CompletedProcess:
    env = {name: value for name, value in os.environ.items() if name not in UNSET}
    return subprocess.run(
        [sys.executable, "-m", "flask", "--app", "webapp", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_help_without_the_environment_lists_every_command_of_the_app(app):
    shown = flask("--help")
    assert shown.returncode == 0, shown.stderr
    assert "Traceback" not in shown.stdout + shown.stderr
    listed = {
        line.split()[0] for line in shown.stdout.split("Commands:")[1].splitlines() if line.strip()
    }
    # init-db, orders, refunds … (not the old names, hidden)
    shown_commands = {name for name, command in app.cli.commands.items() if not command.hidden}
    assert shown_commands <= listed
    assert {"init-db", "orders", "refunds", "payments", "api-keys", "products"} <= listed
    assert not listed & set(RENAMED)
    assert "--demo" in flask("init-db", "--help").stdout
    assert "sku,name,price_eur" in flask("products", "import", "--help").stdout


@pytest.mark.parametrize(
    "args",
    [
        ["init-db"],
        ["refunds", "reconcile"],
        ["run"],
        ["products", "list"],
        ["orders", "ship", "2222222222"],
    ],
)
def test_a_command_without_the_environment_says_what_to_set(args):
    ran = flask(*args)
    assert ran.returncode != 0
    assert "SECRET_KEY is not set" in ran.stderr and "secrets.token_hex(32)" in ran.stderr
    assert "Traceback" not in ran.stdout + ran.stderr


def test_gunicorn_and_code_still_get_the_error_itself(monkeypatch):
    from webapp import create_app

    for name in UNSET:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(RuntimeError, match="SECRET_KEY is not set"):
        create_app()


def test_every_operator_command_has_help_an_operator_can_read(app):
    """Each group and each command in it says what it does in ``--help``."""
    runner = app.test_cli_runner()
    for name in ("orders", "refunds", "payments", "api-keys", "products", "mail"):
        group = app.cli.commands[name]
        assert group.help, name
        for sub in group.commands.values():
            assert sub.help and len(sub.help.split()) >= 4, f"flask {name} {sub.name}"
            shown = runner.invoke(args=[name, sub.name, "--help"])
            assert shown.exit_code == 0 and f"{name} {sub.name}" in shown.output


@pytest.mark.parametrize(("old", "new"), sorted(RENAMED.items()))
def test_an_old_command_name_stops_and_names_the_new_one(app, old, new):
    """An operator's script with a flat name fails (exit 2) saying what to type; the
    new name runs (its --help here)."""
    ran = app.test_cli_runner().invoke(args=[old, "KX7P2M9QRT", "--by", "ada"])
    assert ran.exit_code == 2
    assert f"'flask {old}' is now 'flask {new}'" in ran.output
    assert app.test_cli_runner().invoke(args=[*new.split(), "--help"]).exit_code == 0
