"""``python -m webapp.refunds.worker`` with pauses, for tests that kill or stop it
at the worst moments: ``python -m tests.refunds.paused_worker``.

    TEST_REFUND_PAUSE_BEFORE_COMMIT=<seconds>  inside the refund's transaction
    TEST_REFUND_PAUSE_BEFORE_ACK=<seconds>     committed (or already applied), not acked
    TEST_REFUND_PAUSE_BEFORE_MARK=<seconds>    the relay: XADDed, published_at not committed

Each pause first prints "PAUSE <where> <message id>" to stderr, then sleeps in
the event loop (so SIGTERM and its grace period work as in production). The
worker knows nothing of these variables: the pauses are receivers of its signals.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from webapp.refunds import relay, worker

PAUSES = {
    "before_commit": worker.refund_committing,
    "before_ack": worker.refund_settled,
    "before_mark": relay.refund_published,
}


def pause(where: str, seconds: float) -> Callable[..., Awaitable[None]]:
    async def receiver(sender: Any, *, message_id: str, **_: Any) -> None:
        print(f"PAUSE {where} {message_id}", file=sys.stderr, flush=True)
        await asyncio.sleep(seconds)

    return receiver


if __name__ == "__main__":
    for where, signal in PAUSES.items():
        seconds = float(os.environ.get(f"TEST_REFUND_PAUSE_{where.upper()}") or 0)
        if seconds:
            signal.connect(pause(where, seconds), weak=False)
    sys.exit(worker.main())
