"""Orders put straight into each state their money can be in, for the tests that check what
every page about an order says (tests/orders/test_order_state_words.py, its browser twin and the
screenshots). A €36.00 order (2 × €18.00); each state is the row as the state machine, the
webhook, the refund submit, the checkout's card charge and the worker leave it, with the
refund requests behind it."""

from __future__ import annotations

import secrets
from typing import NamedTuple

from sqlalchemy import Engine, text


class Refund(NamedTuple):
    cents: int
    # requested, review, applied, failed, rejected
    status: str
    reason: str | None = None


class MoneyState(NamedTuple):
    status: str
    paid: int = 0
    refunded: int = 0
    requests: tuple[Refund, ...] = ()
    decline_code: str | None = None

    @property
    def card(self) -> str | None:
        """The provider's token for the card the checkout charges (never its number): an
        order being charged has one (orders_charging_has_card), a declined order had one."""
        return "pm_card_test" if self.status in ("charging", "declined") else None

    @property
    def reserved(self) -> int:
        return sum(r.cents for r in self.requests if r.status in ("requested", "review"))


TOTAL = 3600

#: Every state an order's money can be in, by a name a test id can carry.
STATES: dict[str, MoneyState] = {
    "awaiting-payment": MoneyState("placed"),
    # The checkout's card charge: not yet confirmed by the provider, or refused by the bank.
    "charging": MoneyState("charging"),
    "declined": MoneyState("declined", decline_code="card_declined"),
    "paid": MoneyState("paid", TOTAL),
    "paid-refund-failed": MoneyState(
        "paid", TOTAL, 0, (Refund(1000, "failed", "the payment provider refused it"),)
    ),
    "part-refund-requested": MoneyState("paid", TOTAL, 0, (Refund(1000, "requested"),)),
    "all-refund-requested": MoneyState("paid", TOTAL, 0, (Refund(TOTAL, "requested"),)),
    "part-refunded": MoneyState("paid", TOTAL, 1000, (Refund(1000, "applied"),)),
    "part-refunded-more-requested": MoneyState(
        "paid", TOTAL, 1000, (Refund(1000, "applied"), Refund(500, "requested"))
    ),
    "refunded": MoneyState("refunded", TOTAL, TOTAL, (Refund(TOTAL, "applied"),)),
    "shipped": MoneyState("shipped", TOTAL),
    "shipped-refund-in-review": MoneyState("shipped", TOTAL, 0, (Refund(1000, "review"),)),
    "shipped-part-refunded": MoneyState("shipped", TOTAL, 1000, (Refund(1000, "applied"),)),
    "cancelled-unpaid": MoneyState("cancelled"),
    "cancelled-paid": MoneyState("cancelled", TOTAL),
    "cancelled-refund-requested": MoneyState("cancelled", TOTAL, 0, (Refund(TOTAL, "requested"),)),
}


def put_order_in(engine: Engine, state: MoneyState) -> str:
    """Insert a €36.00 order in ``state`` with its refund requests; returns its key."""
    key = secrets.token_urlsafe(16)
    with engine.begin() as conn:
        order_id = conn.scalar(
            text(
                "INSERT INTO orders (public_id, submission_digest, product_id, quantity, "
                "unit_price_cents, customer_name, email, shipping_address, status, paid_cents, "
                "refunded_cents, reserved_cents, payment_method, decline_code) VALUES (:key, "
                "md5(random()::text), 1, 2, 1800, 'Ada Lovelace', 'ada@example.com', "
                "'12 St James''s Square', :status, :paid, :refunded, :reserved, :card, "
                ":decline_code) RETURNING id"
            ),
            {
                "key": key,
                "status": state.status,
                "paid": state.paid,
                "refunded": state.refunded,
                "reserved": state.reserved,
                "card": state.card,
                "decline_code": state.decline_code,
            },
        )
        for refund in state.requests:
            conn.execute(
                text(
                    "INSERT INTO refund_requests (idempotency_key, order_id, amount_cents, status, "
                    "reason) VALUES (md5(random()::text), :order, :cents, :status, :reason)"
                ),
                {"order": order_id, **refund._asdict()},
            )
    return key
