"""``flask --app webapp`` without the environment: the app's commands are listed,
and running one says what to set, never with a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
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
    # init-db, reconcile-refunds, find-order …
    assert set(app.cli.commands) <= listed
    assert "init-db" in listed
    assert "--demo" in flask("init-db", "--help").stdout
    assert "sku,name,price_eur" in flask("products", "import", "--help").stdout


@pytest.mark.parametrize(
    "args",
    [
        ["init-db"],
        ["reconcile-refunds"],
        ["run"],
        ["products", "list"],
        ["ship-order", "2222222222"],
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
