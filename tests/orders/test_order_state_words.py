"""Every page about an order says where the money is (due and how
to pay, paid, being refunded, refunded in part or in full, with the amounts), in the same
words on the order, cancel and refund pages, and its headline and notices follow the state.

Was: a paid order's page said "Thank you — your order is placed" and never whether payment
was due or taken; after refunding everything, "placed" with status Paid, or "Your order is
refunded" under "it will be applied to your order shortly"; after a partial refund, still
"placed". One table, every state × page (tests/support/money_states.py makes the orders), a card
order being charged or declined among them; its browser twin checks the same words at
desktop width and on a 375 px phone."""

from __future__ import annotations

import re
from html import unescape
from typing import NamedTuple

import pytest

from tests.support.money_states import STATES, put_order_in


class Words(NamedTuple):
    # the order page's h1
    headline: str
    # the order page's Status
    status: str
    # the one sentence every page about the order says
    money: str


class Pages(NamedTuple):
    # status, h1 (303: to the order page)
    cancel: tuple[int, str]
    refund: tuple[int, str]


PAID = "You paid €36.00."
NOT_CANCELLED = (409, "This order was not cancelled")
CANCEL = (200, "Cancel this order?")
REFUND = (200, "Request a refund")
NOTHING_MORE = (200, "Nothing more to refund")
NOTHING_TO_REFUND = (409, "Nothing to refund on this order")

TABLE: dict[str, tuple[Words, Pages]] = {
    "awaiting-payment": (
        Words("Thank you — your order is placed", "Awaiting payment", "Payment due: €36.00."),
        Pages(CANCEL, NOTHING_TO_REFUND),
    ),
    # The checkout's card charge: a charge in flight cannot be cancelled (it would land on a
    # cancelled order), a declined one has nothing to cancel; neither has anything to refund.
    "charging": (
        Words(
            "Your order is saved — payment in progress",
            "Payment in progress",
            "We are still confirming your card payment with the payment service. "
            "This page shows it paid once it is confirmed; your card is never "
            "charged twice for this order.",
        ),
        Pages(NOT_CANCELLED, NOTHING_TO_REFUND),
    ),
    "declined": (
        Words(
            "Your card was declined",
            "Card declined",
            "Nothing was charged, and this order will not be shipped. To buy it, "
            "place a new order with another card.",
        ),
        Pages(NOT_CANCELLED, NOTHING_TO_REFUND),
    ),
    "paid": (Words("Your order is paid", "Paid", PAID), Pages(CANCEL, REFUND)),
    "paid-refund-failed": (Words("Your order is paid", "Paid", PAID), Pages(CANCEL, REFUND)),
    "part-refund-requested": (
        Words(
            "Your order is being refunded in part",
            "Being refunded in part",
            f"{PAID} €10.00 of it is being refunded to you.",
        ),
        Pages(CANCEL, REFUND),
    ),
    "all-refund-requested": (
        Words(
            "Your order is being refunded",
            "Being refunded",
            f"{PAID} All of it is being refunded to you.",
        ),
        Pages(CANCEL, NOTHING_MORE),
    ),
    "part-refunded": (
        Words(
            "Your order is partly refunded",
            "Partly refunded",
            f"{PAID} €10.00 of it was refunded to you.",
        ),
        Pages(CANCEL, REFUND),
    ),
    "part-refunded-more-requested": (
        Words(
            "Your order is being refunded in part",
            "Being refunded in part",
            f"{PAID} €10.00 of it was refunded to you, and €5.00 more is being refunded.",
        ),
        Pages(CANCEL, REFUND),
    ),
    "refunded": (
        Words("Your order is refunded", "Refunded", f"{PAID} All of it was refunded to you."),
        Pages(NOT_CANCELLED, (409, "This order is refunded in full")),
    ),
    "shipped": (Words("Your order is on its way", "Shipped", PAID), Pages(NOT_CANCELLED, REFUND)),
    "shipped-refund-in-review": (
        Words(
            "Your order is on its way",
            "Shipped",
            f"{PAID} A refund of €10.00 is waiting for our team’s review, as your order "
            "has shipped.",
        ),
        Pages(NOT_CANCELLED, REFUND),
    ),
    "shipped-part-refunded": (
        Words("Your order is on its way", "Shipped", f"{PAID} €10.00 of it was refunded to you."),
        Pages(NOT_CANCELLED, REFUND),
    ),
    "cancelled-unpaid": (
        Words("Your order is cancelled", "Cancelled", "Nothing was charged."),
        Pages((303, ""), NOTHING_TO_REFUND),
    ),
    "cancelled-paid": (
        Words("Your order is cancelled", "Cancelled", PAID),
        Pages((303, ""), REFUND),
    ),
    "cancelled-refund-requested": (
        Words(
            "Your order is cancelled", "Cancelled", f"{PAID} All of it is being refunded to you."
        ),
        Pages((303, ""), NOTHING_MORE),
    ),
}

#: What the order page says besides, by state: how to pay, what cancelling did.
BESIDES = {
    "awaiting-payment": "How to pay",
    "cancelled-unpaid": "Nothing will be shipped.",
    "cancelled-paid": "Press “Request a refund” below to get it back.",
    "cancelled-refund-requested": "Nothing will be shipped.",
}

PAGES = ("order", "cancel", "refund")


def text_of(html: str, pattern: str) -> str | None:
    """The text of the first element ``pattern`` matches (its tags dropped), or None."""
    match = re.search(pattern + r"(.*?)</", html, re.DOTALL)
    return None if match is None else " ".join(unescape(match.group(1)).split())


def h1(html: str) -> str | None:
    return text_of(html, r"<h1[^>]*>")


def money(html: str) -> str | None:
    return text_of(html, r'<p id="money-state">')


def test_the_table_has_every_state():
    assert sorted(TABLE) == sorted(STATES)


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("state", STATES)
def test_every_page_about_an_order_says_where_the_money_is_in_the_same_words(
    client, servers, state, page
):
    words, pages = TABLE[state]
    key = put_order_in(servers.engine, STATES[state])
    path = f"/orders/{key}" + ("" if page == "order" else f"/{page}")
    response = client.get(path)
    html = response.text
    if page == "order":
        assert response.status_code == 200
        assert h1(html) == words.headline
        assert text_of(html, r'<span class="status[^"]*">') == words.status
        assert "your order is placed" not in html or state == "awaiting-payment"
        if state in BESIDES:
            assert BESIDES[state] in html
        assert ("payment-reference" in html) == (state == "awaiting-payment")
    else:
        status, headline = getattr(pages, page)
        assert response.status_code == status
        # a cancelled order's cancel page: the order, "already cancelled"
        if status == 303:
            assert response.headers["Location"] == f"/orders/{key}"
            return
        assert h1(html) == headline
    if (page, pages.cancel) == ("cancel", NOT_CANCELLED):
        # the refusal says why, the order page where the money is
        assert money(html) is None
    else:
        assert money(html) == words.money


REFUND_NOTICE = "Your refund request was received."


@pytest.mark.parametrize(
    "state",
    [
        "part-refund-requested",
        "all-refund-requested",
        "part-refunded",
        "refunded",
        "shipped-refund-in-review",
    ],
)
def test_the_refund_notice_says_what_was_done_and_the_headline_where_it_stands(
    client, servers, state
):
    """The notice a refund request leaves, shown whether the worker applied it before the
    page was shown or not: it never says "shortly" under "refunded", nor "placed"."""
    words, _ = TABLE[state]
    key = put_order_in(servers.engine, STATES[state])
    number = text_of(client.get(f"/orders/{key}").text, r'data-order-number="[^"]*">')
    # what the refund submit flashes
    with client.session_transaction() as session:
        session["_flashes"] = [(f"order:{number}", "refund_requested")]
    html = client.get(f"/orders/{key}").text
    assert (
        text_of(
            html,
            r'<div class="notice notice-info" role="status" '
            r'id="refund-requested">',
        )
        == REFUND_NOTICE
    )
    assert html.index('id="refund-requested"') < html.index("<h1")
    assert h1(html) == words.headline and money(html) == words.money
    for stale in ("shortly", "set aside", "your order is placed"):
        assert stale not in html


def test_an_order_awaiting_payment_says_how_to_pay_with_its_payment_reference(client, servers):
    key = put_order_in(servers.engine, STATES["awaiting-payment"])
    html = client.get(f"/orders/{key}").text
    reference = text_of(html, r'<p class="payment-reference" id="payment-reference">')
    assert reference and re.fullmatch(r"pay_[0-9a-f]{32}", reference)
    assert "Pay €36.00 through our payment provider" in " ".join(html.split())
    # the key only in links, never shown
    assert key not in html.replace(f"/orders/{key}", "")
