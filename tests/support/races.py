"""Two actions on one order released at the same instant."""

from __future__ import annotations

import threading
from collections.abc import Callable

from sqlalchemy.orm import Session

from webapp.shop.order_states import Transitioned, TransitionRefused, transition


def cancel_racing_ship(
    engine, order_id: int, cancel: Callable[[], object]
) -> tuple[object, Transitioned | TransitionRefused]:
    """Run ``cancel()`` (a request) and a "ship" transition on ``order_id`` at
    once; returns the cancel's response and the ship's result or refusal."""
    barrier = threading.Barrier(2)
    results: dict[str, object] = {}

    def ship() -> None:
        barrier.wait()
        try:
            with Session(engine) as db, db.begin():
                results["ship"] = transition(db, order_id, "ship")
        except TransitionRefused as refused:
            results["ship"] = refused

    def press_cancel() -> None:
        barrier.wait()
        results["cancel"] = cancel()

    threads = [threading.Thread(target=ship), threading.Thread(target=press_cancel)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    return results["cancel"], results["ship"]
