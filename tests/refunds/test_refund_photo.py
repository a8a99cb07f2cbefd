"""A refund request may carry a photo: images only (by their bytes), size-capped, stored
once with the request, kept when the form comes back, seen by the operator alone."""

from __future__ import annotations

import io
import threading

import pytest
from sqlalchemy import text

from tests.conftest import flashed, hidden
from tests.refunds.test_refund_form import open_refund_form

#: What is checked is the magic number, so a few bytes after it make a "photo".
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
JPEG = b"\xff\xd8\xff\xe0" + b"\x10JFIF" + bytes(2000)
WEBP = b"RIFF" + (2000).to_bytes(4, "little") + b"WEBPVP8 " + bytes(2000)
SVG = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'


@pytest.fixture
def order(servers, paid_order) -> tuple[int, str]:
    """(id, public id) of an order paid €36.00."""
    order_id = paid_order(3600)
    return order_id, public_id_of(servers, order_id)


def public_id_of(servers, order_id: int) -> str:
    with servers.engine.connect() as conn:
        return conn.scalar(text("SELECT public_id FROM orders WHERE id = :id"), {"id": order_id})


def send(client, public_id: str, tokens: dict[str, str], amount: str, photo=None):
    """Submit the refund form as a browser does: multipart, the file input empty
    (a part with no file name) unless ``photo`` is (bytes, name)."""
    data, name = photo if photo else (b"", "")
    return client.post(
        f"/orders/{public_id}/refunds",
        data={**tokens, "amount": amount, "photo": (io.BytesIO(data), name)},
        content_type="multipart/form-data",
    )


def photos_of(servers, order_id: int) -> list[tuple[str, str, bytes]]:
    """(content type, file name, bytes) of every photo of the order's refund requests."""
    with servers.engine.connect() as conn:
        return [
            (row.content_type, row.filename, bytes(row.data))
            for row in conn.execute(
                text(
                    "SELECT p.content_type, p.filename, p.data FROM refund_photos p "
                    "JOIN refund_requests r ON r.id = p.refund_request_id "
                    "WHERE r.order_id = :id ORDER BY r.id"
                ),
                {"id": order_id},
            )
        ]


def request_count(servers, order_id: int) -> int:
    with servers.engine.connect() as conn:
        return conn.scalar(
            text("SELECT count(*) FROM refund_requests WHERE order_id = :id"), {"id": order_id}
        )


@pytest.mark.parametrize(
    ("photo", "content_type"),
    [(PNG, "image/png"), (JPEG, "image/jpeg"), (WEBP, "image/webp")],
)
def test_a_photo_is_stored_with_its_request_as_the_type_its_bytes_are(
    client, servers, order, photo, content_type
):
    order_id, public_id = order
    tokens = open_refund_form(client, public_id)
    # The browser's name says .jpg whatever it is: the bytes decide the type.
    response = send(client, public_id, tokens, "12.50", (photo, "../../etc/my photo.jpg"))
    assert response.status_code == 303, response.get_data(as_text=True)[:300]
    assert photos_of(servers, order_id) == [(content_type, "etc_my_photo.jpg", photo)]


def test_a_storm_of_twenty_duplicates_stores_one_request_and_one_photo(client, servers, order):
    order_id, public_id = order
    tokens = open_refund_form(client, public_id)
    cookie = client.get_cookie("session").value
    barrier = threading.Barrier(20)
    statuses: list[int] = []

    def click() -> None:
        # Each click is a request of the same page: its cookie, its token, its file.
        browser = client.application.test_client()
        browser.set_cookie("session", cookie)
        barrier.wait()
        statuses.append(send(browser, public_id, tokens, "10", (PNG, "box.png")).status_code)

    threads = [threading.Thread(target=click) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert statuses == [303] * 20
    assert request_count(servers, order_id) == 1
    assert photos_of(servers, order_id) == [("image/png", "box.png", PNG)]


def test_a_refused_amount_keeps_the_photo_and_the_corrected_submit_stores_it(
    client, servers, order
):
    order_id, public_id = order
    tokens = open_refund_form(client, public_id)
    refused = send(client, public_id, tokens, "twelve", (PNG, "box.png"))
    html = refused.get_data(as_text=True)
    assert refused.status_code == 422
    assert "Enter an amount like 12.50." in html
    assert "Kept: box.png. Pick another to replace it." in html
    kept = hidden(html, "form_token_kept")
    # The file input left empty: the kept photo goes with the corrected amount.
    again = send(client, public_id, {**tokens, "form_token_kept": kept}, "12")
    assert again.status_code == 303 and flashed(again) == ["refund_requested"]
    assert request_count(servers, order_id) == 1
    assert photos_of(servers, order_id) == [("image/png", "box.png", PNG)]


def test_a_photo_picked_again_after_a_refused_amount_replaces_the_kept_one(client, servers, order):
    order_id, public_id = order
    tokens = open_refund_form(client, public_id)
    html = send(client, public_id, tokens, "", (PNG, "box.png")).get_data(as_text=True)
    kept = {**tokens, "form_token_kept": hidden(html, "form_token_kept")}
    assert send(client, public_id, kept, "12", (JPEG, "better.jpg")).status_code == 303
    assert photos_of(servers, order_id) == [("image/jpeg", "better.jpg", JPEG)]


NOT_A_PHOTO = "Attach a photo as a JPEG, PNG or WebP image (not an SVG or another kind of file)."


@pytest.mark.parametrize(
    ("data", "name"),
    [
        (b"just some text, named as a picture", "photo.png"),
        (SVG, "photo.svg"),
        # an SVG renamed: its bytes give it away
        (SVG, "photo.png"),
        (b"%PDF-1.7\n", "receipt.pdf"),
        # a PNG's magic number must start the file, not just appear in it
        (b"GIF89a" + PNG, "photo.png"),
    ],
)
def test_a_file_that_is_no_photo_is_refused_with_the_amount_kept(
    client, servers, order, data, name
):
    order_id, public_id = order
    tokens = open_refund_form(client, public_id)
    response = send(client, public_id, tokens, "12.50", (data, name))
    html = response.get_data(as_text=True)
    assert response.status_code == 422
    assert NOT_A_PHOTO in html and 'value="12.50"' in html
    # not kept: left empty, it would only be refused again
    assert "form_token_kept" not in html and "Kept:" not in html
    assert hidden(html, "form_token") == tokens["form_token"]
    assert request_count(servers, order_id) == 0


def test_a_photo_over_the_cap_is_refused_and_a_body_far_over_it_gets_a_clear_413(
    make_app, servers, paid_order
):
    # A small cap: Werkzeug's test client writes a body past 500 kB to a temporary file
    # it never closes (a ResourceWarning, an error here), whatever the app does.
    app = make_app(REFUND_PHOTO_MAX_BYTES=2**18)
    client = app.test_client()
    order_id = paid_order(3600)
    public_id = public_id_of(servers, order_id)
    tokens = open_refund_form(client, public_id)
    assert "up to 0.25 MiB" in client.get(f"/orders/{public_id}/refund").text

    over = send(client, public_id, tokens, "12", (PNG[:8] + bytes(2**18), "big.png"))
    assert over.status_code == 422
    assert "This photo is larger than 0.25 MiB: attach a smaller one (or none)." in over.text
    assert "Kept:" not in over.text

    # Past the cap and the room any form has (MAX_CONTENT_LENGTH): refused unread.
    far_over = send(client, public_id, tokens, "12", (PNG[:8] + bytes(400_000), "huge.png"))
    assert far_over.status_code == 413
    assert "This photo is larger than" in far_over.text
    assert "Nothing was requested" in far_over.text
    assert request_count(servers, order_id) == 0
    # the same token still requests, with a photo within the cap
    assert (
        send(client, public_id, tokens, "12", (PNG[:8] + bytes(100), "ok.png")).status_code == 303
    )


def test_only_the_refund_submit_may_send_a_body_that_large(client, order):
    _, public_id = order
    # the cancel submit keeps MAX_CONTENT_LENGTH (64 KiB)
    response = client.post(
        f"/orders/{public_id}/cancel",
        data={"pad": (io.BytesIO(bytes(100_000)), "x.png")},
        content_type="multipart/form-data",
    )
    assert response.status_code == 413


def test_the_photo_is_served_to_no_page_and_the_operator_saves_it(
    client, app, servers, order, tmp_path
):
    order_id, public_id = order
    tokens = open_refund_form(client, public_id)
    assert send(client, public_id, tokens, "10", (PNG, "box.png")).status_code == 303
    with servers.engine.connect() as conn:
        request_id = conn.scalar(
            text("SELECT id FROM refund_requests WHERE order_id = :id"), {"id": order_id}
        )
    # The customer's own session, and anyone with the order's link, get nothing of it.
    stranger = app.test_client()
    for browser in (client, stranger):
        for path in (
            f"/orders/{public_id}",
            f"/orders/{public_id}/refund",
        ):
            page = browser.get(path)
            assert "box.png" not in page.text and "photo" not in page.text.split("<form")[0]
        for path in (
            f"/orders/{public_id}/refunds/{request_id}/photo",
            f"/orders/{public_id}/refunds/{request_id}",
            f"/refunds/{request_id}/photo",
        ):
            assert browser.get(path).status_code in (404, 405)

    cli = app.test_cli_runner()
    out = tmp_path / "photo.png"
    saved = cli.invoke(
        args=["refunds", "photo", str(request_id), "--out", str(out), "--by", "alice"]
    )
    assert saved.exit_code == 0, saved.output
    assert "image/png" in saved.output and "sent as box.png" in saved.output
    assert out.read_bytes() == PNG
    # never over a file the operator has
    again = cli.invoke(args=["refunds", "photo", str(request_id), "--out", str(out)])
    assert again.exit_code != 0 and "exists already" in again.output
    none = cli.invoke(args=["refunds", "photo", "999999", "--out", str(tmp_path / "x")])
    assert none.exit_code != 0 and "has no photo" in none.output
