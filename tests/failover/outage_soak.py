"""Customers while Redis comes and goes (:mod:`tests.failover.soak`'s, remembering which
token each form was drawn with, some keeping a form open across an outage's start or
end), storms of one token across an outage, and the verdict.

A form drawn while Redis is away carries a signed token (``s1.…``); one drawn while it
answers, a Redis token. Each form is named (``Soak 3-17``, ``Storm 2-signed``), so every
order is traced to its form afterwards.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from tests.failover.soak import Answer, Form, Load
from tests.support.live import open_form, request

SIGNED = "s1."


@dataclass
class Render:
    """One form drawn: when it was asked for and drawn, and with which kind of token."""

    sent: float
    answered: float
    signed: bool


@dataclass
class OutageLoad(Load):
    """:class:`Load` that records each form's token and, for one form in five, keeps it
    open for up to ``open_for`` seconds before sending it (an outage may begin or end
    meanwhile)."""

    open_for: float = 3.0
    renders: dict[str, Render] = field(default_factory=dict)

    def _open(self, port: int, name: str):
        sent = time.monotonic()
        opened = super()._open(port, name)
        if opened is not None:
            signed = opened[2]["form_token"].startswith(SIGNED)
            with self._lock:
                self.renders[name] = Render(sent, time.monotonic(), signed)
            rng = random.Random(name)
            if rng.random() < 0.2:
                time.sleep(rng.uniform(0, self.open_for))
        return opened


class Storm:
    """``threads`` connections sending one form's token again and again, to both
    instances, until stopped: a storm of retries in flight when Redis goes or comes."""

    def __init__(self, ports: list[int], name: str, threads: int = 4) -> None:
        cookie, fields = open_form(ports[0])
        self.signed = fields["form_token"].startswith(SIGNED)
        self.form = Form(name)
        self.ports, self.cookie, self.fields = ports, cookie, {**fields, "name": name}
        self._stop = threading.Event()
        self._answered = threading.Condition()
        self._threads = [
            threading.Thread(target=self._send, args=(n,), daemon=True) for n in range(threads)
        ]

    def start(self) -> Storm:
        for thread in self._threads:
            thread.start()
        return self

    def _send(self, n: int) -> None:
        while not self._stop.is_set():
            port = self.ports[n % len(self.ports)]
            sent = time.monotonic()
            try:
                response = request(
                    port, "POST", "/orders", cookie=self.cookie, form=self.fields, timeout=30
                )
                answer = Answer(
                    sent, time.monotonic(), response.status, response.headers.get("location", "")
                )
            except OSError:
                answer = Answer(sent, time.monotonic(), 0)
            with self._answered:
                self.form.answers.append(answer)
                self._answered.notify_all()

    def wait_for_answers(self, after: float, count: int, timeout: float = 30) -> None:
        """Until ``count`` answers to submits sent after ``after`` came back."""
        with self._answered:
            assert self._answered.wait_for(
                lambda: sum(a.sent > after for a in self.form.answers) >= count, timeout
            ), f"the storm {self.form.name} was not answered"

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)


@dataclass
class Outage:
    """When Redis went (after a storm's first answers) and when it answered again."""

    down: float
    up: float = 0.0


@dataclass
class OutageVerdict:
    renders: int
    signed_renders: int
    # a form page that was not a 200
    render_failures: int
    submits: int
    # submits answered 5xx, or not at all
    five_xx: int
    by_status: Counter
    orders: int
    # forms with more than one order
    duplicates: list[str]
    # sent to an order that does not exist
    lost: list[str]
    # forms submitted that have no order
    unplaced: list[str]
    # forms whose answers lead to different orders
    split: list[str]
    # forms drawn during an outage, first sent after it
    signed_sent_after: int
    # forms drawn after Redis answered again, yet signed
    signed_after_return: list[str]
    # name -> (answers, orders, places landed on)
    storms: dict[str, tuple[int, int, int]]
    outages: int

    def summary(self) -> str:
        return (
            f"{self.outages} outages; {self.renders} renders ({self.signed_renders} "
            f"signed, {self.render_failures} not 200); {self.submits} submits "
            f"{dict(sorted(self.by_status.items()))}, 5xx {self.five_xx}; "
            f"{self.orders} orders; duplicates {len(self.duplicates)}, lost "
            f"{len(self.lost)}, unplaced {len(self.unplaced)}, split {len(self.split)}; "
            f"drawn during an outage and first sent after it {self.signed_sent_after}; "
            f"signed after Redis answered again {len(self.signed_after_return)}; storms "
            + ", ".join(
                f"{name}: {answers} submits -> {orders} order"
                for name, (answers, orders, _) in self.storms.items()
            )
        )


def judge_outages(
    load: OutageLoad, storms: list[Storm], outages: list[Outage], orders: dict[str, str]
) -> OutageVerdict:
    """``orders`` maps public id -> customer name (every order in the database)."""
    per_name = Counter(orders.values())
    forms = [*load.forms, *(storm.form for storm in storms)]
    answers = [answer for form in forms for answer in form.answers]
    ups = [outage.up for outage in outages]

    def signed_sent_after(form: Form) -> bool:
        render = load.renders[form.name]
        first = min(answer.sent for answer in form.answers)
        return render.signed and any(render.sent < up < first for up in ups)

    # Redis answered from each window's start to its end: a form asked for and drawn
    # within one was drawn with Redis answering, and must have a Redis token.
    starts = [float("-inf"), *(outage.up for outage in outages)]
    ends = [*(outage.down for outage in outages), float("inf")]

    def drawn_while_up(render: Render) -> bool:
        return any(
            start < render.sent and render.answered < end
            for start, end in zip(starts, ends, strict=True)
        )

    return OutageVerdict(
        renders=len(load.renders) + load.unavailable_pages,
        signed_renders=sum(render.signed for render in load.renders.values()),
        render_failures=load.unavailable_pages,
        submits=len(answers),
        five_xx=sum(answer.status >= 500 or answer.status == 0 for answer in answers),
        by_status=Counter(answer.status for answer in answers),
        orders=len(orders),
        duplicates=[form.name for form in forms if per_name[form.name] > 1],
        lost=[a.public_id for a in answers if a.status == 303 and a.public_id not in orders],
        unplaced=[form.name for form in forms if form.answers and not per_name[form.name]],
        split=[form.name for form in forms if len(form.acknowledged) > 1],
        signed_sent_after=sum(signed_sent_after(form) for form in load.forms if form.answers),
        signed_after_return=[
            name
            for name, render in load.renders.items()
            if render.signed and drawn_while_up(render)
        ],
        storms={
            storm.form.name: (
                len(storm.form.answers),
                per_name[storm.form.name],
                len(storm.form.acknowledged),
            )
            for storm in storms
        },
        outages=len(outages),
    )
