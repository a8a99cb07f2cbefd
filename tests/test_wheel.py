"""The wheel as a deployment gets it: built from the checkout, installed (not editable)
into a fresh venv, and run from a folder outside the checkout against a fresh database.

Nothing here imports the checkout's code into the installed app: every command runs
with the fresh venv's Python, in a folder that holds no source. About 30-60 s, most of
it pip installing the dependencies (from pip's cache after the first run).
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from dev.embedded import free_port
from tests.conftest import Servers
from tests.live import open_form, request

ROOT = Path(__file__).resolve().parent.parent
NOT_SHIPPED = {".git", ".venv", "instance", "node_modules", "build", "dist", "__pycache__",
               ".pytest_cache", ".ruff_cache", ".hypothesis"}
WEBHOOK_SECRET = "wheel-smoke-webhook-secret-of-32-bytes-and-more"

# Building and installing (the module fixture) is counted in the first test's time.
pytestmark = pytest.mark.timeout(300)


@dataclass
class Installed:
    wheel: Path
    venv: Path
    outside: Path  # the working folder: no source code in it

    def command(self, name: str) -> str:
        return str(self.venv / "bin" / name)


def data_files(folder: str) -> set[str]:
    """Every file the checkout has under ``folder``, as the wheel must name it."""
    return {f"webapp/{path.relative_to(ROOT).as_posix()}"
            for path in (ROOT / folder).rglob("*")
            if path.is_file() and "__pycache__" not in path.parts}


def not_shipped(_: str, names: list[str]) -> list[str]:
    return [name for name in names if name in NOT_SHIPPED or name.endswith(".egg-info")]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    """Build the wheel from a copy of the checkout and pip install it into a fresh venv."""
    base = tmp_path_factory.mktemp("wheel")
    source = base / "source"  # a copy: building writes build/ and *.egg-info into the tree
    shutil.copytree(ROOT, source, ignore=not_shipped)
    started = time.monotonic()
    pip = ["--disable-pip-version-check", "--quiet"]
    subprocess.run([sys.executable, "-m", "pip", "wheel", *pip, "--no-deps",
                    "--wheel-dir", str(base / "dist"), str(source)], check=True, timeout=120)
    (wheel,) = (base / "dist").glob("webapp-*.whl")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=60)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", *pip, str(wheel)],
                   check=True, timeout=300)
    print(f"wheel built and installed in {time.monotonic() - started:.1f} s")
    outside = base / "outside"
    outside.mkdir()
    yield Installed(wheel, venv, outside)


def test_the_wheel_ships_every_package_template_and_static_file_and_nothing_else(installed):
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    code = {path.relative_to(ROOT).as_posix()
            for package in ("webapp", "submit_once") for path in (ROOT / package).rglob("*.py")}
    assert code <= names, f"not shipped: {sorted(code - names)}"
    assert data_files("templates") | data_files("static") <= names
    assert {"submit_once/py.typed", "webapp/migrations/script.py.mako"} <= names
    top = {name.split("/")[0] for name in names if ".dist-info/" not in name}
    assert top == {"webapp", "submit_once"}, top


def test_the_pattern_imports_without_the_shop(installed):
    subprocess.run([installed.command("python"), "-c",
                    "import submit_once, sys; assert 'webapp' not in sys.modules"],
                   cwd=installed.outside, check=True, timeout=60)


@pytest.fixture
def environment(installed: Installed, servers: Servers) -> dict[str, str]:
    """A production environment on a fresh database of the test PostgreSQL."""
    database = f"wheel_{secrets.token_hex(4)}"
    servers.postgres.create_database(database)
    keep = {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    return {**keep, "PATH": f"{installed.venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
            "APP_ENV": "production", "SECRET_KEY": secrets.token_hex(32),
            "DATABASE_URL": servers.postgres.url(database), "REDIS_URL": servers.redis.url,
            "PAYMENT_WEBHOOK_SECRET": WEBHOOK_SECRET,
            "PROMETHEUS_MULTIPROC_DIR": str(installed.outside / "metrics")}


def run(installed: Installed, env: dict[str, str], *args: str) -> str:
    result = subprocess.run(args, cwd=installed.outside, env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def pay(port: int, public_id: str, cents: int) -> int:
    """Deliver a signed payment webhook, as the provider would."""
    body = json.dumps({"id": f"evt_{secrets.token_hex(6)}", "type": "payment.succeeded",
                       "order_id": public_id, "amount_cents": cents,
                       "currency": "EUR"}).encode()
    moment = int(time.time())
    mac = hmac.new(WEBHOOK_SECRET.encode(), f"{moment}.".encode() + body,
                   hashlib.sha256).hexdigest()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("POST", "/webhooks/payments", body=body, headers={
            "Content-Type": "application/json", "Payment-Signature": f"t={moment},v1={mac}"})
        return conn.getresponse().status
    finally:
        conn.close()


def test_installed_wheel_migrates_serves_every_page_and_runs_the_worker_from_outside(
        installed, environment, servers):
    env = environment
    where = run(installed, env, installed.command("python"), "-c",
                "import webapp; print(webapp.__file__)")
    assert Path(where.strip()).is_relative_to(installed.venv), where

    assert "catalogue seeded" in run(installed, env, installed.command("flask"),
                                     "--app", "webapp", "init-db")
    key = run(installed, env, installed.command("flask"), "--app", "webapp",
              "create-api-key", "wheel-smoke").strip().splitlines()[-1]
    assert len(key) >= 32 and " " not in key

    port = free_port()
    log = installed.outside / "gunicorn.log"
    with open(log, "w") as output:
        gunicorn = subprocess.Popen(
            [installed.command("gunicorn"), "-c", "python:webapp.gunicorn_conf",
             "webapp:create_app()"], cwd=installed.outside,
            env={**env, "BIND": f"127.0.0.1:{port}", "WEB_CONCURRENCY": "1", "WEB_THREADS": "4"},
            stdout=output, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert gunicorn.poll() is None, log.read_text()
            try:
                if request(port, "GET", "/orders/new").status == 200:
                    break
            except OSError:
                assert time.monotonic() < deadline, "gunicorn did not serve within 30 s"
                time.sleep(0.1)

        cookie, form = open_form(port)
        placed = request(port, "POST", "/orders", cookie=cookie, form=form)
        duplicate = request(port, "POST", "/orders", cookie=cookie, form=form)
        assert placed.status == duplicate.status == 303
        assert duplicate.headers["location"] == placed.headers["location"] + "?already_placed=1"
        confirmation = request(port, "GET", placed.headers["location"], cookie=cookie)
        assert confirmation.status == 200
        with psycopg.connect(env["DATABASE_URL"].replace("+psycopg", "")) as conn:
            assert conn.execute("SELECT count(*) FROM orders").fetchone() == (1,)

        for asset in ("app.css", "submit-once.js"):
            assert f"/static/{asset}" in confirmation.body
            served = request(port, "GET", f"/static/{asset}")
            assert served.status == 200
            assert served.body == (ROOT / "static" / asset).read_text()

        public_id = placed.headers["location"].rsplit("/", 1)[-1]
        assert request(port, "GET", f"/orders/{public_id}/cancel", cookie=cookie).status == 200
        assert pay(port, public_id, 3600) == 200
        refund_page = request(port, "GET", f"/orders/{public_id}/refund", cookie=cookie)
        assert refund_page.status == 200 and 'name="amount"' in refund_page.body

        missing = request(port, "GET", "/orders/no-such-order")
        assert missing.status == 404 and "/static/app.css" in missing.body  # the error page
        # A form of its own: a repeat of the placed one would land on its order unvalidated.
        other_cookie, other_form = open_form(port)
        invalid = request(port, "POST", "/orders", cookie=other_cookie,
                          form={**other_form, "quantity": "x"})
        assert invalid.status in (400, 422) and "/static/app.css" in invalid.body
    finally:
        gunicorn.terminate()
        gunicorn.wait(30)

    worker = subprocess.Popen([installed.command("python"), "-m", "webapp.refunds.worker"],
                              cwd=installed.outside, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        started = worker.stdout.readline()
        assert "refund worker" in started and worker.poll() is None, started
    finally:
        worker.send_signal(signal.SIGTERM)
        rest = worker.communicate(timeout=30)[0]
    assert worker.returncode == 0 and "stopped" in rest, started + rest
