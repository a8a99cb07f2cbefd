"""Debian's nginx for the tests, as docs/DEPLOY.md sets it up: Debian's main config
(/etc/nginx/nginx.conf) with DEPLOY's edits, and docs/nginx.conf as shipped, on
127.0.0.1, every file under a test's own folder. Without nginx the tests that need it are
skipped, saying how to get it."""

from __future__ import annotations

import http.client
import os
import re
import shutil
import socket
import ssl
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.cookies import SimpleCookie
from pathlib import Path

import pytest

from dev.embedded import free_port
from tests.conftest import VALID, Servers, hidden
from tests.support.deploy_machine import WALKTHROUGH, section_blocks
from tests.support.live import ROOT, LiveServer, Response
from webapp import shipped_folder

NGINX = shutil.which("nginx") or next(
    (path for path in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(path, os.X_OK)),
    None,
)
DEBIAN_MAIN = Path("/etc/nginx/nginx.conf")
needs_nginx = pytest.mark.skipif(
    NGINX is None or not DEBIAN_MAIN.is_file(),
    reason="Debian's nginx is not installed: scripts/test installs it as root, "
    "or run 'apt-get install nginx'",
)
SHIPPED = ROOT / "docs" / "nginx.conf"
DEPLOY = ROOT / "docs" / "DEPLOY.md"
HOST = "shop.example"


def main_config_edits() -> list[str]:
    """DEPLOY.md's commands that edit Debian's main config (worker_connections)."""
    return [
        line
        for block in section_blocks(DEPLOY, WALKTHROUGH)
        for line in block.splitlines()
        if line.startswith("sed ") and str(DEBIAN_MAIN) in line
    ]


def main_config(prefix: Path, *, raised: bool = True) -> Path:
    """Debian's main config under ``prefix``, with DEPLOY's edits when ``raised``: its own
    pid, logs and temp folders, the site in ``prefix``/conf.d, no sites-enabled/."""
    path = prefix / "nginx.conf"
    shutil.copyfile(DEBIAN_MAIN, path)
    if raised:
        edits = main_config_edits()
        assert edits, "DEPLOY.md no longer edits /etc/nginx/nginx.conf"
        for edit in edits:
            subprocess.run(
                ["bash", "-c", edit.replace(str(DEBIAN_MAIN), str(path))], check=True, timeout=10
            )
    text = path.read_text()
    temp = " ".join(
        f"{kind}_temp_path {prefix / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    # As root the workers would run as www-data, who cannot enter pytest's private tmp.
    for old, new in [
        ("user www-data;", "user root;" if os.geteuid() == 0 else ""),
        ("pid /run/nginx.pid;", f"daemon off;\npid {prefix / 'nginx.pid'};"),
        ("/var/log/nginx/", f"{prefix}/"),
        ("include /etc/nginx/conf.d/", f"include {prefix}/conf.d/"),
        # DEPLOY removes it
        ("include /etc/nginx/sites-enabled/*;", ""),
        # Modules load relative to nginx's prefix (-p); the shop needs none.
        ("include /etc/nginx/modules-enabled/*.conf;", ""),
        ("http {", f"http {{\n\t{temp}"),
    ]:
        assert old in text, f"Debian's nginx.conf changed shape: no {old!r}"
        text = text.replace(old, new)
    path.write_text(text)
    return path


def deploy_setting(name: str) -> str:
    """The value DEPLOY.md gives ``name`` (``NAME=value`` in its commands)."""
    match = re.search(rf"\b{name}=([^\s\\/'\"]+)", DEPLOY.read_text())
    assert match, f"DEPLOY.md sets no {name}"
    return match.group(1)


@dataclass
class Ports:
    # the shipped server's 443
    https: int
    # the same server without TLS, for the tests that need none
    plain: int
    # the shipped port-80 server
    http: int

    @classmethod
    def free(cls) -> Ports:
        return cls(free_port(), free_port(), free_port())


def site_config(
    prefix: Path,
    ports: Ports,
    certificate: Path,
    *,
    app_port: int,
    monitor_port: int,
    source: Path = SHIPPED,
) -> str:
    """``source`` (docs/nginx.conf) with the test's ports, certificate and folders."""
    conf = source.read_text()
    replacements = [
        (
            "listen 443 ssl;",
            f"listen 127.0.0.1:{ports.https} ssl;\n    listen 127.0.0.1:{ports.plain};",
            True,
        ),
        ("/etc/ssl/shop.example/", f"{certificate}/", True),
        ("server 127.0.0.1:8000;", f"server 127.0.0.1:{app_port};", True),
        ("listen 80;", f"listen 127.0.0.1:{ports.http};", False),
        ("server 127.0.0.1:9108;", f"server 127.0.0.1:{monitor_port};", False),
        ("/var/log/nginx/", f"{prefix}/", False),
        ("/srv/shop/static/", f"{shipped_folder('static')}/", False),
        ("/var/www/certbot", str(prefix / "certbot"), False),
    ]
    for old, new, required in replacements:
        assert old in conf or not required, f"{source.name} changed shape: no {old!r}"
        conf = conf.replace(old, new)
    return conf


def self_signed(folder: Path) -> Path:
    """fullchain.pem and privkey.pem for shop.example and 127.0.0.1 in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            f"/CN={HOST}",
            "-addext",
            f"subjectAltName=DNS:{HOST},IP:127.0.0.1",
            "-keyout",
            str(folder / "privkey.pem"),
            "-out",
            str(folder / "fullchain.pem"),
        ],
        check=True,
        capture_output=True,
        timeout=30,
    )
    return folder


@dataclass
class Nginx:
    prefix: Path
    ports: Ports
    # trusts the test's certificate
    context: ssl.SSLContext

    def log(self, name: str) -> str:
        """access.log or error.log, as written so far."""
        path = self.prefix / name
        return path.read_text(errors="replace") if path.exists() else ""


@contextmanager
def nginx(
    prefix: Path,
    app_port: int,
    *,
    monitor_port: int = 0,
    raised: bool = True,
    source: Path = SHIPPED,
) -> Iterator[Nginx]:
    """nginx in the foreground, Debian's main config (``raised``: with DEPLOY's edits)
    and ``source`` as its site, every file under ``prefix``."""
    assert NGINX is not None
    ports, certificate = Ports.free(), self_signed(prefix / "ssl")
    (prefix / "conf.d").mkdir(parents=True, exist_ok=True)
    (prefix / "certbot").mkdir(exist_ok=True)
    (prefix / "conf.d" / "shop.conf").write_text(
        site_config(
            prefix,
            ports,
            certificate,
            app_port=app_port,
            monitor_port=monitor_port or free_port(),
            source=source,
        )
    )
    config = main_config(prefix, raised=raised)
    process = subprocess.Popen(
        [NGINX, "-p", f"{prefix}/", "-e", str(prefix / "error.log"), "-c", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            assert process.poll() is None, (prefix / "error.log").read_text()
            try:
                socket.create_connection(("127.0.0.1", ports.plain), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "nginx did not listen within 10 s"
                time.sleep(0.05)
        context = ssl.create_default_context(cafile=str(certificate / "fullchain.pem"))
        yield Nginx(prefix, ports, context)
    finally:
        process.terminate()
        process.wait(10)


class NamedHTTPS(http.client.HTTPConnection):
    """HTTPS to 127.0.0.1 as to shop.example: that name in SNI and checked against the
    certificate, whatever the request names as Host (Prometheus names the machine)."""

    def __init__(self, port: int, context: ssl.SSLContext, **options: object) -> None:
        super().__init__("127.0.0.1", port, **options)  # type: ignore[arg-type]
        self.context = context

    def connect(self) -> None:
        super().connect()
        self.sock = self.context.wrap_socket(self.sock, server_hostname=HOST)


def fetch(
    port: int,
    method: str,
    path: str,
    *,
    context: ssl.SSLContext | None = None,
    host: str = "127.0.0.1",
    source: str = "127.0.0.1",
    cookie: str = "",
    headers: dict[str, str] | None = None,
    form: dict[str, str] | None = None,
    timeout: float = 10,
) -> Response:
    """One request to 127.0.0.1:``port`` from ``source`` (another loopback address is
    another client), over TLS with ``context`` when given, naming ``host`` as its Host."""
    sent = {"Host": host, **({"Cookie": cookie} if cookie else {}), **(headers or {})}
    body = None
    if form is not None:
        body = urllib.parse.urlencode(form)
        sent["Content-Type"] = "application/x-www-form-urlencoded"
    conn = (
        NamedHTTPS(port, context, timeout=timeout, source_address=(source, 0))
        if context
        else http.client.HTTPConnection(
            "127.0.0.1", port, timeout=timeout, source_address=(source, 0)
        )
    )
    try:
        conn.request(method, path, body=body, headers=sent)
        raw = conn.getresponse()
        return Response(
            raw.status,
            {k.lower(): v for k, v in raw.getheaders()},
            raw.read().decode(errors="replace"),
        )
    finally:
        conn.close()


@contextmanager
def production_gunicorn(servers: Servers, **env: str) -> Iterator[LiveServer]:
    """gunicorn with webapp/gunicorn_conf.py, one worker of 4 threads (so a handful of slow
    clients would be enough to hold every thread)."""
    live = LiveServer(servers, workers=1, threads=4, **env)
    live.args[3:3] = ["-c", "python:webapp.gunicorn_conf"]
    with live:
        yield live


class Shopper:
    """A browser on https://shop.example:<the test's 443> from ``source``: its session
    cookie, and the Referer and Origin a browser sends with each request."""

    def __init__(self, site: Nginx, source: str = "127.0.0.1") -> None:
        self.site, self.source, self.cookie = site, source, ""
        self.origin = f"https://{HOST}:{site.ports.https}"

    def send(
        self,
        method: str,
        path: str,
        *,
        referer: str | None = None,
        form: dict[str, str] | None = None,
        timeout: float = 10,
    ) -> Response:
        headers = {"Referer": self.origin + referer} if referer else {}
        if method == "POST":
            headers["Origin"] = self.origin
        answer = fetch(
            self.site.ports.https,
            method,
            path,
            context=self.site.context,
            host=f"{HOST}:{self.site.ports.https}",
            source=self.source,
            cookie=self.cookie,
            headers=headers,
            form=form,
            timeout=timeout,
        )
        if "set-cookie" in answer.headers:
            self.cookie = f"session={SimpleCookie(answer.headers['set-cookie'])['session'].value}"
        return answer

    def open_form(self, timeout: float = 10) -> dict[str, str]:
        """GET the order form; the fields as a shopper fills them in."""
        page = self.send("GET", "/orders/new", timeout=timeout)
        assert page.status == 200, page.body[:300]
        return {
            **VALID,
            "csrf_token": hidden(page.body, "csrf_token"),
            "form_token": hidden(page.body, "form_token"),
        }

    def place_order(self, timeout: float = 10) -> Response:
        """Open the form and submit it, as sent from the form's page."""
        form = self.open_form(timeout)
        return self.send("POST", "/orders", referer="/orders/new", form=form, timeout=timeout)
