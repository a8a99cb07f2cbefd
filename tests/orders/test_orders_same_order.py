"""Two tabs of the order form sent with the same details within
SAME_ORDER_WINDOW_SECONDS do not silently place two orders: the second is asked about
("You placed this same order … (order N)", a link, a "Yes, place another" box), its
input kept, and placed only when the box is ticked; submits at once never place more
than was confirmed."""

from __future__ import annotations

import re
import threading

import pytest
from sqlalchemy import text

from tests.conftest import hidden, order_count
from tests.faults.steps import open_form, submit
from tests.support.order_buttons import landed
from tests.support.pauses import after_consume
from webapp import config

# in scripts/test --quick
pytestmark = pytest.mark.quick

#: The shop's default window (testing turns it off unless a test sets it).
WINDOW = {"SAME_ORDER_WINDOW_SECONDS": 600}


@pytest.fixture
def app(make_app):
    return make_app(**WINDOW)


def numbers(servers) -> list[str]:
    with servers.engine.connect() as conn:
        return list(conn.scalars(text("SELECT order_number FROM orders ORDER BY id")))


def asked(response, servers) -> str:
    """The question's page: 409, the first order named and linked, the input kept, the
    box whose value names that order; returns the page."""
    page = response.get_data(as_text=True)
    assert response.status_code == 409, page[:800]
    first = numbers(servers)[-1]
    assert re.search(
        rf"You placed this same order (less than a minute|\d+ minutes?) ago "
        rf"\(order {first}\)",
        page,
    )
    assert 'id="same-order-link">See order' in page
    assert f'name="same_again" value="{first}"' in page
    assert "Ada Lovelace" in page and 'value="2"' in page
    return page


def test_the_same_order_from_a_second_tab_is_asked_about_then_placed_when_confirmed(
    client, servers
):
    first_tab, second_tab = open_form(client), open_form(client)
    landed(submit(client, first_tab))
    page = asked(submit(client, second_tab), servers)
    # unspent: asked again
    assert hidden(page, "form_token") == second_tab["form_token"]
    assert order_count(servers) == 1
    # a double click, or sent again unticked
    again = submit(client, second_tab)
    asked(again, servers)
    landed(submit(client, second_tab, same_again=numbers(servers)[0]))
    assert order_count(servers) == 2


def test_a_confirmation_is_for_the_order_it_named(client, servers):
    tabs = [open_form(client) for _ in range(3)]
    landed(submit(client, tabs[0]))
    first = numbers(servers)[0]
    landed(submit(client, tabs[1], same_again=first))
    # The third tab confirms a second of the first order; a second exists already.
    page = asked(submit(client, tabs[2], same_again=first), servers)
    assert f"(order {numbers(servers)[1]})" in page and order_count(servers) == 2


def test_other_details_another_session_a_cancelled_order_or_past_the_window_are_not_asked(
    client, servers, make_app
):
    landed(submit(client, open_form(client)))
    # other details
    landed(submit(client, open_form(client), quantity="3"))
    other_browser = make_app(**WINDOW).test_client()
    placed = submit(other_browser, open_form(other_browser))
    # nothing told of it
    assert numbers(servers)[0] not in placed.get_data(as_text=True)
    landed(placed)
    with servers.engine.begin() as conn:
        conn.execute(text("UPDATE orders SET status = 'cancelled' WHERE quantity = 3"))
    landed(submit(client, open_form(client), quantity="3"))
    with servers.engine.begin() as conn:
        conn.execute(text("UPDATE orders SET created_at = now() - interval '11 minutes'"))
    landed(submit(client, open_form(client)))
    assert order_count(servers) == 5


def test_the_window_is_ten_minutes_unless_set_and_zero_turns_the_question_off(make_app, servers):
    servers_at = {"DATABASE_URL": servers.database_url, "REDIS_URL": servers.redis.url}
    for environ, window in (({}, 600), ({"SAME_ORDER_WINDOW_SECONDS": "60"}, 60)):
        settings = config.from_environ({"APP_ENV": "development", **servers_at, **environ})
        config.finish(settings)
        assert settings["SAME_ORDER_WINDOW_SECONDS"] == window
    client = make_app(SAME_ORDER_WINDOW_SECONDS=0).test_client()
    landed(submit(client, open_form(client)))
    landed(submit(client, open_form(client)))
    assert order_count(servers) == 2


def test_two_tabs_sent_at_once_place_one_order_and_the_other_is_asked(app, servers):
    """Both pass validation before either is placed: the lock on the session makes the
    second see the first's order inside its transaction, and ask."""
    client = app.test_client()
    first_tab, second_tab = open_form(client), open_form(client)
    consumed, release = threading.Event(), threading.Event()
    pauses = iter([lambda: (consumed.set(), release.wait(10))])

    def pause_the_first() -> None:
        next(pauses, lambda: None)()

    after_consume(app, pause_the_first)
    answers = {}
    other = app.test_client()
    other.set_cookie("session", client.get_cookie("session").value)
    first = threading.Thread(target=lambda: answers.update(first=submit(client, first_tab)))
    first.start()
    # validated, token spent, not yet placed
    assert consumed.wait(10)
    # validated now: no order yet
    answers["second"] = submit(other, second_tab)
    release.set()
    first.join(20)
    after_consume(app, None)
    assert order_count(servers) == 1
    landed(answers["second"])
    page = asked(answers["first"], servers)
    assert "Yes, place another order just like order" in page


@pytest.mark.parametrize("confirmed", [False, True])
def test_many_tabs_at_once_place_at_most_what_was_confirmed(app, servers, confirmed):
    client = app.test_client()
    landed(submit(client, open_form(client)))
    first = numbers(servers)[0]
    tabs = [open_form(client) for _ in range(4)]
    start = threading.Barrier(len(tabs))
    answers: list = []

    def send(tab: dict[str, str]) -> None:
        other = app.test_client()
        other.set_cookie("session", client.get_cookie("session").value)
        start.wait()
        answers.append(submit(other, tab, **({"same_again": first} if confirmed else {})))

    threads = [threading.Thread(target=send, args=(tab,)) for tab in tabs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    statuses = sorted(answer.status_code for answer in answers)
    # Unconfirmed: nothing more; each tab that confirmed "another besides the first":
    # one more order, the others asked about that one.
    assert statuses == ([303] if confirmed else []) + [409] * (4 - confirmed)
    assert order_count(servers) == 1 + confirmed
