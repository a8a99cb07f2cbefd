"""In one process, on real PostgreSQL and Redis: the token layer's costs one by one,
each beside its alternative, or a profile of the full cycle.

    scripts/bench --costs [--n 2000]
    scripts/bench --profile [--cycles 300] [--variant tokens|baseline|floor|nonce]

Costs go through public APIs only (flask_submit_once's, redis-py's, SQLAlchemy's). CPU is
time.process_time per call, the ways of a row timed in blocks that take turns, so
that other load on the machine hits them alike; PostgreSQL round trips are counted
on the wire (bench/wire.py). Writes bench/results/costs.md. The profile runs the app
under the Flask test client (no gunicorn: only the app shows) with pyinstrument and
writes the call tree to bench/results/profile-<variant>.txt.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import event

from flask_submit_once import Outcome, TokenStore, signals
from webapp.redis_urls import make_client

from . import uploads
from .load import PATHS, form_fields
from .servers import RESULTS, app_environment, databases, redis_calls
from .wire import Relay

# runs ``count`` calls, returns CPU µs per call
Block = Callable[[int], float]


def per_call(fn: Callable[[], object]) -> Block:
    def block(count: int) -> float:
        started = time.process_time()
        for _ in range(count):
            fn()
        return (time.process_time() - started) / count * 1e6

    return block


def ab(*ways: Block, n: int, blocks: int = 6) -> list[float]:
    """Median µs per call of each way, over blocks taken in turns (AB…, …BA)."""
    for way in ways:
        # warm-up
        way(max(n // 20, 5))
    times: list[list[float]] = [[] for _ in ways]
    for block in range(blocks):
        order = range(len(ways)) if block % 2 == 0 else reversed(range(len(ways)))
        for which in order:
            times[which].append(ways[which](max(n // blocks, 1)))
    return [statistics.median(t) for t in times]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=2000, help="calls per measurement")
    parser.add_argument("--profile", action="store_true", help="profile the cycle instead")
    parser.add_argument("--cycles", type=int, default=300, help="cycles to profile")
    parser.add_argument("--variant", choices=sorted(PATHS), default="tokens")
    args = parser.parse_args(argv)
    if args.profile:
        return profile(args.cycles, args.variant)
    n = args.n
    # cost, ours, the alternative, its figure
    rows: list[tuple[str, str, str, str]] = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-") as tmp,
        databases(Path(tmp)) as (postgres, store),
        Relay(postgres.port, postgres.password) as relay,
    ):
        # 1. Redis: what the token store sends against the bare client calls (the floor's).
        # what SubmitOnce makes from a redis:// URL
        client = make_client(store.url)
        tokens = TokenStore(client)

        def pipelined_getdel() -> None:
            pipe = client.pipeline(transaction=False)
            pipe.getdel("so:" + "x" * 43)
            pipe.execute()

        ours, bare, piped = ab(
            per_call(lambda: tokens.consume_digest("x" * 43)),
            per_call(lambda: client.getdel("so:" + "x" * 43)),
            per_call(pipelined_getdel),
            n=n,
        )
        rows.append(
            (
                "consume: GETDEL of a missing key, CPU µs",
                f"{ours:.0f}",
                "`client.getdel` (the floor)",
                f"{bare:.0f}",
            )
        )
        rows.append(
            (
                "consume: GETDEL, CPU µs",
                f"{ours:.0f}",
                "the same GETDEL in a pipeline of one",
                f"{piped:.0f}",
            )
        )
        plain, bare = ab(
            per_call(lambda: tokens.create(session_id="s", form="orders.create")),
            per_call(lambda: client.set("floor:" + secrets.token_urlsafe(32), 1, ex=3600, nx=True)),
            n=n,
        )
        rows.append(
            (
                "`TokenStore.create` (one SET EX NX), CPU µs",
                f"{plain:.0f}",
                "`client.set(..., ex=, nx=True)` (the floor)",
                f"{bare:.0f}",
            )
        )
        client.flushall()
        client.close()
        token, sid = secrets.token_urlsafe(32), secrets.token_urlsafe(16)
        one = ab(
            per_call(lambda: TokenStore.digest(token, session_id=sid, form="orders.create")), n=n
        )[0]
        rows.append(("token digest (once per submit), CPU µs", f"{one:.1f}", "", ""))

        # 2. Signals: the library sends only when someone listens.
        def unguarded() -> None:
            signals.token_consumed.send(None, digest="d")

        def guarded() -> None:
            if signals.token_consumed.receivers:
                signals.token_consumed.send(None, digest="d")

        after, before = ab(per_call(guarded), per_call(unguarded), n=n * 10)
        rows.append(
            (
                "a signal nobody listens to, CPU µs",
                f"{after:.2f}",
                "sent without asking first",
                f"{before:.2f}",
            )
        )

        # 3. Whole requests in-process (Flask test client): tokens, floor, baseline.
        rows += requests(
            in_process_app(postgres.url("bench"), store.url),
            in_process_app(relay.url("bench"), store.url),
            relay,
            max(n // 5, 100),
        )

        # 4. Uploads: a form without a file pays nothing for them; a file, one hash pass.
        rows += uploads.rows(postgres.url("bench"), store.url, max(n // 5, 100), ab)

    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        f"In-process costs, {n} calls each ({when}, load average "
        f"{os.getloadavg()[0]:.1f}): `scripts/bench --costs`",
        "",
        "| cost | the token layer | against | that |",
        "|---|---|---|---|",
    ]
    lines += [f"| {what} | {ours} | {against} | {that} |" for what, ours, against, that in rows]
    text_ = "\n".join(lines) + "\n"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "costs.md").write_text(text_)
    print(text_)
    return 0


def in_process_app(database_url: str, redis_url: str):
    """The benchmark's app (bench/app.py) for the Flask test client."""
    os.environ.update(app_environment(database_url, redis_url))
    from .app import create_app

    return create_app()


def open_form(client, variant: str = "tokens") -> dict[str, str]:
    return form_fields(client.get(PATHS[variant][0]).get_data(as_text=True), variant)


def post(client, form: dict[str, str], variant: str = "tokens") -> str:
    response = client.post(PATHS[variant][1], data=form)
    assert response.status_code == 303, response.status_code
    return response.location


def cycle(client, variant: str) -> None:
    """GET the form, POST it, follow the 303."""
    assert client.get(post(client, open_form(client, variant), variant)).status_code == 200


def requests(app, counted, relay: Relay, m: int) -> list[tuple[str, str, str, str]]:
    """Rows for whole requests through the Flask test client; ``counted`` is the same app
    on a database URL through ``relay``, whose round trips are counted."""
    client = app.test_client()
    paths = ("tokens", "floor", "baseline")

    def cycles(variant: str) -> Block:
        def block(count: int) -> float:
            started = time.process_time()
            for _ in range(count):
                cycle(client, variant)
            return (time.process_time() - started) / count * 1e6

        return block

    def first_submits(count: int) -> float:
        forms = [open_form(client) for _ in range(count)]
        started = time.process_time()
        for form in forms:
            post(client, form)
        return (time.process_time() - started) / count * 1e6

    rows = []
    # The JSON request log is written (it is part of the work) but not shown.
    with open(os.devnull, "w") as devnull, contextlib.redirect_stderr(devnull):
        tokens, floor, baseline = ab(
            cycles("tokens"), cycles("floor"), cycles("baseline"), n=m * 2, blocks=10
        )
        rows.append(
            (
                "full cycle (GET form, POST, GET order), tokens − floor, CPU µs",
                f"{tokens - floor:.0f}",
                f"floor − baseline (baseline {baseline:.0f} µs a cycle)",
                f"{floor - baseline:.0f}",
            )
        )
        form = open_form(client)
        post(client, form)
        duplicate, first = ab(per_call(lambda: post(client, form)), first_submits, n=m)
        rows.append(
            (
                "POST /orders: a duplicate of an order this worker saw committed, CPU µs",
                f"{duplicate:.0f}",
                "a first submit (validation, lock, GETDEL, INSERT, COMMIT, signals)",
                f"{first:.0f}",
            )
        )
        renders = ab(
            per_call(lambda: client.get(PATHS["tokens"][0])),
            per_call(lambda: client.get(PATHS["floor"][0])),
            n=m,
        )
        rows.append(
            (
                "GET /orders/new, CPU µs",
                f"{renders[0]:.0f}",
                "GET /floor/orders/new",
                f"{renders[1]:.0f}",
            )
        )
        through = counted.test_client()
        # Each variant's first submits first: the pool's first connection, the library's
        # once-per-app check of the digest column (4 round trips) and psycopg preparing
        # the shared SELECT and INSERT once they ran 5 times (2) are not a submit's cost.
        for variant in paths * 2:
            post(through, open_form(through, variant), variant)
        trips = {}
        for variant in paths:
            form = open_form(through, variant)
            with relay.count() as trips[variant]:
                post(through, form, variant)
        rows.append(
            (
                "POST /orders, a first submit (not the app's first): PostgreSQL round trips "
                "(pool pre-pings included)",
                str(trips["tokens"][0]),
                "floor / baseline",
                f"{trips['floor'][0]} / {trips['baseline'][0]}",
            )
        )
    outcome = Outcome("created", "order-id")
    with app.test_request_context("/orders", method="POST"):
        us = ab(
            per_call(
                lambda: signals.submit_decided.send(
                    app, form="orders.create", outcome=outcome, seconds=0.01, digest="d" * 43
                )
            ),
            n=m,
        )[0]
    rows.append(
        (
            "submit_decided to the app's receivers (metrics, request log), CPU µs",
            f"{us:.1f}",
            "",
            "",
        )
    )
    return rows


def profile(cycles: int, variant: str) -> int:
    """pyinstrument's call tree of ``cycles`` cycles, and what one cycle costs unprofiled."""
    from pyinstrument import Profiler

    with (
        tempfile.TemporaryDirectory(prefix="bench-") as tmp,
        databases(Path(tmp)) as (postgres, store),
    ):
        app = in_process_app(postgres.url("bench"), store.url)
        client, server = app.test_client(), make_client(store.url)
        statements: list[str] = []
        engine = app.extensions["db"].kw["bind"]

        def note(conn, cursor, sql, *args) -> None:
            statements.append(sql)

        event.listen(engine, "before_cursor_execute", note)
        # The JSON request log is written (it is part of the work) but not shown.
        with open(os.devnull, "w") as devnull, contextlib.redirect_stderr(devnull):
            # warm-up: imports, pools, template cache
            for _ in range(20):
                cycle(client, variant)
            statements.clear()
            redis_before = sum(redis_calls(server).values())
            cpu, wall = time.process_time(), time.perf_counter()
            for _ in range(cycles):
                cycle(client, variant)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            redis_per_cycle = (sum(redis_calls(server).values()) - redis_before) / cycles
            # Counted over the unprofiled cycles only: the profiled ones run them again.
            event.remove(engine, "before_cursor_execute", note)
            profiler = Profiler(interval=0.0005)
            with profiler:
                for _ in range(cycles):
                    cycle(client, variant)
        server.close()
    summary = (
        f"{cycles} cycles of {variant} "
        f"(CATALOGUE_CACHE_SECONDS={app.config['CATALOGUE_CACHE_SECONDS']:g}), per cycle: "
        f"{len(statements) / cycles:.2f} SQL statements through SQLAlchemy (not counted: "
        f"pool pre-pings, and the BEGIN psycopg sends itself; --costs counts round "
        f"trips), {redis_per_cycle:.2f} Redis commands, {cpu / cycles * 1000:.1f} ms CPU, "
        f"{wall / cycles * 1000:.1f} ms wall (unprofiled)"
    )
    text_ = profiler.output_text(unicode=True, color=False, show_all=False)
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"profile-{variant}.txt"
    path.write_text(f"{summary}\n\n{text_}")
    print(text_, summary, f"written to {path}", sep="\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
