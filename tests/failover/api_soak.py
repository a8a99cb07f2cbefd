"""API clients and the payment provider beside the form customers of a failover soak.

An API client places orders, each with an Idempotency-Key of its own, over keep-alive
connections to both app instances. A 503 "unavailable" or a 409 "request-in-progress"
is retried with the same key (sooner than Retry-After asks, to press on the switch),
each retry to the other instance; a third of the placed orders are sent once more, as
by a client whose first answer was lost. The provider then pays each placed order
with a signed event of its own id, retried the same way and a third of the time
delivered twice. Afterwards :func:`judge_api` holds every answer against the rows.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.client import HTTPException
from itertools import count

from sqlalchemy import text

from tests.support.live import Connection, Response, payment
from webapp.db import make_engine

__all__ = ["ApiTraffic", "ApiVerdict", "judge_api"]

#: The answers a retry with the same key or event id may change: status → problem type.
RETRIED = {409: "request-in-progress", 503: "unavailable"}
# seconds of retries for one request
GIVE_UP_AFTER = 20.0
RETRY_PAUSE = 0.2


@dataclass
class Call:
    """One request as its client saw it: every attempt with the same key (or event id),
    and the 2xx bodies (more than one when it was sent again)."""

    name: str
    # for an event: the order it pays
    order_id: str = ""
    # (status, problem type)
    attempts: list[tuple[int, str]] = field(default_factory=list)
    results: list[dict] = field(default_factory=list)

    @property
    def ended(self) -> bool:
        return bool(self.results)


@dataclass
class ApiTraffic:
    """``clients`` API clients against ``ports``, each followed by the provider paying
    the orders it placed."""

    ports: list[int]
    api_key: str
    clients: int = 2
    orders: list[Call] = field(default_factory=list)
    events: list[Call] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def client(self, n: int, stop: threading.Event) -> None:
        """Order, pay, repeat until ``stop``; the order in hand is finished first."""
        rng = random.Random(1000 + n)
        connections = [Connection(port) for port in self.ports]

        def place(call: Call) -> Callable[[Connection], Response]:
            return lambda connection: connection.place_order(self.api_key, call.name)

        def pay(call: Call, order: dict) -> Callable[[Connection], Response]:
            event = payment(order, call.name)
            return lambda connection: connection.deliver(event)

        try:
            for cycle in count():
                if stop.is_set():
                    return
                order = Call(f"api-{n}-{cycle}")
                for _ in range(2 if rng.random() < 1 / 3 else 1):
                    self._until_2xx(order, place(order), connections, cycle)
                with self._lock:
                    self.orders.append(order)
                if not order.ended:
                    continue
                event = Call(f"evt-{n}-{cycle}", order_id=order.results[0]["id"])
                for _ in range(2 if rng.random() < 1 / 3 else 1):
                    self._until_2xx(event, pay(event, order.results[0]), connections, cycle + 1)
                with self._lock:
                    self.events.append(event)
        finally:
            for connection in connections:
                connection.close()

    @staticmethod
    def _until_2xx(
        call: Call,
        send: Callable[[Connection], Response],
        connections: list[Connection],
        first: int,
    ) -> None:
        """Send until a 2xx, retrying the answers in RETRIED and no answer at all."""
        deadline = time.monotonic() + GIVE_UP_AFTER
        for attempt in count(first):
            try:
                response = send(connections[attempt % len(connections)])
            except (OSError, HTTPException):
                call.attempts.append((0, "no answer"))
            else:
                body = json.loads(response.body) if response.body else {}
                if response.status < 300:
                    call.attempts.append((response.status, ""))
                    call.results.append(body)
                    return
                problem = str(body.get("type", "")).rsplit("/", 1)[-1]
                call.attempts.append((response.status, problem))
                if RETRIED.get(response.status) != problem:
                    # an answer no retry changes
                    return
            if time.monotonic() > deadline:
                return
            time.sleep(RETRY_PAUSE)


@dataclass
class ApiVerdict:
    """The API orders and payment events sent, held against the rows that exist."""

    orders: int
    placed: int
    # Idempotency-Keys with more than one order
    doubled: list[str]
    # keys whose 201s name different orders
    split: list[str]
    # orders answered 201 but not in the database
    lost: list[str]
    events: int
    recorded: int
    # event ids with more than one payment_events row
    events_doubled: list[str]
    # events answered 200 but not in payment_events
    events_lost: list[str]
    # recorded, yet paid_cents is not the one event's amount
    not_paid_once: list[str]
    # 422 "no order has this order_id": the order was lost
    for_lost_orders: int
    # requests still without a 2xx when their client gave up
    unfinished: list[str]
    # any other answer: a 500, a 4xx, no answer
    bad: list[tuple[str, int, str]]
    by_status: Counter

    def summary(self) -> str:
        return (
            f"API: {self.orders} orders sent, {self.placed} placed; doubled "
            f"{len(self.doubled)}, split {len(self.split)}, lost {len(self.lost)}; "
            f"{self.events} payment events sent, {self.recorded} recorded; doubled "
            f"{len(self.events_doubled)}, lost "
            f"{len(self.events_lost)}, not paid once {len(self.not_paid_once)}, "
            f"for a lost order {self.for_lost_orders}; answers "
            f"{dict(sorted(self.by_status.items()))}, unfinished {len(self.unfinished)}, "
            f"other {len(self.bad)}"
        )


def judge_api(traffic: ApiTraffic, database_url: str) -> ApiVerdict:
    """``database_url``: the database that survived the fault."""
    engine = make_engine(database_url)
    try:
        with engine.connect() as conn:
            orders = conn.execute(
                text(
                    "SELECT idempotency_key, public_id, paid_cents "
                    "FROM orders WHERE api_client_id IS NOT NULL"
                )
            ).all()
            recorded = conn.execute(
                text(
                    "SELECT e.event_id, o.public_id FROM payment_events e "
                    "JOIN orders o ON o.id = e.order_id"
                )
            ).all()
    finally:
        engine.dispose()
    paid = {public_id: cents for _, public_id, cents in orders}
    events = dict(recorded)
    events_per_order = Counter(events.values())
    statuses: Counter = Counter()
    bad, unfinished, for_lost_orders = [], [], 0
    for call in traffic.orders + traffic.events:
        order_lost = bool(call.order_id) and call.order_id not in paid
        for status, problem in call.attempts:
            statuses[status] += 1
            if status < 300 or RETRIED.get(status) == problem:
                continue
            if order_lost and (status, problem) == (422, "validation-error"):
                for_lost_orders += 1
            else:
                bad.append((call.name, status, problem))
        if not call.ended and not order_lost:
            unfinished.append(call.name)
    totals = {
        call.results[0]["id"]: call.results[0]["total_cents"]
        for call in traffic.orders
        if call.ended
    }
    return ApiVerdict(
        orders=len(traffic.orders),
        placed=len(orders),
        doubled=[key for key, n in Counter(key for key, _, _ in orders).items() if n > 1],
        split=[
            call.name
            for call in traffic.orders
            if len({result["id"] for result in call.results}) > 1
        ],
        lost=[public_id for public_id in totals if public_id not in paid],
        events=len(traffic.events),
        recorded=len(recorded),
        events_doubled=[name for name, n in Counter(name for name, _ in recorded).items() if n > 1],
        events_lost=[
            call.name for call in traffic.events if call.ended and call.name not in events
        ],
        not_paid_once=[
            call.order_id
            for call in traffic.events
            if call.name in events
            and (
                paid[call.order_id] != totals[call.order_id] or events_per_order[call.order_id] != 1
            )
        ],
        for_lost_orders=for_lost_orders,
        unfinished=unfinished,
        bad=bad,
        by_status=statuses,
    )
