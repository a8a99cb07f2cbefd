"""Refund tests: paid orders, real worker processes, and waiting for them."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from sqlalchemy import event, text
from sqlalchemy.orm import Session

from webapp.refunds.requests import request_refund
from webapp.refunds.stream import GROUP, STREAM, RefundMessage, queue_refund
from webapp.shop.models import RefundRequest
from webapp.shop.order_states import transition

ROOT = Path(__file__).resolve().parent.parent.parent


def new_key() -> str:
    """A key shaped like a form-token digest."""
    return secrets.token_urlsafe(32)


def wait_until(condition: Callable[[], object], timeout: float = 60, what: str = "") -> object:
    """Poll ``condition`` until it is truthy; fail after a generous ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or condition}")


class Worker:
    """``python -m webapp.refunds.worker`` as a real process, its log in a temp file;
    ``tests.refunds.paused_worker`` when ``env`` asks for a ``TEST_REFUND_PAUSE_*``."""

    def __init__(self, servers, **env: str) -> None:
        self.env = {
            **os.environ,
            "APP_ENV": "testing",
            "DATABASE_URL": servers.database_url,
            "REDIS_URL": servers.redis.url,
            "REFUND_CLAIM_IDLE_MS": "500",
            **env,
        }
        self.log = tempfile.TemporaryFile("w+")
        module = (
            "tests.refunds.paused_worker"
            if any(name.startswith("TEST_REFUND_PAUSE_") for name in env)
            else "webapp.refunds.worker"
        )
        self.process = subprocess.Popen(
            [sys.executable, "-m", module],
            cwd=ROOT,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read()

    def wait_for(self, line: str, timeout: float = 60) -> str:
        """Wait until the worker has printed ``line``; returns the whole log."""

        def printed() -> str | None:
            out = self.output()
            assert line in out or self.process.poll() is None, out
            return out if line in out else None

        try:
            return wait_until(printed, timeout, what=f"worker to print {line!r}")
        # what it printed instead says where it stopped
        except AssertionError as error:
            raise AssertionError(f"{error}; it printed:\n{self.output()[-3000:]}") from None

    def kill(self) -> None:
        """SIGKILL: no clean-up of any kind runs."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM, then wait for the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self.log.close()


@pytest.fixture
def start_worker(servers):
    """Start real worker processes; every one still running is killed afterwards."""
    workers: list[Worker] = []

    def start(**env: str) -> Worker:
        worker = Worker(servers, **env)
        workers.append(worker)
        return worker

    yield start
    for worker in workers:
        worker.close()


@pytest.fixture
def paid_order(servers) -> Callable[..., int]:
    """Insert an order and pay it through the state machine; returns its id."""

    def make(paid_cents: int = 3600) -> int:
        with Session(servers.engine) as db, db.begin():
            order_id = db.scalar(
                text(
                    "INSERT INTO orders (public_id, submission_digest, product_id, quantity, "
                    "unit_price_cents, customer_name, email, shipping_address) VALUES "
                    "(left(md5(random()::text), 22), md5(random()::text), 1, 2, 1800, 'Ada', "
                    "'ada@example.com', 'London') RETURNING id"
                )
            )
            transition(db, order_id, "pay", paid_cents=paid_cents)
        return order_id

    return make


def published(servers, order_id: int, amount_cents: int, key: str | None = None) -> RefundMessage:
    """A refund request as the relay leaves it once published: the row (its amount
    reserved, marked published so no relay sends it again) and the message that
    names it. The same key again gives the same request's message."""
    key = key or new_key()
    with servers.engine.begin() as conn:
        request_id = conn.scalar(
            text(
                "INSERT INTO refund_requests"
                " (idempotency_key, order_id, amount_cents, published_at) "
                "VALUES (:k, :o, :a, now()) ON CONFLICT (idempotency_key) DO NOTHING RETURNING id"
            ),
            {"k": key, "o": order_id, "a": amount_cents},
        )
        if request_id is None:
            request_id = conn.scalar(
                text("SELECT id FROM refund_requests WHERE idempotency_key = :k"), {"k": key}
            )
        else:
            conn.execute(
                text("UPDATE orders SET reserved_cents = reserved_cents + :a WHERE id = :o"),
                {"a": amount_cents, "o": order_id},
            )
    return RefundMessage(request_id, key, order_id, amount_cents)


def queue(
    servers, rdb: redis.Redis, order_id: int, amount_cents: int, key: str | None = None
) -> str:
    """Append the message of a published refund request (see :func:`published`);
    returns its id. The same key again appends another copy."""
    return queue_refund(rdb, published(servers, order_id, amount_cents, key))


def pending_count(rdb: redis.Redis) -> int:
    return rdb.xpending(STREAM, GROUP)["pending"]


def all_acked(rdb: redis.Redis) -> bool:
    """The group has read up to the newest message and has nothing pending."""
    (group,) = rdb.xinfo_groups(STREAM) or [None]
    newest = rdb.xrevrange(STREAM, count=1)
    return (
        group is not None
        and group["pending"] == 0
        and bool(newest)
        and group["last-delivered-id"] == newest[0][0]
    )


def refunds_of(servers, order_id: int) -> tuple[int, int, str]:
    """(number of refund records, refunded_cents, status) of an order."""
    with servers.engine.connect() as conn:
        return conn.execute(
            text(
                "SELECT (SELECT count(*) FROM refund_records WHERE order_id = o.id), "
                "o.refunded_cents, o.status FROM orders o WHERE o.id = :id"
            ),
            {"id": order_id},
        ).one()


def requests_of(servers, order_id: int) -> list[tuple[str, int, str, str | None]]:
    """(key, amount, status, reason) of each refund request of an order, oldest first."""
    with servers.engine.connect() as conn:
        return [
            tuple(row)
            for row in conn.execute(
                text(
                    "SELECT idempotency_key, amount_cents, status, reason FROM refund_requests "
                    "WHERE order_id = :id ORDER BY id"
                ),
                {"id": order_id},
            )
        ]


def request(servers, order_id: int, amount_cents: int, key: str | None = None) -> str:
    """Make a refund request as the refund form's submit does (reserve, insert,
    NOTIFY, one transaction); returns its key."""
    key = key or new_key()
    with Session(servers.engine) as db, db.begin():
        request_refund_keyed(db, order_id, amount_cents, key)
    return key


def request_refund_keyed(db: Session, order_id: int, cents: int, key: str) -> RefundRequest:
    """``request_refund`` in ``db`` as the refund form's submit runs it, where the
    protected view's flush stamps the new request with the submit's digest: here with
    ``key``, by a before_flush listener on this session for this call only."""

    def stamp(session: Session, *_: object) -> None:
        for row in session.new:
            if isinstance(row, RefundRequest) and row.idempotency_key is None:
                row.idempotency_key = key

    event.listen(db, "before_flush", stamp)
    try:
        return request_refund(db, order_id, cents)
    finally:
        event.remove(db, "before_flush", stamp)


def reserved_of(servers, order_id: int) -> int:
    with servers.engine.connect() as conn:
        return conn.scalar(
            text("SELECT reserved_cents FROM orders WHERE id = :id"), {"id": order_id}
        )


def settled(servers) -> bool:
    """No refund request is left to publish or apply (one waiting for review is
    neither, until approved)."""
    with servers.engine.connect() as conn:
        return not conn.scalar(
            text("SELECT count(*) FROM refund_requests WHERE status = 'requested'")
        )
