"""Twenty concurrent POSTs with one Idempotency-Key against gunicorn workers."""

from __future__ import annotations

import http.client
import json
import time
from concurrent.futures import ThreadPoolExecutor

from tests.conftest import order_count
from tests.support.api_client import ORDER, new_api_key
from tests.support.live import LiveServer

CONCURRENT = 20


def post_order(port: int, api_key: str, key: str):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(
            "POST",
            "/api/orders",
            body=json.dumps(ORDER),
            headers={
                "Content-Type": "application/json",
                "Authorization": f"Bearer {api_key}",
                "Idempotency-Key": key,
            },
        )
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), json.loads(response.read())
    finally:
        conn.close()


def retry_while_in_progress(port: int, api_key: str, result):
    """What a client does with a 409: wait Retry-After seconds and send it again."""
    for _ in range(10):
        status, headers, _ = result
        if status != 409:
            return result
        time.sleep(int(headers["Retry-After"]))
        result = post_order(port, api_key, "storm")
    return result


def test_twenty_concurrent_requests_with_one_key_make_one_order(servers):
    api_key = new_api_key(servers)
    # The first holds its claim for 0.5 s, so the others arrive while it runs.
    with LiveServer(servers, workers=2, threads=10, TEST_PAUSE_AFTER_CONSUME="0.5") as live:
        with ThreadPoolExecutor(CONCURRENT) as pool:
            results = list(
                pool.map(lambda _: post_order(live.port, api_key, "storm"), range(CONCURRENT))
            )
            final = list(
                pool.map(lambda r: retry_while_in_progress(live.port, api_key, r), results)
            )
    statuses = sorted(status for status, _, _ in results)
    assert set(statuses) <= {201, 409}, statuses
    created = [r for r in results if r[0] == 201 and "Idempotent-Replayed" not in r[1]]
    assert len(created) == 1, "exactly one response placed the order"
    assert all(status == 201 for status, _, _ in final)
    assert len({body["id"] for _, _, body in final}) == 1
    assert order_count(servers) == 1
