"""The app served by a real gunicorn on 127.0.0.1, and a small HTTP client for it."""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
import tempfile
import time
import urllib.parse
from dataclasses import dataclass
from http.cookies import SimpleCookie
from pathlib import Path

from dev.embedded import free_port

from .conftest import VALID, Servers, hidden

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: str


class LiveServer:
    """``gunicorn -w workers`` serving ``webapp:create_app()`` with the test servers;
    ``tests.paused_app:create_app()`` when ``env`` asks for a ``TEST_PAUSE_*``."""

    def __init__(self, servers: Servers, *, workers: int = 4, threads: int = 4,
                 **env: str) -> None:
        self.port = free_port()
        self.env = {**os.environ, "APP_ENV": "testing", "SECRET_KEY": "test-secret",
                    "DATABASE_URL": servers.database_url, "REDIS_URL": servers.redis.url, **env}
        self.args = [sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{self.port}",
                     "--workers", str(workers), "--threads", str(threads),
                     "--graceful-timeout", "2", "--chdir", str(ROOT),
                     "tests.paused_app:create_app()" if any(name.startswith("TEST_PAUSE_")
                                                            for name in env)
                     else "webapp:create_app()"]
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> LiveServer:
        self.log = tempfile.TemporaryFile("w+")
        self.process = subprocess.Popen(self.args, env=self.env, stdout=self.log,
                                        stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.output()
            try:
                if request(self.port, "GET", "/orders/new").status == 200:
                    return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("gunicorn did not serve within 20s")

    def __exit__(self, *exc: object) -> None:
        assert self.process is not None
        self.process.terminate()
        self.process.wait(10)
        self.log.close()

    def output(self) -> str:
        """What gunicorn and the app printed so far."""
        self.log.seek(0)
        return self.log.read()


def request(port: int, method: str, path: str, *, cookie: str = "",
            form: dict[str, str] | None = None, timeout: float = 30) -> Response:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = {"Cookie": cookie} if cookie else {}
        body = None
        if form is not None:
            body = urllib.parse.urlencode(form)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        conn.request(method, path, body=body, headers=headers)
        raw = conn.getresponse()
        return Response(raw.status, {k.lower(): v for k, v in raw.getheaders()},
                        raw.read().decode())
    finally:
        conn.close()


def open_form(port: int) -> tuple[str, dict[str, str]]:
    """GET the form like a browser: the session cookie and the filled-in fields."""
    page = request(port, "GET", "/orders/new")
    cookie = SimpleCookie(page.headers["set-cookie"])
    return f"session={cookie['session'].value}", {
        **VALID, "csrf_token": hidden(page.body, "csrf_token"),
        "form_token": hidden(page.body, "form_token"),
    }
