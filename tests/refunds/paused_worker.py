"""``python -m webapp.refunds.worker`` with pauses, for tests that kill or stop it
at the worst moments: ``python -m tests.refunds.paused_worker``.

    TEST_REFUND_PAUSE_BEFORE_COMMIT=<seconds>  inside the refund's transaction
    TEST_REFUND_PAUSE_BEFORE_ACK=<seconds>     committed (or already applied), not acked
    TEST_REFUND_PAUSE_BEFORE_MARK=<seconds>    the relay: XADDed, published_at not committed

Each pause first prints "PAUSE <where> <message id>" to stderr, then sleeps in
the event loop (so SIGTERM and its grace period work as in production), and ends
early once the file ``TEST_REFUND_RELEASE`` names exists: a test that must look at
the worker while it is held lets it go when it has looked, not after a guess. The
worker knows nothing of these variables: the pauses are receivers of its signals.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from webapp.refunds import relay, worker

PAUSES = {
    "before_commit": worker.refund_committing,
    "before_ack": worker.refund_settled,
    "before_mark": relay.refund_published,
}


def pause(where: str, seconds: float, release: Path | None) -> Callable[..., Awaitable[None]]:
    async def receiver(sender: Any, *, message_id: str, **_: Any) -> None:
        print(f"PAUSE {where} {message_id}", file=sys.stderr, flush=True)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while (left := deadline - loop.time()) > 0:
            if release is not None and release.exists():
                return
            await asyncio.sleep(min(left, 0.05))

    return receiver


if __name__ == "__main__":
    release = (
        Path(os.environ["TEST_REFUND_RELEASE"]) if "TEST_REFUND_RELEASE" in os.environ else None
    )
    for where, signal in PAUSES.items():
        seconds = float(os.environ.get(f"TEST_REFUND_PAUSE_{where.upper()}") or 0)
        if seconds:
            signal.connect(pause(where, seconds, release), weak=False)
    sys.exit(worker.main())
