"""The shop behind PgBouncer pooling by transaction (Debian's 1.18, its defaults, 4 server
connections): one client's transactions run on whichever server connection is free, so
nothing may outlive a transaction on one of them."""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import text

from tests.live import LiveServer, Response, open_form, request
from tests.payments import PAYS, Provider

#: Forms in a card-checkout storm, how many times each is sent at once, and how many storms
#: one app serves: psycopg prepares a statement on its sixth run on a connection, so a
#: shop that has served a while prepares the most.
FORMS, COPIES, STORMS = 8, 16, 3


@pytest.fixture(scope="module")
def provider(tmp_path_factory):
    with Provider(tmp_path_factory.mktemp("provider") / "journal.jsonl") as started:
        yield started


def card_storm(port: int, name: str) -> list[Response]:
    """FORMS card-checkout forms (customers ``<name> <n>``), each submitted COPIES times
    at once, every copy on a connection of its own, all of them let go together."""
    sends = []
    for n in range(FORMS):
        cookie, form = open_form(port)
        sends += [(cookie, {**form, "name": f"{name} {n}", "card": PAYS})] * COPIES
    together = threading.Barrier(len(sends))

    def send(cookie_and_form: tuple[str, dict[str, str]]) -> Response:
        cookie, form = cookie_and_form
        together.wait(timeout=60)
        return request(port, "POST", "/orders", cookie=cookie, form=form, timeout=60)

    with ThreadPoolExecutor(len(sends)) as pool:
        return list(pool.map(send, sends))


def test_a_card_checkout_storm_through_pgbouncer_places_and_charges_each_form_once(
    servers, pgbouncer, provider
):
    with LiveServer(
        servers,
        workers=4,
        threads=8,
        DATABASE_URL=pgbouncer.url("webapp_test"),
        DATABASE_POOLER="transaction",
        **provider.env(),
    ) as live:
        answers = [
            answer for storm in range(STORMS) for answer in card_storm(live.port, f"Storm {storm}")
        ]
        output = live.output()
    statuses = Counter(answer.status for answer in answers)
    with servers.engine.connect() as conn:
        orders = conn.execute(
            text("SELECT customer_name, status, payment_reference, charge_id FROM orders")
        ).all()
        idle_in_transaction = conn.scalar(
            text("SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction'")
        )
    server_errors = sum(n for status, n in statuses.items() if status >= 500)
    assert server_errors == 0, f"{statuses}; the app said:\n{output[-3000:]}"
    assert statuses == {303: STORMS * FORMS * COPIES}
    assert Counter(name for name, *_ in orders) == {
        f"Storm {storm} {n}": 1 for storm in range(STORMS) for n in range(FORMS)
    }
    for name, status, reference, charge_id in orders:
        charges = provider.succeeded(reference)
        assert [charge["id"] for charge in charges] == [charge_id], name
        assert status == "paid", name
    assert idle_in_transaction == 0
