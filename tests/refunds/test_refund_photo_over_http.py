"""A refund request with a photo under storms over real HTTP: gunicorn with 2 worker
processes of 12 threads, 20 paid orders, 20 concurrent duplicates of each order's request,
the photo sent with each, or kept from a first submit refused (422) and sent as its
reference. One request and one photo an order, every answer the same redirect, no 5xx,
no connection left idle in a transaction. The test prints its counts."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from http.cookies import SimpleCookie

import pytest
from sqlalchemy import text

from tests.conftest import hidden
from tests.refunds.test_refund_photo import PNG, photos_of, public_id_of, request_count
from tests.support.live import Connection, LiveServer, Response, request

ORDERS, DUPLICATES = 20, 20
IDLE_IN_TRANSACTION = text(
    "SELECT count(*) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%' "
    "AND pid <> pg_backend_pid()"
)


def multipart(fields: dict[str, str], name: str, filename: str, data: bytes) -> tuple[bytes, str]:
    """(body, Content-Type) of the refund form as a browser sends it, the photo last."""
    boundary = uuid.uuid4().hex
    body = b"".join(
        f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"\r\n\r\n{value}\r\n'.encode()
        for key, value in fields.items()
    )
    body += (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; '
            f'filename="{filename}"\r\nContent-Type: image/png\r\n\r\n'
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return body, f"multipart/form-data; boundary={boundary}"


def send(port: int, path: str, cookie: str, body: bytes, content_type: str) -> Response:
    conn = Connection(port, timeout=60)
    try:
        return conn.send(
            "POST", path, body=body, headers={"Cookie": cookie, "Content-Type": content_type}
        )
    finally:
        conn.close()


def storm(port: int, path: str, cookie: str, body: bytes, content_type: str) -> list[Response]:
    """``DUPLICATES`` posts of one body at once, each on a connection of its own."""
    start = threading.Barrier(DUPLICATES)

    def click(_: int) -> Response:
        start.wait(60)
        return send(port, path, cookie, body, content_type)

    with ThreadPoolExecutor(DUPLICATES) as pool:
        return list(pool.map(click, range(DUPLICATES)))


@pytest.mark.parametrize("photo", ["sent", "kept"])
def test_storms_of_a_refund_with_a_photo_store_one_request_and_one_photo_an_order(
    servers, paid_order, photo
):
    orders = [paid_order(3600) for _ in range(ORDERS)]
    statuses: Counter[int] = Counter()
    with LiveServer(servers, workers=2, threads=12) as live:
        for order_id in orders:
            public_id = public_id_of(servers, order_id)
            page = request(live.port, "GET", f"/orders/{public_id}/refund")
            assert page.status == 200
            cookie = f"session={SimpleCookie(page.headers['set-cookie'])['session'].value}"
            fields = {
                "csrf_token": hidden(page.body, "csrf_token"),
                "form_token": hidden(page.body, "form_token"),
                "amount": "10",
            }
            if photo == "kept":
                body, content_type = multipart(
                    {**fields, "amount": "twelve"}, "photo", "box.png", PNG
                )
                refused = send(
                    live.port, f"/orders/{public_id}/refunds", cookie, body, content_type
                )
                assert refused.status == 422 and "Kept: box.png" in refused.body
                fields["form_token_kept"] = hidden(refused.body, "form_token_kept")
                # the file input left empty, as a browser sends it
                body, content_type = multipart(fields, "photo", "", b"")
            else:
                body, content_type = multipart(fields, "photo", "box.png", PNG)
            answers = storm(live.port, f"/orders/{public_id}/refunds", cookie, body, content_type)
            statuses.update(answer.status for answer in answers)
            assert len({(a.status, a.headers.get("location")) for a in answers}) == 1
        with servers.engine.connect() as conn:
            idle = conn.scalar(IDLE_IN_TRANSACTION)
    requests = sum(request_count(servers, order_id) for order_id in orders)
    photos = [photo for order_id in orders for photo in photos_of(servers, order_id)]
    server_errors = sum(n for status, n in statuses.items() if status >= 500)
    print(
        f"\nrefund with a photo {photo}: answers {dict(statuses)}, refund requests {requests}, "
        f"photo rows {len(photos)}, 5xx {server_errors}, idle in transaction {idle}"
    )
    assert statuses == {303: ORDERS * DUPLICATES}
    assert requests == ORDERS and photos == [("image/png", "box.png", PNG)] * ORDERS
    assert idle == 0
