"""Production as docs/DEPLOY.md describes it: gunicorn on loopback behind Debian's nginx
with docs/nginx.conf as shipped (tests/nginx.py): slow clients and X-Forwarded-For (issue
22), the shop's own page with the app stopped, a submit on a port other than 443, the
port-80 server, and Prometheus scraping through nginx (issues 30 and 31). The same
nginx's logs and limits are tests/test_nginx_logs.py's and tests/test_nginx_limits.py's."""

from __future__ import annotations

import importlib
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.cookies import SimpleCookie

import pytest
import yaml

from dev.embedded import free_port
from tests.conftest import VALID, hidden
from tests.live import ROOT, LiveServer, Response, request
from tests.nginx import (
    DEPLOY,
    HOST,
    SHIPPED,
    Nginx,
    Shopper,
    fetch,
    needs_nginx,
    nginx,
    production_gunicorn,
)
from tests.refunds.conftest import Worker
from webapp.refunds.settings import monitor_bind

SLOW_CLIENTS = 50
TRICKLE_SECONDS = 5.0


def test_gunicorn_listens_on_loopback_unless_told_otherwise(monkeypatch):
    """Only the proxy on the same machine can reach the app port: no slow client holds a
    gthread worker, and no client sends the X-Forwarded-For that TRUSTED_PROXIES trusts."""
    from webapp import gunicorn_conf
    monkeypatch.delenv("BIND", raising=False)
    assert importlib.reload(gunicorn_conf).bind == "127.0.0.1:8000"
    monkeypatch.setenv("BIND", "10.0.3.7:8000")
    assert importlib.reload(gunicorn_conf).bind == "10.0.3.7:8000"
    monkeypatch.delenv("BIND")
    importlib.reload(gunicorn_conf)


def slow_request(index: int) -> tuple[bytes, bytes]:
    """What one slow client sends: nothing at once and its headers at 1 byte/s, or its
    headers at once and the body at 1 byte/s (half of them each)."""
    if index % 2:
        return b"", f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: {index}\r\n\r\n".encode()
    body = b"product=1&quantity=1&name=Slow&email=slow%40example.com&address=x" * 2
    return (b"POST /orders HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()), body


@contextmanager
def trickling(port: int) -> Iterator[list[socket.socket]]:
    """SLOW_CLIENTS connections to 127.0.0.1:``port`` that send a byte a second each, and
    close themselves after TRICKLE_SECONDS (or when the block ends)."""
    sockets, pending = [], []
    for index in range(SLOW_CLIENTS):
        sock = socket.create_connection(("127.0.0.1", port), timeout=2)
        head, slow = slow_request(index)
        sock.sendall(head)
        sockets.append(sock)
        pending.append(slow)
    stop = threading.Event()

    def trickle() -> None:
        started = time.monotonic()
        while not stop.is_set() and time.monotonic() - started < TRICKLE_SECONDS:
            for sock, rest in zip(sockets, pending, strict=True):
                if rest:
                    try:
                        sock.send(rest[:1])
                    except OSError:
                        pass
            pending[:] = [rest[1:] for rest in pending]
            stop.wait(1)
        for sock in sockets:
            sock.close()

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        time.sleep(1.5)  # every slow client has started sending
        yield sockets
    finally:
        stop.set()
        thread.join(TRICKLE_SECONDS + 2)


def timed(port: int) -> dict[str, float | str]:
    """Seconds for /healthz, the order form, and its submit, each with a 1 s budget."""
    figures: dict[str, float | str] = {}
    try:
        started = time.monotonic()
        assert request(port, "GET", "/healthz", timeout=1).status == 200
        figures["healthz"] = time.monotonic() - started
        started = time.monotonic()
        cookie, form = open_form_within(port, 1)
        figures["GET /orders/new"] = time.monotonic() - started
        started = time.monotonic()
        placed = request(port, "POST", "/orders", cookie=cookie, form=form, timeout=1)
        assert placed.status == 303, placed.body[:300]
        figures["POST /orders"] = time.monotonic() - started
    except TimeoutError:
        figures["timed out"] = f"after {', '.join(figures) or 'nothing'}"
    return figures


def open_form_within(port: int, timeout: float) -> tuple[str, dict[str, str]]:
    """tests.live.open_form with a time limit: the session cookie and the filled-in form."""
    page = request(port, "GET", "/orders/new", timeout=timeout)
    assert page.status == 200, page.body[:300]
    cookie = SimpleCookie(page.headers["set-cookie"])
    return f"session={cookie['session'].value}", {
        **VALID, "csrf_token": hidden(page.body, "csrf_token"),
        "form_token": hidden(page.body, "form_token")}


@needs_nginx
def test_50_slow_clients_leave_healthz_and_a_submit_answering_within_a_second(
        servers, tmp_path):
    with production_gunicorn(servers) as live, nginx(tmp_path, live.port) as site:
        port = site.ports.plain
        # The same slow clients straight at gunicorn hold its threads: this is what
        # nginx is for, and shows the slow clients here are slow enough to matter.
        with trickling(live.port):
            direct = timed(live.port)
        time.sleep(1)  # gunicorn finishes the requests the slow clients held back
        with trickling(port):
            proxied = timed(port)
    print(f"\n{SLOW_CLIENTS} clients at 1 byte/s; straight at gunicorn: {fmt(direct)}; "
          f"through nginx: {fmt(proxied)}")
    assert "timed out" in direct, direct
    assert "timed out" not in proxied and all(
        isinstance(seconds, float) and seconds < 1 for seconds in proxied.values()), proxied


def fmt(figures: dict[str, float | str]) -> str:
    return ", ".join(f"{name} {value:.3f} s" if isinstance(value, float) else f"{name} {value}"
                     for name, value in figures.items())


def form_views(port: int, forwarded_for: list[str]) -> list[int]:
    """Cookieless views of the order form, one a client claiming each address."""
    statuses = []
    for address in forwarded_for:
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        with sock, sock.makefile("rb") as reply:
            sock.sendall(f"GET /orders/new HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         f"X-Forwarded-For: {address}\r\nConnection: close\r\n\r\n".encode())
            statuses.append(int(reply.readline().split()[1]))
    return statuses


@needs_nginx
def test_behind_nginx_a_client_sent_x_forwarded_for_does_not_choose_the_bucket(
        servers, tmp_path):
    """Two clients on 127.0.0.1 claiming different addresses share one per-client count
    through nginx; straight at the app port (why it binds to loopback) they would not."""
    if time.time() % 60 > 50:  # the count is per minute of the clock
        time.sleep(61 - time.time() % 60)
    with production_gunicorn(servers, TRUSTED_PROXIES="1",
                             FORM_TOKENS_MAX_PER_CLIENT_PER_MINUTE="4") as live, \
            nginx(tmp_path, live.port) as site:
        through_nginx = form_views(site.ports.plain, ["203.0.113.1", "198.51.100.2"] * 2)
        direct = form_views(live.port, ["203.0.113.7", "198.51.100.8"] * 2)
    # LiveServer's own readiness check spent one view of 127.0.0.1's four.
    assert through_nginx == [200, 200, 200, 429], through_nginx
    assert direct == [200, 200, 200, 200], direct


#: What Prometheus reads, by the job DEPLOY.md names: the app's and the refund worker's.
JOB_METRIC = {"shop": "form_tokens_issued_total", "refund-worker": "refund_worker_lag_messages"}
METRICS_TOKEN = "nginx-test-metrics-token-of-32-bytes-at-least"


def deploy_setting(name: str) -> str:
    """The value DEPLOY.md gives ``name`` (``NAME=value`` in its commands)."""
    match = re.search(rf"\b{name}=([^\s\\/'\"]+)", DEPLOY.read_text())
    assert match, f"DEPLOY.md sets no {name}"
    return match.group(1)


@pytest.fixture(scope="module")
def shop(servers, tmp_path_factory) -> Iterator[tuple[LiveServer, Nginx, int]]:
    """gunicorn as DEPLOY.md runs it (production settings, TRUSTED_PROXIES and its
    TRUSTED_HOSTS, a METRICS_TOKEN) behind nginx; the refund worker's monitor port."""
    monitor = free_port()
    hosts = f"{deploy_setting('TRUSTED_HOSTS')},127.0.0.1"
    with production_gunicorn(servers, TRUSTED_PROXIES="1", TRUSTED_HOSTS=hosts,
                             METRICS_TOKEN=METRICS_TOKEN) as live, \
            nginx(tmp_path_factory.mktemp("nginx"), live.port, monitor_port=monitor) as site:
        yield live, site, monitor


@needs_nginx
def test_a_form_submitted_over_https_on_a_port_other_than_443_places_the_order(shop):
    """Issue 31: behind nginx on another port every submit was a 403, as Host lost its
    port and the HTTPS Referer check compares it."""
    _, site, _ = shop
    shopper = Shopper(site)
    placed = shopper.place_order()
    assert placed.status == 303, placed.body[:300]
    page = shopper.send("GET", placed.headers["location"], referer="/orders/new")
    assert page.status == 200 and VALID["name"] in page.body
    assert placed.headers["location"].startswith("/orders/")


@needs_nginx
def test_with_the_app_stopped_nginx_answers_with_the_shops_own_page_and_no_version(tmp_path):
    """Issue 31: nginx's own "502 Bad Gateway / nginx/1.22.1" page, version included.
    Nothing listens on the app's port, as when gunicorn is stopped or restarting."""
    with nginx(tmp_path, app_port=free_port()) as site:
        shopper = Shopper(site)
        answers = {"the order form": shopper.send("GET", "/orders/new"),
                   "its submit": shopper.send("POST", "/orders", referer="/orders/new",
                                              form=VALID),
                   "a health check": fetch(site.ports.plain, "GET", "/healthz")}
    page = (ROOT / "static" / "errors" / "unavailable.html").read_text()
    for what, answer in answers.items():
        assert (answer.status, answer.body == page) == (502, True), (what, answer.body[:300])
        assert answer.headers["server"] == "nginx", what  # server_tokens off
        assert answer.headers["content-type"] == "text/html", what
        assert answer.headers["retry-after"] == "30", what
        assert "default-src 'none'" in answer.headers["content-security-policy"], what
    assert "nginx" not in page and "We are briefly unavailable" in page


@needs_nginx
def test_port_80_sends_browsers_to_https_and_serves_certbots_challenge(shop):
    _, site, _ = shop
    moved = fetch(site.ports.http, "GET", "/orders/new?product=1", host=HOST)
    assert moved.status == 301
    assert moved.headers["location"] == f"https://{HOST}/orders/new?product=1"
    assert "nginx/" not in moved.body and moved.headers["server"] == "nginx"
    challenge = site.prefix / "certbot" / ".well-known" / "acme-challenge"
    challenge.mkdir(parents=True)
    (challenge / "token-of-the-ca").write_text("token-of-the-ca.thumbprint")
    answer = fetch(site.ports.http, "GET", "/.well-known/acme-challenge/token-of-the-ca",
                   host=HOST)
    assert (answer.status, answer.body) == (200, "token-of-the-ca.thumbprint")


def scrape_jobs() -> dict[str, dict]:
    """DEPLOY.md's Prometheus scrape_configs, by job name."""
    block = re.search(r"^```yaml\n(.*?)^```", DEPLOY.read_text(), re.S | re.M)
    assert block, "DEPLOY.md has no Prometheus config"
    return {job["job_name"]: job for job in yaml.safe_load(block.group(1))["scrape_configs"]}


def upstream(name: str) -> str:
    match = re.search(rf"upstream {name} \{{\s*server ([^;\s]+);", SHIPPED.read_text())
    assert match, f"docs/nginx.conf has no upstream {name}"
    return match.group(1)


def test_deploys_scrape_config_targets_nginx_and_nginx_the_ports_the_app_and_worker_bind():
    """Issue 30: DEPLOY scraped app-a:8000 and app-a:9108, which the same page binds to
    loopback. Prometheus reads both through nginx's 443, which passes each on to what
    the app (webapp/gunicorn_conf.py) and the worker (REFUND_MONITOR_BIND) bind."""
    from webapp import gunicorn_conf
    jobs = scrape_jobs()
    assert set(jobs) == set(JOB_METRIC)
    for job in jobs.values():
        assert job["scheme"] == "https" and job["authorization"]["type"] == "Bearer"
        ports = {target.rpartition(":")[2] for config in job["static_configs"]
                 for target in config["targets"]}
        assert ports == {"443"}, job
    assert "listen 443 ssl;" in SHIPPED.read_text()
    assert upstream("webapp") == gunicorn_conf.bind == "127.0.0.1:8000"
    host, port = monitor_bind(deploy_setting("REFUND_MONITOR_BIND"))
    assert upstream("refund_worker_monitor") == f"{host}:{port}" and host == "127.0.0.1"


@needs_nginx
def test_prometheus_reads_the_app_and_the_worker_through_nginx_as_deploy_configures_it(
        shop, servers):
    live, site, monitor = shop
    worker = Worker(servers, REFUND_MONITOR_BIND=str(monitor), METRICS_TOKEN=METRICS_TOKEN)
    try:
        worker.wait_for(f"serving /healthz and /metrics on 127.0.0.1:{monitor}")
        for name, job in scrape_jobs().items():
            target = job["static_configs"][0]["targets"][0].rpartition(":")[0]

            def scrape(token: str | None, source: str = "127.0.0.1", job=job,
                       target=target) -> Response:
                """As Prometheus asks: the target as Host, its bearer token."""
                return fetch(site.ports.https, "GET", job.get("metrics_path", "/metrics"),
                             context=site.context, host=f"{target}:{site.ports.https}",
                             source=source,
                             headers={"Authorization": f"Bearer {token}"} if token else {})

            scraped = scrape(METRICS_TOKEN)
            assert scraped.status == 200, (name, scraped.body[:300])
            assert re.search(rf"^{JOB_METRIC[name]}[ {{]", scraped.body, re.M), name
            assert scrape(None).status == 401, name
            assert scrape(METRICS_TOKEN, source="127.0.0.2").status == 403, name  # not ours
    finally:
        worker.stop()
        worker.close()
