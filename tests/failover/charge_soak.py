"""Customers paying by card while workers die, the provider fails and Redis restarts: each
opens the order form, submits it 1-3 times (sometimes at once, to both app instances), and
does what the page says (press again with the token it gives back; after a decline, once
more with another card), remembering every answer. Afterwards :func:`reconcile` holds the
provider's charges against the orders."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.cookies import SimpleCookie

from tests.conftest import VALID, hidden
from tests.support.live import request
from tests.support.payments import DECLINED, PAYS, RETRY
from webapp.orders.messages import CARD_DECLINED

#: Cards the customers use, by weight: most pay, some are declined, some need a retry.
CARDS = [PAYS] * 7 + [DECLINED, RETRY, RETRY]


@dataclass
class Customer:
    name: str
    # HTTP status, 0: no answer
    answers: list[int] = field(default_factory=list)
    # order keys it was sent to (303)
    landed: set[str] = field(default_factory=set)
    # answers no customer should get
    bad: list[str] = field(default_factory=list)


@dataclass
class CardLoad:
    ports: list[int]
    clients: int = 8
    customers: list[Customer] = field(default_factory=list)
    form_pages_unavailable: int = 0
    #: Set when the load ends: the threads beside it (killers, fault switches) stop too.
    stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self, seconds: float, beside: list[threading.Thread]) -> None:
        threads = [
            threading.Thread(target=self._client, args=(n,), daemon=True)
            for n in range(self.clients)
        ]
        for thread in threads + beside:
            thread.start()
        time.sleep(seconds)
        self.stop.set()
        for thread in threads + beside:
            thread.join(90)
        assert not any(thread.is_alive() for thread in threads + beside), "a client hung"

    def _client(self, n: int) -> None:
        rng = random.Random(n)
        for cycle in range(10**9):
            if self.stop.is_set():
                return
            customer = Customer(f"Card {n}-{cycle}")
            opened = self._open(self.ports[(n + cycle) % 2], customer.name)
            if opened is None:
                time.sleep(0.2)
                continue
            cookie, fields = opened
            fields["card"] = rng.choice(CARDS)
            copies = rng.choice([1, 1, 2, 3])
            targets = [self.ports[(n + cycle + k) % 2] for k in range(copies)]
            # a double click, to both instances
            if copies > 1 and rng.random() < 0.5:
                threads = [
                    threading.Thread(target=self._submit, args=(customer, p, cookie, dict(fields)))
                    for p in targets
                ]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join(90)
                nexts = []
            else:
                nexts = [self._submit(customer, p, cookie, dict(fields)) for p in targets]
            # else the customer walks away: the sweeper finishes it
            if rng.random() < 0.8:
                self._follow(customer, targets[0], cookie, fields, [x for x in nexts if x])
            with self._lock:
                self.customers.append(customer)

    def _follow(
        self,
        customer: Customer,
        port: int,
        cookie: str,
        fields: dict[str, str],
        nexts: list[dict[str, str]],
    ) -> None:
        """Not landed: press again as the page says, a few times, a moment apart."""
        for _ in range(4):
            if customer.landed or self.stop.is_set():
                # or the customer walks away: the sweeper finishes the order
                return
            time.sleep(0.3)
            # no page at all: the same form again
            nxt = nexts[-1] if nexts else fields
            follow = self._submit(customer, port, cookie, dict(nxt))
            nexts.append(follow or nxt)

    def _open(self, port: int, name: str) -> tuple[str, dict[str, str]] | None:
        try:
            page = request(port, "GET", "/orders/new", timeout=30)
        except OSError:
            page = None
        if page is None or page.status != 200:
            with self._lock:
                self.form_pages_unavailable += 1
            return None
        cookie = SimpleCookie(page.headers["set-cookie"])
        return f"session={cookie['session'].value}", {
            **VALID,
            "name": name,
            "csrf_token": hidden(page.body, "csrf_token"),
            "form_token": hidden(page.body, "form_token"),
        }

    def _submit(
        self, customer: Customer, port: int, cookie: str, fields: dict[str, str]
    ) -> dict[str, str] | None:
        """One POST; what to send next if the page gives the form back (else None)."""
        try:
            answer = request(port, "POST", "/orders", cookie=cookie, form=fields, timeout=30)
        except OSError:
            with self._lock:
                customer.answers.append(0)
            return None
        with self._lock:
            customer.answers.append(answer.status)
            if answer.status == 303:
                customer.landed.add(answer.headers["location"].rsplit("/", 1)[-1])
                return None
            kept = f'value="{customer.name}"' in answer.body
            if answer.status not in (409, 422, 503) or not kept:
                customer.bad.append(f"{answer.status}: {answer.body[:200]!r}")
                return None
        nxt = {**fields, "form_token": hidden(answer.body, "form_token")}
        # the card is kept as its token
        if 'name="payment_method"' in answer.body:
            nxt.update(card="", payment_method=hidden(answer.body, "payment_method"))
        if CARD_DECLINED in answer.body:
            # another card, on the fresh token
            nxt.update(card=PAYS, payment_method="")
        return nxt


@dataclass
class Reconciled:
    orders: int
    paid: int
    declined: int
    charges: int
    # payment references with more than one charge
    charged_twice: list[str]
    # charge ids no paid order records
    charges_without_order: list[str]
    # order numbers paid with no charge at the provider
    paid_without_charge: list[str]
    # orders still charging or marked after the sweepers
    stuck: list[str]
    wrong_amount: list[str]
    # a customer was sent to an order that is not there
    lost: list[str]
    # a customer with two paid orders
    double_paid_customers: list[str]
    bad_answers: list[str]
    answers: Counter

    def ok(self) -> bool:
        return not (
            self.charged_twice
            or self.charges_without_order
            or self.stuck
            or self.paid_without_charge
            or self.wrong_amount
            or self.lost
            or self.double_paid_customers
            or self.bad_answers
        )


def reconcile(load: CardLoad, orders: list[dict], charges: list[dict]) -> Reconciled:
    """``orders``: every order's row; ``charges``: the provider's successful charges."""
    by_reference = Counter(c["reference"] for c in charges)
    paid = [o for o in orders if o["status"] == "paid"]
    recorded = {o["charge_id"] for o in paid}
    paid_per_name = Counter(o["customer_name"] for o in paid)
    keys = {o["public_id"] for o in orders}
    return Reconciled(
        orders=len(orders),
        paid=len(paid),
        declined=sum(o["status"] == "declined" for o in orders),
        charges=len(charges),
        charged_twice=[r for r, n in by_reference.items() if n > 1],
        charges_without_order=[c["id"] for c in charges if c["id"] not in recorded],
        paid_without_charge=[
            o["order_number"] for o in paid if o["charge_id"] not in {c["id"] for c in charges}
        ],
        stuck=[
            o["order_number"]
            for o in orders
            if o["status"] == "charging" or o["submission_step"] == "charge"
        ],
        wrong_amount=[o["order_number"] for o in paid if o["paid_cents"] != o["total"]],
        lost=[k for c in load.customers for k in c.landed if k not in keys],
        double_paid_customers=[name for name, n in paid_per_name.items() if n > 1],
        bad_answers=[b for c in load.customers for b in c.bad],
        answers=Counter(a for c in load.customers for a in c.answers),
    )
