"""Real HTTP for the tests that need it: an app served by Werkzeug's threaded server
(one thread per request, as a threaded worker serves it), and a browser that speaks
HTTP/1.1 over a connection of its own per request."""

from __future__ import annotations

import http.client
import re
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from pathlib import Path

from flask import Flask
from werkzeug.serving import WSGIRequestHandler, make_server

from servers import free_port

__all__ = ["Answer", "Browser", "hidden", "serve"]


class QuietHandler(WSGIRequestHandler):
    """Werkzeug's handler without its access log (a line to stderr per request)."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass


@contextmanager
def serve(app: Flask) -> Iterator[int]:
    """Serve ``app`` on a free port of 127.0.0.1 while the block runs; its port."""
    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=QuietHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_port
    finally:
        server.shutdown()
        thread.join(10)
        server.server_close()


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Mapping[str, str]
    body: str


def hidden(html: str, name: str) -> str:
    """The value of the hidden input called ``name`` in ``html``."""
    found = re.search(rf'<input type="hidden" name="{name}" value="([^"]*)"', html)
    assert found, f"no hidden input {name!r} in {html[:300]!r}"
    return found.group(1)


@dataclass
class Browser:
    """One browser session against ``port``: it keeps the session cookie it was given."""

    port: int
    cookies: dict[str, str] = field(default_factory=dict)

    def get(self, path: str) -> Answer:
        return self.send("GET", path)

    def post(
        self, path: str, form: Mapping[str, str], headers: Mapping[str, str] | None = None
    ) -> Answer:
        return self.send(
            "POST",
            path,
            urllib.parse.urlencode(form),
            {"Content-Type": "application/x-www-form-urlencoded", **(headers or {})},
        )

    def send(
        self,
        method: str,
        path: str,
        body: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        """One request on a new connection (a new tab, a retry); raises the
        ``OSError`` or ``http.client`` error a dead server gives."""
        sent = dict(headers or {})
        if self.cookies:
            sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request(method, path, body=body, headers=sent)
            response = conn.getresponse()
            answer = Answer(response.status, dict(response.getheaders()), response.read().decode())
        finally:
            conn.close()
        for name, morsel in SimpleCookie(answer.headers.get("Set-Cookie", "")).items():
            self.cookies[name] = morsel.value
        return answer


SERVE_SIGNUP = Path(__file__).with_name("serve_signup.py")


@contextmanager
def signup_worker(
    redis_url: str, database_url: str, fields: Mapping[str, str]
) -> Iterator[tuple[subprocess.Popen[str], Browser, dict[str, str]]]:
    """serve_signup.py in a process of its own (a worker a test may kill), serving once it
    says so, and its sign-up form read through a Browser: (the process, the browser, the
    form's tokens with ``fields``)."""
    port = free_port()
    with subprocess.Popen(
        [sys.executable, str(SERVE_SIGNUP), str(port), redis_url, database_url],
        stdout=subprocess.PIPE,
        text=True,
        cwd=SERVE_SIGNUP.parent,
    ) as worker:
        assert worker.stdout is not None and worker.stdout.readline() == "serving\n"
        browser = Browser(port)
        page = browser.get("/signup").body
        form = {
            "csrf_token": hidden(page, "csrf_token"),
            "form_token": hidden(page, "form_token"),
            **fields,
        }
        yield worker, browser, form
