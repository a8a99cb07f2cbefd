"""The wheels as a deployment gets them: the library's (flask-submit-once/) and the shop's
(the root), built from a copy of the checkout, checked with twine, installed (not
editable) into a fresh venv, and run from a folder outside the checkout against a fresh
database. The library's own suite against its wheel installed alone in a fresh venv is
nox's (flask-submit-once/noxfile.py, the oldest and newest sessions scripts/test runs).

Nothing here imports the checkout's code into the installed app: every command runs
with a fresh venv's Python, in a folder that holds no source. About 60-90 s, most of
it pip building and installing (from pip's cache after the first run).
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import os
import re
import secrets
import shutil
import signal
import ssl
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
from tests.support.deploy_machine import WALKTHROUGH, Machine, section_blocks
from tests.support.live import open_form, request
from tests.support.nginx import DEPLOY, NGINX, Nginx, Ports, Shopper, fetch, needs_nginx

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "flask-submit-once"
NOT_SHIPPED = {
    ".git",
    ".venv",
    "instance",
    "node_modules",
    "build",
    "dist",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    ".hypothesis",
    ".mypy_cache",
    ".nox",
    "_build",
}
PIP = ["--disable-pip-version-check", "--quiet"]
WEBHOOK_SECRET = "wheel-smoke-webhook-secret-of-32-bytes-and-more"

# Building and installing (the module fixture) is counted in the first test's time.
# Generous: pip resolving and installing into a fresh venv took 27 s on a quiet machine
# and over 300 s once at load 14 (three other suites running).
pytestmark = pytest.mark.timeout(900)


@dataclass
class Wheels:
    shop: Path
    library: Path
    # the copy of the checkout they were built from
    source: Path


#: What a test run or an older checkout leaves in templates/ and static/: none of it ships.
LEFT_BEHIND = (
    "static/__init__.py",
    "static/__pycache__/__init__.cpython-311.pyc",
    "static/stale.pyc",
    "templates/__init__.py",
    "templates/__pycache__/__init__.cpython-311.pyc",
)


@dataclass
class Installed:
    # the shop's; the library's is installed beside it, as its dependency
    wheel: Path
    venv: Path
    # the working folder: no source code in it
    outside: Path

    def command(self, name: str) -> str:
        return str(self.venv / "bin" / name)


def data_files(folder: str) -> set[str]:
    """Every file the checkout has under ``folder``, as the wheel must name it."""
    return {
        f"webapp/{path.relative_to(ROOT).as_posix()}"
        for path in (ROOT / folder).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }


def not_shipped(_: str, names: list[str]) -> list[str]:
    return [name for name in names if name in NOT_SHIPPED or name.endswith(".egg-info")]


def fresh_venv(venv: Path, *requirements: str) -> None:
    """A new venv at ``venv`` with ``requirements`` pip installed (not editable)."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=60)
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", *PIP, *requirements],
        check=True,
        timeout=600,
    )


def outside_env(venv: Path) -> dict[str, str]:
    """This process's environment with ``venv`` first on PATH and nothing of ours."""
    keep = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
    }
    return {**keep, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"}


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Wheels:
    """Both wheels, built from a copy of the checkout (building writes build/ and
    *.egg-info into the tree), by one pip command."""
    base = tmp_path_factory.mktemp("wheels")
    source = base / "source"
    shutil.copytree(ROOT, source, ignore=not_shipped)
    for name in LEFT_BEHIND:
        (source / name).parent.mkdir(exist_ok=True)
        (source / name).write_bytes(b"# not an asset\n")
    started = time.monotonic()
    # DEPLOY.md's own command, in the copy, with this venv's python.
    (build,) = [block for block in section_blocks(DEPLOY, WALKTHROUGH) if "pip wheel" in block]
    subprocess.run(
        ["bash", "-euo", "pipefail", "-c", build],
        cwd=source,
        check=True,
        timeout=180,
        env={
            **os.environ,
            "PIP_QUIET": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        },
    )
    (shop,) = (source / "dist").glob("webapp-*.whl")
    (library,) = (source / "dist").glob("flask_submit_once-*.whl")
    print(f"wheels built in {time.monotonic() - started:.1f} s")
    return Wheels(shop, library, source)


@pytest.fixture(scope="module")
def installed(wheels: Wheels, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    """Both wheels pip installed into a fresh venv: the shop finds its flask-submit-once
    in the library's wheel, not in an index."""
    base = tmp_path_factory.mktemp("wheel")
    started = time.monotonic()
    venv = base / "venv"
    fresh_venv(venv, str(wheels.library), str(wheels.shop))
    print(f"wheels installed in {time.monotonic() - started:.1f} s")
    outside = base / "outside"
    outside.mkdir()
    yield Installed(wheels.shop, venv, outside)


def names_in(wheel: Path) -> list[str]:
    return sorted(zipfile.ZipFile(wheel).namelist())


def test_the_shop_wheel_ships_its_modules_templates_and_assets_and_nothing_else(installed):
    names = set(names_in(installed.wheel))
    print("the shop's wheel:", *sorted(names), sep="\n  ")
    code = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "webapp").rglob("*.py")
        if "__pycache__" not in path.parts
    }
    info = f"webapp-{installed.wheel.name.split('-')[1]}.dist-info/"
    expected = {
        *code,
        *data_files("templates"),
        *data_files("static"),
        "webapp/migrations/script.py.mako",
        *(info + name for name in ("METADATA", "WHEEL", "RECORD", "top_level.txt")),
    }
    assert not [
        name
        for name in expected
        if name.endswith(("__init__.py", ".pyc"))
        and name.startswith(("webapp/static/", "webapp/templates/"))
    ]
    assert names == expected, (
        f"not shipped: {sorted(expected - names)}; slipped in: {sorted(names - expected)}"
    )


def test_the_library_wheel_ships_flask_submit_once_and_its_metadata_only(wheels):
    names = names_in(wheels.library)
    print("the library's wheel:", *names, sep="\n  ")
    package = LIBRARY / "src" / "flask_submit_once"
    source = {
        f"flask_submit_once/{path.relative_to(package).as_posix()}"
        for path in package.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert {name for name in names if name.startswith("flask_submit_once/")} == source
    version = wheels.library.name.split("-")[1]
    info = f"flask_submit_once-{version}.dist-info/"
    assert [name for name in names if not name.startswith(("flask_submit_once/", info))] == []
    assert {f"{info}{name}" for name in ("METADATA", "WHEEL", "RECORD", "licenses/LICENSE")} <= set(
        names
    )


def metadata(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = (n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return archive.read(name).decode()


def test_both_wheels_pass_twine_check_and_the_shop_requires_the_library_by_name(wheels):
    result = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(wheels.library), str(wheels.shop)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    library, shop = metadata(wheels.library), metadata(wheels.shop)
    assert re.search(r"^Name: flask-submit-once$", library, re.M)
    assert re.search(r"^License-Expression: BSD-3-Clause$", library, re.M)
    assert re.search(r"^Requires-Dist: flask-submit-once$", shop, re.M), shop


def test_the_pattern_imports_without_the_shop(installed):
    where = subprocess.run(
        [
            installed.command("python"),
            "-c",
            "import flask_submit_once, sys; assert 'webapp' not in sys.modules; "
            "print(flask_submit_once.__file__)",
        ],
        cwd=installed.outside,
        check=True,
        timeout=60,
        capture_output=True,
        text=True,
    ).stdout
    assert Path(where.strip()).is_relative_to(installed.venv), where
    subprocess.run(
        [installed.command("python"), "-m", "pip", "check", *PIP],
        cwd=installed.outside,
        check=True,
        timeout=60,
    )


@pytest.fixture
def environment(installed: Installed, servers: Servers) -> dict[str, str]:
    """A production environment on a fresh database of the test PostgreSQL."""
    database = f"wheel_{secrets.token_hex(4)}"
    servers.postgres.create_database(database)
    return {
        **outside_env(installed.venv),
        "APP_ENV": "production",
        "SECRET_KEY": secrets.token_hex(32),
        "DATABASE_URL": servers.postgres.url(database),
        "REDIS_URL": servers.redis.url,
        "PAYMENT_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "PROMETHEUS_MULTIPROC_DIR": str(installed.outside / "metrics"),
    }


def run(installed: Installed, env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        args, cwd=installed.outside, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def pay(port: int, reference: str, cents: int) -> int:
    """Deliver a signed payment webhook naming the order's payment reference, as the
    provider would."""
    body = json.dumps(
        {
            "id": f"evt_{secrets.token_hex(6)}",
            "type": "payment.succeeded",
            "order_id": reference,
            "amount_cents": cents,
            "currency": "EUR",
        }
    ).encode()
    moment = int(time.time())
    mac = hmac.new(
        WEBHOOK_SECRET.encode(), f"{moment}.".encode() + body, hashlib.sha256
    ).hexdigest()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(
            "POST",
            "/webhooks/payments",
            body=body,
            headers={
                "Content-Type": "application/json",
                "Payment-Signature": f"t={moment},v1={mac}",
            },
        )
        return conn.getresponse().status
    finally:
        conn.close()


def test_installed_wheel_migrates_serves_every_page_and_runs_the_worker_from_outside(
    installed, environment, servers
):
    env = environment
    where = run(
        installed, env, installed.command("python"), "-c", "import webapp; print(webapp.__file__)"
    )
    assert Path(where.strip()).is_relative_to(installed.venv), where

    assert "catalogue seeded" in run(
        installed, env, installed.command("flask"), "--app", "webapp", "init-db", "--demo"
    )
    key = (
        run(
            installed,
            env,
            installed.command("flask"),
            "--app",
            "webapp",
            "api-keys",
            "create",
            "wheel-smoke",
        )
        .strip()
        .splitlines()[-1]
    )
    assert len(key) >= 32 and " " not in key

    port = free_port()
    log = installed.outside / "gunicorn.log"
    with open(log, "w") as output:
        gunicorn = subprocess.Popen(
            [
                installed.command("gunicorn"),
                "-c",
                "python:webapp.gunicorn_conf",
                "webapp:create_app()",
            ],
            cwd=installed.outside,
            env={**env, "BIND": f"127.0.0.1:{port}", "WEB_CONCURRENCY": "1", "WEB_THREADS": "4"},
            stdout=output,
            stderr=subprocess.STDOUT,
        )
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
        # On the same order (how the confirmation says "already placed" is the shop's suite's).
        assert duplicate.headers["location"].split("?")[0] == placed.headers["location"]
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
        with psycopg.connect(env["DATABASE_URL"].replace("+psycopg", "")) as conn:
            (reference,) = conn.execute(
                "SELECT payment_reference FROM orders WHERE public_id = %s", (public_id,)
            ).fetchone()
        assert pay(port, reference, 3600) == 200
        refund_page = request(port, "GET", f"/orders/{public_id}/refund", cookie=cookie)
        assert refund_page.status == 200 and 'name="amount"' in refund_page.body

        # Only assets are served: nothing a test run or an older checkout left there.
        for name in LEFT_BEHIND:
            if name.startswith("static/"):
                assert request(port, "GET", f"/{name}").status == 404, name
        assert request(port, "GET", "/static/templates/base.html").status == 404

        missing = request(port, "GET", "/orders/no-such-order")
        # the error page
        assert missing.status == 404 and "/static/app.css" in missing.body
        # A form of its own: a repeat of the placed one would land on its order unvalidated.
        other_cookie, other_form = open_form(port)
        invalid = request(
            port, "POST", "/orders", cookie=other_cookie, form={**other_form, "quantity": "x"}
        )
        assert invalid.status in (400, 422) and "/static/app.css" in invalid.body
    finally:
        gunicorn.terminate()
        gunicorn.wait(30)

    worker = subprocess.Popen(
        [installed.command("python"), "-m", "webapp.refunds.worker"],
        cwd=installed.outside,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        started = worker.stdout.readline()
        assert "refund worker" in started and worker.poll() is None, started
    finally:
        worker.send_signal(signal.SIGTERM)
        rest = worker.communicate(timeout=30)[0]
    assert worker.returncode == 0 and "stopped" in rest, started + rest


def test_a_checkout_runs_without_installing_the_shop(installed, wheels, environment):
    """From a checkout (here the copy the wheels were built from) the app finds the
    checkout's templates/ and static/, beside its package, as an editable install does."""
    probe = (
        "import webapp\n"
        "app = webapp.create_app()\n"
        "client = app.test_client()\n"
        "statuses = client.get('/static/app.css').status_code, client.get('/nope').status_code\n"
        "print('probe', webapp.__file__, app.template_folder, app.static_folder, *statuses)\n"
    )
    result = subprocess.run(
        [installed.command("python"), "-c", probe],
        cwd=wheels.source,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("probe ")]
    module, templates, static, *statuses = line.split()[1:]
    assert Path(module) == wheels.source / "webapp" / "__init__.py"
    assert (Path(templates), Path(static)) == (
        wheels.source / "templates",
        wheels.source / "static",
    )
    assert statuses == ["200", "404"]


def stand_ins(servers: Servers, ports: dict[str, int], venv: Path) -> dict[str, str]:
    """What the walk-through names that the suite's servers, ports and venv stand in for."""
    return {
        "/srv/shop/venv": str(venv),
        "@localhost/shop": f"@127.0.0.1:{servers.postgres.port}/shop",
        "redis://localhost:6379/0": servers.redis.url,
        "shop.example:443:127.0.0.1": f"shop.example:{ports['443']}:127.0.0.1",
        "https://shop.example/": f"https://shop.example:{ports['443']}/",
    }


@needs_nginx
def test_deploys_walk_through_ends_in_a_stocked_shop_behind_nginx_with_tls(
    installed, wheels, servers, tmp_path
):
    """Every command of DEPLOY.md's walk-through, in order, on a machine in tmp_path
    (tests/support/deploy_machine.py). Its venv is the one this module's fixture made from the same
    dist/: venv and pip run on it again, and find nothing to fetch."""
    ports = {name: free_port() for name in ("443", "80", "8000", "9108")}
    machine = Machine(
        tmp_path,
        ports=ports,
        nginx=str(NGINX),
        postgres={
            "host": "127.0.0.1",
            "port": str(servers.postgres.port),
            "user": "postgres",
            "password": servers.postgres.password,
            "bin": str(servers.postgres.bin),
        },
    )
    (machine.root / "srv/shop").mkdir()
    # the folder the operator runs it in
    release = tmp_path / "release"
    (release / "docs").mkdir(parents=True)
    (release / "dist").symlink_to(wheels.shop.parent)
    shutil.copy(wheels.source / "docs" / "nginx.conf", release / "docs")
    script = "\n".join(
        block for block in section_blocks(DEPLOY, WALKTHROUGH) if "pip wheel" not in block
    )
    for old, new in stand_ins(servers, ports, installed.venv).items():
        assert old in script, old
        script = script.replace(old, new)
    started = time.monotonic()
    try:
        ran = machine.run(
            script,
            cwd=release,
            path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        )
        print(
            f"walk-through: {time.monotonic() - started:.1f} s; the stand-ins were asked:\n"
            f"{machine.commands()}"
        )
        assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
        for sku in ("SENCHA-100", "ASSAM-250", "GIFT-BOX"):
            # products list
            assert sku in ran.stdout, ran.stdout
        # certbot's hook copied its certificate and reloaded nginx: trust only that one now.
        issued = machine.root / "etc/letsencrypt/live/shop.example/fullchain.pem"
        site = Nginx(
            machine.root / "var/log/nginx",
            Ports(ports["443"], 0, ports["80"]),
            ssl.create_default_context(cafile=str(issued)),
        )
        deadline = time.monotonic() + 20
        while True:
            try:
                placed = Shopper(site).place_order()
                break
            # the old certificate until nginx has reloaded
            except ssl.SSLError:
                assert time.monotonic() < deadline, "nginx still serves the first certificate"
                time.sleep(0.1)
        assert placed.status == 303, placed.body[:300]
        worker = fetch(
            ports["443"],
            "GET",
            "/refund-worker/healthz",
            context=site.context,
            host=f"app-a:{ports['443']}",
        )
        assert worker.status == 200 and '"status": "ok"' in worker.body
        with psycopg.connect(servers.postgres.url("shop").replace("+psycopg", "")) as conn:
            assert conn.execute(
                "SELECT p.sku, o.quantity FROM orders o JOIN products p ON p.id = o.product_id"
            ).fetchall() == [("SENCHA-100", 2)]
    finally:
        machine.stop()
    key = placed.headers["location"].rsplit("/", 1)[1]
    for log in ("access.log", "error.log"):
        assert key not in (machine.root / "var/log/nginx" / log).read_text(), log
        with psycopg.connect(
            servers.postgres.url().replace("+psycopg", ""), autocommit=True
        ) as conn:
            conn.execute("DROP DATABASE IF EXISTS shop WITH (FORCE)")
            conn.execute("DROP ROLE IF EXISTS shop")
    print(f"walk-through and the order after it: {time.monotonic() - started:.1f} s")
