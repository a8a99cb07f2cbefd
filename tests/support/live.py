"""The app served by a real gunicorn on 127.0.0.1, and a small HTTP client for it:
one-off requests, and keep-alive connections for API clients and the payment provider."""

from __future__ import annotations

import http.client
import json
import os
import select
import subprocess
import sys
import tempfile
import time
import urllib.parse
from contextlib import suppress
from dataclasses import dataclass
from http.cookies import SimpleCookie
from pathlib import Path

from dev.embedded import free_port
from webapp.webhooks import DEV_SECRET
from webapp.webhooks.signatures import HEADER, sign

from ..conftest import VALID, Servers, hidden
from .api_client import ORDER

ROOT = Path(__file__).resolve().parents[2]


#: The environment variables that ask for tests.support.paused_app's hooks.
TEST_HOOKS = ("TEST_PAUSE_", "TEST_KILL_", "TEST_CHARGE_")


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: str


class LiveServer:
    """``gunicorn -w workers`` serving ``webapp:create_app()`` with the test servers;
    ``tests.support.paused_app:create_app()`` when ``env`` asks for a ``TEST_PAUSE_*``,
    ``TEST_KILL_*`` or ``TEST_CHARGE_*`` hook."""

    def __init__(self, servers: Servers, *, workers: int = 4, threads: int = 4, **env: str) -> None:
        self.port = free_port()
        self.env = {
            **os.environ,
            "APP_ENV": "testing",
            "SECRET_KEY": "test-secret",
            "DATABASE_URL": servers.database_url,
            "REDIS_URL": servers.redis.url,
            **env,
        }
        self.args = [
            sys.executable,
            "-m",
            "gunicorn",
            "--bind",
            f"127.0.0.1:{self.port}",
            "--workers",
            str(workers),
            "--threads",
            str(threads),
            "--graceful-timeout",
            "2",
            "--chdir",
            str(ROOT),
            "tests.support.paused_app:create_app()"
            if any(name.startswith(TEST_HOOKS) for name in env)
            else "webapp:create_app()",
        ]
        self.process: subprocess.Popen | None = None

    #: The page that answers 200 once gunicorn serves the app.
    ready_path = "/orders/new"
    #: A bound, not a window: booting takes 1-2 s here, ~25 s beside CPU burners and a
    #: busy suite; the wait ends as soon as the page answers or gunicorn exits.
    boot_seconds = 90

    def __enter__(self) -> LiveServer:
        self.log = tempfile.TemporaryFile("w+")
        self.process = subprocess.Popen(
            self.args, env=self.env, stdout=self.log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + self.boot_seconds
        try:
            while time.monotonic() < deadline:
                assert self.process.poll() is None, self.output()
                try:
                    # Ours, not a server of another test that took the port while this
                    # one was stopped (its bind then fails, and gunicorn retries it).
                    if (
                        request(self.port, "GET", self.ready_path).status == 200
                        and f"Listening at: http://127.0.0.1:{self.port} ({self.process.pid})"
                        in self.output()
                    ):
                        return self
                except OSError:
                    pass
                time.sleep(0.05)
            raise RuntimeError(
                f"gunicorn did not serve {self.ready_path} within "
                f"{self.boot_seconds} s:\n{self.output()[-2000:]}"
            )
        except BaseException:
            # A gunicorn that never served is stopped too, not left running after the test.
            self.__exit__()
            raise

    def __exit__(self, *exc: object) -> None:
        assert self.process is not None
        self.process.terminate()
        self.process.wait(10)
        self.log.close()

    def output(self) -> str:
        """What gunicorn and the app printed so far."""
        self.log.seek(0)
        return self.log.read()

    def worker_pids(self) -> list[int]:
        """The gunicorn workers' process ids (the master's children)."""
        assert self.process is not None
        return child_pids(self.process.pid)


def child_pids(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (gunicorn's workers, a postmaster's backends)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with suppress(OSError):
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


class Connection:
    """One HTTP/1.1 connection to 127.0.0.1:``port``, kept alive between requests as
    an API client library or a payment provider keeps it. Like urllib3, it connects
    afresh when the server closed it while idle or a request failed on it;
    ``connects`` counts how often it connected."""

    def __init__(self, port: int, *, timeout: float = 30) -> None:
        self._http = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        self.connects = 0

    def send(
        self,
        method: str,
        path: str,
        *,
        body: bytes | str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Response:
        if self._http.sock is not None and select.select([self._http.sock], [], [], 0)[0]:
            # readable while idle: the server closed it (keep-alive timeout)
            self.close()
        if self._http.sock is None:
            self.connects += 1
        try:
            self._http.request(method, path, body=body, headers=headers or {})
            raw = self._http.getresponse()
            return Response(
                raw.status, {k.lower(): v for k, v in raw.getheaders()}, raw.read().decode()
            )
        except (OSError, http.client.HTTPException):
            self.close()
            raise

    def place_order(self, api_key: str, key: str, order: dict | None = None) -> Response:
        """POST /api/orders with ``key`` as its Idempotency-Key."""
        return self.send(
            "POST",
            "/api/orders",
            body=json.dumps(order or ORDER),
            headers={
                "Authorization": f"Bearer {api_key}",
                "Idempotency-Key": key,
                "Content-Type": "application/json",
            },
        )

    def deliver(self, event: dict, *, secret: str = DEV_SECRET) -> Response:
        """POST /webhooks/payments, signed now with ``secret`` as the provider signs."""
        body = json.dumps(event).encode()
        return self.send(
            "POST",
            "/webhooks/payments",
            body=body,
            headers={HEADER: sign(secret, body), "Content-Type": "application/json"},
        )

    def close(self) -> None:
        self._http.close()


def payment(order: dict, event_id: str) -> dict:
    """The provider's event that pays ``order`` (an API order's body) in full: it
    names the order by its payment reference, as the provider knows it."""
    return {
        "id": event_id,
        "type": "payment.succeeded",
        "order_id": order["payment_reference"],
        "amount_cents": order["total_cents"],
        "currency": order["currency"],
    }


def request(
    port: int,
    method: str,
    path: str,
    *,
    cookie: str = "",
    form: dict[str, str] | None = None,
    timeout: float = 30,
) -> Response:
    """One request on a connection of its own, as a browser's new tab sends it."""
    headers = {"Cookie": cookie} if cookie else {}
    body = None
    if form is not None:
        body = urllib.parse.urlencode(form)
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    conn = Connection(port, timeout=timeout)
    try:
        return conn.send(method, path, body=body, headers=headers)
    finally:
        conn.close()


def open_form(port: int) -> tuple[str, dict[str, str]]:
    """GET the form like a browser: the session cookie and the filled-in fields."""
    page = request(port, "GET", "/orders/new")
    cookie = SimpleCookie(page.headers["set-cookie"])
    return f"session={cookie['session'].value}", {
        **VALID,
        "csrf_token": hidden(page.body, "csrf_token"),
        "form_token": hidden(page.body, "form_token"),
    }
