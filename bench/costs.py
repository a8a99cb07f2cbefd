"""The token layer's costs one by one, as it was and as it is, in one process.

    scripts/bench --costs [--n 2000]

Each row times the earlier way and the current way of one step back to back
(CPU by time.process_time, so other load on the machine matters less), on real
PostgreSQL and Redis, and counts PostgreSQL round trips with libpq's protocol
trace (one ReadyForQuery per round trip). The earlier ways are rebuilt here
from what the code did before issue 14; nothing in the product keeps them.
Writes bench/results/costs.md.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import redis
from sqlalchemy import event, text

from submit_once import runner
from submit_once.signals import submit_decided, token_consumed
from submit_once.tokens import IssueLimit, TokenStore

from .load import FIELDS
from .run import RESULTS
from .servers import databases

_HIDDEN = re.compile(r'name="(csrf_token|form_token)"[^>]*value="([^"]*)"')
_OLD_LOCK = text("SELECT pg_try_advisory_xact_lock(:key)")


def old_lock(db, key: int) -> bool:
    """Before: a SQLAlchemy text() statement; psycopg sends its BEGIN first."""
    return bool(db.scalar(_OLD_LOCK, {"key": key}))


def old_issue(self: TokenStore, *, session_id: str, form: str,
              limits: Sequence[IssueLimit] = ()) -> str:
    """Before: the counts and the SET sent as a pipeline (INCR, EXPIRE, SET); a
    Cluster still gets this. The session's count was in a cookie of its own then,
    not measured here."""
    token = secrets.token_urlsafe(32)
    now = int(time.time())
    self._issue_in_pipeline(self.key(token, session_id=session_id, form=form),
                            self._counters([limit for limit in limits if limit.most > 0], now))
    return token


def cpu_us(fn: Callable[[], object], n: int) -> float:
    """CPU microseconds per call of ``fn`` (after a short warm-up)."""
    for _ in range(min(n // 10, 50)):
        fn()
    started = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - started) / n * 1e6


def ab(*ways: Callable[[int], float], n: int, blocks: int = 6) -> list[float]:
    """Median µs per call of each way, timed in blocks that take turns (ABC, CBA, …) so
    that a change in the machine's load hits all alike. Each callable runs ``count``
    calls and returns µs per call."""
    size = max(n // blocks, 1)
    times: list[list[float]] = [[] for _ in ways]
    for block in range(blocks):
        order = range(len(ways)) if block % 2 == 0 else reversed(range(len(ways)))
        for which in order:
            times[which].append(ways[which](size))
    return [statistics.median(t) for t in times]


def per_call(fn: Callable[[], object]) -> Callable[[int], float]:
    """``fn`` as an :func:`ab` block: ``count`` calls, µs per call."""
    def block(count: int) -> float:
        started = time.process_time()
        for _ in range(count):
            fn()
        return (time.process_time() - started) / count * 1e6
    return block


class RoundTrips:
    """Counts PostgreSQL round trips on every connection of ``engine`` (libpq trace)."""

    def __init__(self, engine, base: Path) -> None:
        self.path = base / "pq-trace.txt"
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        event.listen(engine, "connect", self._trace)
        engine.dispose()  # connections made from now on are traced

    def _trace(self, dbapi_connection, _record) -> None:
        dbapi_connection.pgconn.trace(self.fd)

    @contextlib.contextmanager
    def count(self, into: list[int]) -> Iterator[None]:
        os.ftruncate(self.fd, 0)
        os.lseek(self.fd, 0, os.SEEK_SET)
        yield
        into.append(self.path.read_text().count("\tReadyForQuery"))


@contextlib.contextmanager
def swapped(obj: object, name: str, value: object) -> Iterator[None]:
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=2000, help="calls per measurement")
    args = parser.parse_args(argv)
    n = args.n
    rows: list[tuple[str, str, str]] = []
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp, \
            databases(Path(tmp)) as (postgres, store):
        os.environ.update(APP_ENV="production", SECRET_KEY=secrets.token_hex(32),
                          DATABASE_URL=postgres.url("bench"), REDIS_URL=store.url,
                          # One client and one session, thousands of forms: limits that
                          # never refuse, so their counts are still taken on every render.
                          FORM_TOKENS_MAX_PER_SESSION="1000000",
                          FORM_TOKENS_MAX_PER_CLIENT_PER_MINUTE="1000000000")
        from .app import create_app
        app = create_app()
        sessions = app.extensions["db"]
        trips = RoundTrips(sessions.kw["bind"], Path(tmp))

        # 1. The advisory-lock statement: one attempt = session, lock, rollback.
        def attempt(lock) -> Callable[[], object]:
            def run() -> None:
                with sessions() as db:
                    lock(db, 42)
                    db.rollback()
            return run
        cpu_us(attempt(runner._begin_locked), n // 10)  # warm-up
        before, after = ab(per_call(attempt(old_lock)), per_call(attempt(runner._begin_locked)),
                           n=n)
        rt_before: list[int] = []
        rt_after: list[int] = []
        with trips.count(rt_before):
            attempt(old_lock)()
        with trips.count(rt_after):
            attempt(runner._begin_locked)()
        rows.append(("advisory lock: one attempt (checkout + ping, BEGIN, lock, ROLLBACK), "
                     "CPU µs", f"{before:.0f}", f"{after:.0f}"))
        rows.append(("advisory lock: PostgreSQL round trips per attempt",
                     str(rt_before[0]), str(rt_after[0])))

        # 2. Each Redis command (hiredis), GETDEL of a missing key: through the client
        #    (a checkout from its pool and back) before, on the store's own connections now.
        client = redis.Redis.from_url(store.url, decode_responses=True,
                                      health_check_interval=30, socket_timeout=2.0)
        store_ = TokenStore(client)
        before, after = ab(per_call(lambda: client.getdel("ft:" + "x" * 43)),
                           per_call(lambda: store_.consume_digest("x" * 43)), n=n)
        rows.append(("Redis GETDEL: through the redis-py client (before), on the store's own "
                     "connections (after), CPU µs", f"{before:.0f}", f"{after:.0f}"))
        client.close()
        bare = redis.Redis.from_url(store.url).connection_pool.get_connection()

        def raw_getdel() -> None:
            bare.send_command("GETDEL", "ft:" + "x" * 43)
            bare.read_response()
        rows.append(("Redis GETDEL on a bare connection (the floor: no pool, no client), "
                     "CPU µs", "", f"{cpu_us(raw_getdel, n):.0f}"))
        bare.disconnect()

        # 3. The digest: three times per submit before, once now.
        token, sid = secrets.token_urlsafe(32), secrets.token_urlsafe(16)
        one = cpu_us(lambda: TokenStore.digest(token, session_id=sid, form="order"), n)
        rows.append(("token digest per submit, CPU µs", f"{3 * one:.1f} (3 ×)",
                     f"{one:.1f} (1 ×)"))

        # 4. Signals with nobody listening (the runner's two) and the app's receivers.
        def send_unguarded() -> None:
            token_consumed.send(app, digest="d")

        def send_guarded() -> None:
            if token_consumed.receivers:
                token_consumed.send(app, digest="d")
        before, after = ab(per_call(send_unguarded), per_call(send_guarded), n=n * 10)
        rows.append(("a signal nobody listens to (token_consumed, submit_committed), CPU µs",
                     f"{before:.2f}", f"{after:.2f}"))
        outcome = runner.Created("order-id")
        with app.test_request_context("/orders", method="POST"):
            us = cpu_us(lambda: submit_decided.send(app, form="order", outcome=outcome,
                                                    seconds=0.01, digest="d" * 43), n)
        rows.append(("submit_decided to the app's receivers (metrics, request log), CPU µs",
                     "", f"{us:.1f}"))

        # 5. Whole requests in-process (Flask test client), earlier way vs now.
        client = app.test_client()
        state = app.extensions["form_tokens"]

        def open_form() -> dict[str, str]:
            page = client.get("/orders/new").get_data(as_text=True)
            return {**FIELDS, **dict(_HIDDEN.findall(page))}

        def post(form: dict[str, str], expect: int = 303) -> None:
            response = client.post("/orders", data=form)
            assert response.status_code == expect, response.status_code

        def first_submits(count: int) -> float:
            forms = [open_form() for _ in range(count)]
            started = time.process_time()
            for form in forms:
                post(form)
            return (time.process_time() - started) / count * 1e6

        def old_first_submits(count: int) -> float:
            with swapped(runner, "_begin_locked", old_lock):
                return first_submits(count)

        with open(os.devnull, "w") as devnull, contextlib.redirect_stderr(devnull):
            first_submits(50)
            m = max(n // 5, 100)
            before, after = ab(old_first_submits, first_submits, n=m)
            rows.append(("POST /orders, a first submit (validation, lock, GETDEL, INSERT, "
                         "COMMIT, signals), CPU µs", f"{before:.0f}", f"{after:.0f}"))

            # The whole cycle against the baseline (bench/baseline.py): the overhead.
            def cycles(new: str, create: str) -> Callable[[int], float]:
                def block(count: int) -> float:
                    started = time.process_time()
                    for _ in range(count):
                        page = client.get(new).get_data(as_text=True)
                        response = client.post(create, data={**FIELDS,
                                                             **dict(_HIDDEN.findall(page))})
                        assert response.status_code == 303
                        client.get(response.location)
                    return (time.process_time() - started) / count * 1e6
                return block

            def old_cycles(count: int) -> float:
                """As before: the old lock, the counts in a pipeline, no memory of
                settled submits."""
                with swapped(runner, "_begin_locked", old_lock), \
                        swapped(TokenStore, "issue", old_issue), \
                        swapped(state.settled, "size", 0):
                    return cycles("/orders/new", "/orders")(count)
            old_tokens, tokens, baseline = ab(
                old_cycles, cycles("/orders/new", "/orders"),
                cycles("/baseline/orders/new", "/baseline/orders"), n=m * 2, blocks=10)
            rows.append(("full cycle (GET form, POST, GET order): tokens minus baseline "
                         f"(baseline {baseline:.0f} µs), CPU µs", f"{old_tokens - baseline:.0f}",
                         f"{tokens - baseline:.0f}"))
            counted: list[int] = []
            form = open_form()
            with swapped(runner, "_begin_locked", old_lock), trips.count(counted):
                post(form)
            form = open_form()
            with trips.count(counted):
                post(form)
            rows.append(("POST /orders, a first submit: PostgreSQL round trips "
                         "(pool pre-ping included)", str(counted[0]), str(counted[1])))

            form = open_form()
            post(form)

            def duplicate() -> None:
                post(form)

            def old_duplicates(count: int) -> float:
                with swapped(state.settled, "size", 0), \
                        swapped(state.settled, "_results", type(state.settled._results)()):
                    return per_call(duplicate)(count)
            before, after = ab(old_duplicates, per_call(duplicate), n=m)
            rows.append(("POST /orders, a duplicate of a committed order, CPU µs "
                         "(before: validation + lock + GETDEL + SELECT)",
                         f"{before:.0f}", f"{after:.0f}"))
            # The render with both counts (session cap, client limit): a pipeline of
            # INCR, EXPIRE and SET before, one script now.
            def pipelined_renders(count: int) -> float:
                with swapped(TokenStore, "issue", old_issue):
                    return per_call(lambda: client.get("/orders/new"))(count)
            before, after = ab(pipelined_renders, per_call(lambda: client.get("/orders/new")),
                               n=m)
            rows.append(("GET /orders/new with the session cap and client limit: counts in a "
                         "pipeline (before) vs in the SET's script (after), CPU µs",
                         f"{before:.0f}", f"{after:.0f}"))

    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [f"In-process costs, {n} calls each ({when}, load average "
             f"{os.getloadavg()[0]:.1f}): `scripts/bench --costs`", "",
             "| cost | before | after |", "|---|---|---|"]
    lines += [f"| {what} | {b} | {a} |" for what, b, a in rows]
    text_ = "\n".join(lines) + "\n"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "costs.md").write_text(text_)
    print(text_)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
