"""Customers under load while a server fails: open a form, submit it 1-3 times
(sometimes at once, to both app instances), submit once more when the page
says the order was not placed, and remember every answer. Beside them, API
clients and the payment provider when asked (:mod:`tests.failover.api_soak`).

Each form carries its own customer name (``Soak 3-17``), so afterwards every
order can be traced to the form it came from, and every page that did not place
an order can be checked for the input it must give back.
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.cookies import SimpleCookie

from tests.conftest import VALID, flashed, hidden
from tests.failover.api_soak import ApiTraffic
from tests.support.live import Response, request
from webapp.orders.messages import STILL_RUNNING

PUBLIC_ID_LENGTH = 22
#: Seconds from a crash within which new orders must be placed again (the soaks assert it).
BACK_WITHIN = 15


@dataclass
class Answer:
    """One submit: when it was sent and answered, and what came back."""

    sent: float
    answered: float
    status: int
    location: str = ""
    kept_input: bool = False
    still_running: bool = False
    # "we could not confirm your order": the same token kept
    unsure: bool = False
    # the form token on a page that gave the input back
    token_offered: str = ""
    # told "already placed" (a flashed notice): landed, did not place
    repeat: bool = False
    # the page's heading and first paragraph, for a failure's message
    said: str = ""
    # the app's X-Request-ID: its log lines for this request
    request_id: str = ""

    @property
    def public_id(self) -> str:
        return self.location.split("?")[0].rsplit("/", 1)[-1]

    @property
    def created(self) -> bool:
        return self.status == 303 and not self.repeat


@dataclass
class Form:
    """One form a customer opened, and every answer to submitting it."""

    name: str
    answers: list[Answer] = field(default_factory=list)

    @property
    def acknowledged(self) -> set[str]:
        """The orders this customer was sent to (a 303 to /orders/<id>)."""
        return {a.public_id for a in self.answers if a.status == 303}


@dataclass
class Load:
    """Clients that open and submit forms against ``ports`` until stopped, and
    ``api``'s clients beside them."""

    ports: list[int]
    clients: int = 8
    api: ApiTraffic | None = None
    forms: list[Form] = field(default_factory=list)
    # GET /orders/new answered 503 (during the switch)
    unavailable_pages: int = 0
    started: float = 0.0
    # when the latest submit that placed an order was sent
    _last_placed_sent: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def run(
        self, seconds: float, fault: Callable[[], list[float] | None], fault_at: float
    ) -> list[float]:
        """Load for ``seconds``; ``fault()`` runs ``fault_at`` seconds in. Returns
        the monotonic times of the crashes ``fault()`` reports (by default, when it
        began)."""
        self.started = time.monotonic()
        threads = [
            threading.Thread(target=self._client, args=(n,), daemon=True)
            for n in range(self.clients)
        ]
        if self.api is not None:
            threads += [
                threading.Thread(target=self.api.client, args=(n, self._stop), daemon=True)
                for n in range(self.api.clients)
            ]
        for thread in threads:
            thread.start()
        time.sleep(fault_at)
        fault_began = time.monotonic()
        crashes = fault() or [fault_began]
        time.sleep(max(0.0, self.started + seconds - time.monotonic()))
        # The load ends on an event, not a window: not before a form sent after the last
        # crash has placed its order (judge() measures that), or BACK_WITHIN s have passed.
        deadline = crashes[-1] + BACK_WITHIN
        while self._last_placed_sent <= crashes[-1] and time.monotonic() < deadline:
            time.sleep(0.05)
        self._stop.set()
        for thread in threads:
            thread.join(60)
        assert not any(thread.is_alive() for thread in threads), "a client hung"
        return crashes

    def _client(self, n: int) -> None:
        rng = random.Random(n)
        for cycle in range(10**9):
            if self._stop.is_set():
                return
            port = self.ports[(n + cycle) % len(self.ports)]
            opened = self._open(port, f"Soak {n}-{cycle}")
            if opened is None:
                time.sleep(0.1)
                continue
            form, cookie, fields = opened
            copies = rng.choice([1, 1, 2, 3])
            targets = [self.ports[(n + cycle + k) % len(self.ports)] for k in range(copies)]
            # a double click: sent at once
            if copies > 1 and rng.random() < 0.5:
                threads = [
                    threading.Thread(target=self._submit, args=(form, p, cookie, fields))
                    for p in targets
                ]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join(60)
            # a retry, a second tab
            else:
                for p in targets:
                    self._submit(form, p, cookie, fields)
            self._do_what_the_page_says(form, port, cookie, fields)
            with self._lock:
                self.forms.append(form)

    def _open(self, port: int, name: str):
        try:
            page = request(port, "GET", "/orders/new", timeout=30)
        except OSError:
            page = None
        if page is None or page.status != 200:
            with self._lock:
                self.unavailable_pages += 1
            return None
        cookie = SimpleCookie(page.headers["set-cookie"])
        fields = {
            **VALID,
            "name": name,
            "csrf_token": hidden(page.body, "csrf_token"),
            "form_token": hidden(page.body, "form_token"),
        }
        return Form(name), f"session={cookie['session'].value}", fields

    def _do_what_the_page_says(
        self, form: Form, port: int, cookie: str, fields: dict[str, str]
    ) -> None:
        """Not placed, input given back: the customer presses the button again, once,
        with the token that page carries. Had the first attempt been placed after
        all, this would be a second order: judge() would count it."""
        if form.acknowledged or not form.answers:
            return
        offered = [a.token_offered for a in form.answers if a.token_offered]
        if offered and not self._stop.is_set():
            time.sleep(0.2)
            self._submit(form, port, cookie, {**fields, "form_token": offered[-1]})

    def _submit(self, form: Form, port: int, cookie: str, fields: dict[str, str]) -> None:
        sent = time.monotonic()
        try:
            response: Response | None = request(
                port, "POST", "/orders", cookie=cookie, form=fields, timeout=30
            )
        except OSError:
            response = None
        answer = Answer(sent, time.monotonic(), response.status if response else 0)
        if response is not None:
            answer.location = response.headers.get("location", "")
            answer.repeat = "already_placed" in flashed(response)
            answer.kept_input = (
                f'value="{form.name}"' in response.body
                and 'value="ada@example.com"' in response.body
            )
            answer.still_running = STILL_RUNNING in response.body
            answer.unsure = "We could not confirm your order" in response.body
            if answer.kept_input and response.status in (409, 503):
                answer.token_offered = hidden(response.body, "form_token")
            answer.said = what_it_said(response.body)
            answer.request_id = response.headers.get("x-request-id", "")
        with self._lock:
            form.answers.append(answer)
            if answer.created:
                self._last_placed_sent = max(self._last_placed_sent, sent)


def what_it_said(body: str) -> str:
    """A page's heading and first paragraph, tags dropped (``""`` when it has neither)."""
    parts = [re.search(rf"<{tag}[^>]*>(.*?)</{tag}>", body, re.S) for tag in ("h1", "p")]
    return " / ".join(" ".join(re.sub(r"<[^>]+>", " ", m.group(1)).split()) for m in parts if m)[
        :300
    ]


def logged_about(request_ids: list[str], *outputs: str) -> None:
    """Print the app's log lines about these requests (a failure's report shows them)."""
    lines = [
        line
        for output in outputs
        for line in output.splitlines()
        if any(rid and rid in line for rid in request_ids)
    ]
    print("what the app logged about the bad answers:", *lines, sep="\n  ")


@dataclass
class Verdict:
    """What the customers were told, held against the orders that exist."""

    forms: int
    submits: int
    placed: int
    # acknowledged (303) but not in the database
    lost: list[str]
    # forms with more than one order
    duplicates: list[str]
    # forms whose 303s lead to different orders
    split: list[str]
    # 409/503 pages giving the typed values back
    not_placed_with_input: int
    # 503 "still placing" without the input: resubmit lands on it
    still_running: int
    # any other answer (a 500, no input, no answer)
    bad: list[tuple[str, int, str]]
    # theirs, to find what the app logged about them
    bad_request_ids: list[str]
    # no 303, yet an order exists (the commit's answer was lost)
    placed_but_told_not: int
    # answered "could not confirm" (connection lost mid-transaction)
    unsure: int
    by_status: Counter
    unavailable_pages: int
    failovers: int
    # seconds from a crash to the first new order after it (worst)
    back_after: float | None

    def summary(self) -> str:
        back = "never" if self.back_after is None else f"{self.back_after:.1f} s"
        return (
            f"{self.failovers} failover(s); {self.forms} forms, {self.submits} submits, "
            f"{self.placed} orders; lost {len(self.lost)}, "
            f"duplicates {len(self.duplicates)}, "
            f"answers {dict(sorted(self.by_status.items()))}, "
            f"not placed with input {self.not_placed_with_input}, "
            f"still running {self.still_running}, other {len(self.bad)}, "
            f"could not confirm {self.unsure}, "
            f"placed but told not {self.placed_but_told_not}, "
            f"form pages unavailable {self.unavailable_pages}, "
            f"new orders again at worst {back} after a crash"
        )


def judge(load: Load, orders: dict[str, str], crashes: list[float]) -> Verdict:
    """``orders`` maps public id → customer name, read from the database that
    survived the fault."""
    per_name = Counter(orders.values())
    lost, duplicates, split, bad = [], [], [], []
    bad_ids: list[str] = []
    with_input = running = told_not = 0
    statuses: Counter = Counter()
    for form in load.forms:
        acknowledged = form.acknowledged
        lost += [public_id for public_id in acknowledged if public_id not in orders]
        if per_name[form.name] > 1:
            duplicates.append(form.name)
        if len(acknowledged) > 1:
            split.append(form.name)
        if not acknowledged and per_name[form.name]:
            told_not += 1
        for answer in form.answers:
            statuses[answer.status] += 1
            if answer.status == 303:
                if len(answer.public_id) != PUBLIC_ID_LENGTH:
                    bad.append((form.name, answer.status, answer.location))
            elif answer.status in (409, 503) and answer.kept_input:
                with_input += 1
            elif answer.status == 503 and answer.still_running:
                running += 1
            else:
                bad.append((form.name, answer.status, answer.said))
                bad_ids.append(answer.request_id)
    created = [a for form in load.forms for a in form.answers if a.created]
    back: list[float | None] = []
    for crash in crashes:
        after = [a.answered for a in created if a.sent > crash]
        back.append(min(after) - crash if after else None)
    return Verdict(
        forms=len(load.forms),
        submits=sum(statuses.values()),
        placed=len(orders),
        lost=lost,
        duplicates=duplicates,
        split=split,
        not_placed_with_input=with_input,
        still_running=running,
        bad=bad,
        bad_request_ids=bad_ids,
        placed_but_told_not=told_not,
        by_status=statuses,
        unsure=sum(a.unsure for form in load.forms for a in form.answers),
        unavailable_pages=load.unavailable_pages,
        failovers=len(crashes),
        back_after=None if None in back else max(b for b in back if b is not None),
    )
