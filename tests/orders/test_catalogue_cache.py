"""The catalogue read is reused for CATALOGUE_CACHE_SECONDS (a round trip saved per
request), and a product taken off sale meanwhile is still never sold."""

from __future__ import annotations

import pytest
from sqlalchemy import event, text

from tests.conftest import VALID, hidden, order_count
from webapp.orders import FORM, NOT_PLACED

# in scripts/test --quick
pytestmark = pytest.mark.quick


def test_cached_catalogue_saves_the_query_but_an_off_sale_product_is_refused_not_sold(
    make_app, servers
):
    app = make_app(CATALOGUE_CACHE_SECONDS=60)
    client = app.test_client()
    # fills the cache
    client.get("/orders/new")
    statements: list[str] = []
    engine = app.extensions["db"].kw["bind"]
    event.listen(
        engine, "before_cursor_execute", lambda conn, cursor, sql, *args: statements.append(sql)
    )
    page = client.get("/orders/new").get_data(as_text=True)
    assert not [sql for sql in statements if "FROM products" in sql]

    with servers.engine.begin() as conn:
        conn.execute(text("UPDATE products SET active = false WHERE id = 1"))
    response = client.post(
        "/orders",
        data={
            **VALID,
            "product": "1",
            "csrf_token": hidden(page, "csrf_token"),
            "form_token": hidden(page, "form_token"),
        },
    )
    assert response.status_code == 409
    assert NOT_PLACED in response.get_data(as_text=True)
    assert order_count(servers) == 0


def test_without_the_cache_every_form_reads_the_catalogue(make_app):
    app = make_app(CATALOGUE_CACHE_SECONDS=0)
    client = app.test_client()
    client.get("/orders/new")
    statements: list[str] = []
    event.listen(
        app.extensions["db"].kw["bind"],
        "before_cursor_execute",
        lambda conn, cursor, sql, *args: statements.append(sql),
    )
    client.get("/orders/new")
    assert [sql for sql in statements if "FROM products" in sql]


def test_a_submit_that_rolls_back_leaves_the_cached_catalogue_usable(make_app, servers):
    """The cache is shared by every request of the process: what it holds must not
    belong to one request's session. A submit that ends in a ROLLBACK (here a token the
    shop made for this session but never stored in Redis: "expired" after validation)
    expires what its session loaded; the next form drawn from the cache must still show
    the catalogue, not fail on an expired, detached product."""
    app = make_app(CATALOGUE_CACHE_SECONDS=0)
    client = app.test_client()
    page = client.get("/orders/new").get_data(as_text=True)
    with client.session_transaction() as session:
        sid = session["_submit_once_sid"]
    # A made-up token would be refused by its MAC before the form is validated.
    unstored = app.extensions["submit_once"].store.new_token(session_id=sid, form=FORM)
    expired = client.post(
        "/orders",
        # reads the catalogue: the cache's products
        data={
            **VALID,
            "csrf_token": hidden(page, "csrf_token"),
            "form_token": unstored,
        },
    )
    assert expired.status_code == 409
    # from now on, drawn from that read
    app.config["CATALOGUE_CACHE_SECONDS"] = 60
    again = client.get("/orders/new")
    assert again.status_code == 200, again.get_data(as_text=True)[:300]
    assert "Stoneware mug" in again.get_data(as_text=True)
