"""The shop behind Debian's nginx with docs/nginx.conf as a browser and Prometheus reach
it over TLS (tests/support/nginx.py): a submit on a port other than 443, the port-80 server, and
Prometheus reading the app and the refund worker through nginx as DEPLOY.md configures it."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
import yaml

from dev.embedded import free_port
from tests.conftest import VALID
from tests.refunds.conftest import Worker
from tests.support.live import LiveServer, Response
from tests.support.nginx import (
    DEPLOY,
    HOST,
    SHIPPED,
    Nginx,
    Shopper,
    deploy_setting,
    fetch,
    needs_nginx,
    nginx,
    production_gunicorn,
)
from webapp.refunds.settings import monitor_bind

#: What Prometheus reads, by the job DEPLOY.md names: the app's and the refund worker's.
JOB_METRIC = {
    "shop": "submit_once_tokens_issued_total",
    "refund-worker": "refund_worker_lag_messages",
}
METRICS_TOKEN = "nginx-test-metrics-token-of-32-bytes-at-least"


@pytest.fixture(scope="module")
def shop(servers, tmp_path_factory) -> Iterator[tuple[LiveServer, Nginx, int]]:
    """gunicorn as DEPLOY.md runs it (production settings, TRUSTED_PROXIES and its
    TRUSTED_HOSTS, a METRICS_TOKEN) behind nginx; the refund worker's monitor port."""
    monitor = free_port()
    hosts = f"{deploy_setting('TRUSTED_HOSTS')},127.0.0.1"
    with (
        production_gunicorn(
            servers, TRUSTED_PROXIES="1", TRUSTED_HOSTS=hosts, METRICS_TOKEN=METRICS_TOKEN
        ) as live,
        nginx(tmp_path_factory.mktemp("nginx"), live.port, monitor_port=monitor) as site,
    ):
        yield live, site, monitor


@needs_nginx
def test_a_form_submitted_over_https_on_a_port_other_than_443_places_the_order(shop):
    """Was: behind nginx on another port every submit was a 403, as Host lost its
    port and the HTTPS Referer check compares it."""
    _, site, _ = shop
    shopper = Shopper(site)
    placed = shopper.place_order()
    assert placed.status == 303, placed.body[:300]
    page = shopper.send("GET", placed.headers["location"], referer="/orders/new")
    assert page.status == 200 and VALID["name"] in page.body
    assert placed.headers["location"].startswith("/orders/")


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
    answer = fetch(site.ports.http, "GET", "/.well-known/acme-challenge/token-of-the-ca", host=HOST)
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
    """Was: DEPLOY.md scraped app-a:8000 and app-a:9108, which the same page binds to
    loopback. Prometheus reads both through nginx's 443, which passes each on to what
    the app (webapp/gunicorn_conf.py) and the worker (REFUND_MONITOR_BIND) bind."""
    from webapp import gunicorn_conf

    jobs = scrape_jobs()
    assert set(jobs) == set(JOB_METRIC)
    for job in jobs.values():
        assert job["scheme"] == "https" and job["authorization"]["type"] == "Bearer"
        ports = {
            target.rpartition(":")[2]
            for config in job["static_configs"]
            for target in config["targets"]
        }
        assert ports == {"443"}, job
    assert "listen 443 ssl;" in SHIPPED.read_text()
    assert upstream("webapp") == gunicorn_conf.bind == "127.0.0.1:8000"
    host, port = monitor_bind(deploy_setting("REFUND_MONITOR_BIND"))
    assert upstream("refund_worker_monitor") == f"{host}:{port}" and host == "127.0.0.1"


@needs_nginx
def test_prometheus_reads_the_app_and_the_worker_through_nginx_as_deploy_configures_it(
    shop, servers
):
    live, site, monitor = shop
    worker = Worker(servers, REFUND_MONITOR_BIND=str(monitor), METRICS_TOKEN=METRICS_TOKEN)
    try:
        worker.wait_for(f"serving /healthz and /metrics on 127.0.0.1:{monitor}")
        for name, job in scrape_jobs().items():
            target = job["static_configs"][0]["targets"][0].rpartition(":")[0]

            def scrape(
                token: str | None, source: str = "127.0.0.1", job=job, target=target
            ) -> Response:
                """As Prometheus asks: the target as Host, its bearer token."""
                return fetch(
                    site.ports.https,
                    "GET",
                    job.get("metrics_path", "/metrics"),
                    context=site.context,
                    host=f"{target}:{site.ports.https}",
                    source=source,
                    headers={"Authorization": f"Bearer {token}"} if token else {},
                )

            scraped = scrape(METRICS_TOKEN)
            assert scraped.status == 200, (name, scraped.body[:300])
            assert re.search(rf"^{JOB_METRIC[name]}[ {{]", scraped.body, re.M), name
            assert scrape(None).status == 401, name
            # not ours
            assert scrape(METRICS_TOKEN, source="127.0.0.2").status == 403, name
    finally:
        worker.stop()
        worker.close()
