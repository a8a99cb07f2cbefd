"""The sweeper (``submit_once.resume()``, ``flask submit-once resume``): it finishes the
steps submits left to do, leaves an order to whoever holds its lease, charges each order
once however many sweepers run at once, and finishes what a killed worker left. After
every test no connection is idle in a transaction, no advisory lock and no lease is held."""

from __future__ import annotations

import http.client
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

import checkout_app
from live import Browser, hidden
from servers import free_port

ADA = {"email": "ada@example.com", "cents": "1250"}
GRACE = {"email": "grace@example.com", "cents": "990"}
LIN = {"email": "lin@example.com", "cents": "4200"}
SERVE = Path(__file__).parent / "apps" / "serve_checkout.py"
LEASE_COLUMNS = ("submission_step_lease_owner", "submission_step_lease_until")
#: The lease of the worker that is killed inside the step: renewed every third of it while
#: the worker lives, it runs out this long after the kill.
LEASE_SECONDS = 1.0
pytestmark = pytest.mark.usefixtures("nothing_held", "no_lease_left")


@pytest.fixture
def app(make_checkout):
    return make_checkout()


@pytest.fixture
def client(app):
    return app.test_client()


def resume(app, **how):
    from checkout_app import submit_once

    with app.app_context():
        return submit_once.resume(**how)


def left_to_do(once_forms, provider, *people) -> list[str]:
    """An order for each of ``people`` whose charge did not go through (the provider
    dropped the connection), left marked; their keys."""
    provider.mode = "fail"
    for data in people:
        assert once_forms.open("/checkout").submit(data).status_code == 503
    provider.mode = "ok"
    return list(provider.calls)


def all_charged(orders) -> bool:
    return all(charge is not None and step is None for _, charge, step in orders())


def test_the_sweeper_charges_an_order_left_to_do_and_then_has_nothing_to_do(
    app, once_forms, provider, orders
):
    (key,) = left_to_do(once_forms, provider, ADA)
    assert orders() == [("ada@example.com", None, "charge")]
    assert resume(app) == {"created": 1}
    assert orders() == [("ada@example.com", "ch_1", None)] and provider.calls[key] == 2
    assert resume(app) == {} and provider.calls[key] == 2


def test_the_command_a_cron_runs_charges_every_order_left_to_do(app, once_forms, provider, orders):
    left_to_do(once_forms, provider, ADA, GRACE)
    runner = app.test_cli_runner()
    swept = runner.invoke(args=["submit-once", "resume"])
    assert (swept.exit_code, swept.output) == (0, "created=2\n")
    assert runner.invoke(args=["submit-once", "resume"]).output == "nothing\n"
    assert all_charged(orders) and sorted(provider.calls.values()) == [2, 2]


def test_the_sweeper_leaves_an_order_to_the_request_charging_it(app, once_forms, provider, orders):
    page = once_forms.open("/checkout")
    answers = []
    provider.hold()
    paying = threading.Thread(
        target=lambda: answers.append(page.submit(ADA, client=once_forms.clone()))
    )
    paying.start()
    try:
        assert provider.entered.wait(30)
        assert resume(app) == {"still_running": 1}
    finally:
        provider.release()
        paying.join(30)
    assert answers[0].headers["Location"] == "/orders/1"
    assert list(provider.calls.values()) == [1] and all_charged(orders)
    assert resume(app) == {}


def test_the_sweeper_leaves_an_order_whose_lease_another_holder_holds(
    app, once_forms, provider, orders, engine
):
    """Another holder (a request on another host, say) has the order's lease: the sweeper
    leaves it, until that holder ends it."""
    left_to_do(once_forms, provider, ADA)
    Order = checkout_app.Order
    with engine.begin() as conn:
        until = datetime.now(UTC) + timedelta(minutes=1)
        conn.execute(
            update(Order).values(
                submission_step_lease_owner="another holder", submission_step_lease_until=until
            )
        )
    assert resume(app) == {"still_running": 1}
    skipped = app.test_cli_runner().invoke(args=["submit-once", "resume"])
    assert skipped.output == "still_running=1\n"
    assert sum(provider.calls.values()) == 1
    with engine.begin() as conn:
        conn.execute(update(Order).values(dict.fromkeys(LEASE_COLUMNS)))
    assert resume(app) == {"created": 1} and all_charged(orders)


def test_two_sweepers_at_once_charge_each_order_once(make_checkout, once_forms, provider, orders):
    keys = left_to_do(once_forms, provider, ADA, GRACE, LIN)
    failed = sum(provider.calls.values())
    # The first charge waits for the other sweeper's: both are at work at once.
    provider.hold(until=lambda: sum(provider.calls.values()) >= failed + 2)
    instances = [make_checkout(), make_checkout()]
    counts: list[dict[str, int]] = [{}, {}]
    start = threading.Barrier(2)

    def sweep(number: int) -> None:
        start.wait()
        counts[number] = resume(instances[number])

    sweepers = [threading.Thread(target=sweep, args=(n,)) for n in (0, 1)]
    for sweeper in sweepers:
        sweeper.start()
    for sweeper in sweepers:
        sweeper.join(30)
    assert sum(count.get("created", 0) for count in counts) == 3, counts
    assert [provider.calls[key] for key in keys] == [2, 2, 2] and len(provider.calls) == 3
    assert all_charged(orders)


def killed_at(
    port: int,
    point: str,
    worker: subprocess.Popen[str],
    data: dict[str, str],
    before_the_kill: Callable[[], None] = lambda: None,
) -> tuple[Browser, dict[str, str], str]:
    """Open the checkout on ``worker``, submit ``data``, and SIGKILL the worker when it says
    it reached ``point`` (and ``before_the_kill()`` returned): the browser, what it sent,
    and what the worker said."""
    assert worker.stdout is not None and worker.stdout.readline() == "serving\n"
    browser = Browser(port)
    page = browser.get("/checkout").body
    form = {
        "csrf_token": hidden(page, "csrf_token"),
        "form_token": hidden(page, "form_token"),
        **data,
    }
    lost: list[BaseException] = []

    def submit() -> None:
        try:
            browser.post("/checkout/pay", form)
        except (OSError, http.client.HTTPException) as error:
            # what the browser shows as a network error
            lost.append(error)

    posting = threading.Thread(target=submit)
    posting.start()
    said = worker.stdout.readline()
    try:
        before_the_kill()
    finally:
        # whatever it said: never left running
        worker.send_signal(signal.SIGKILL)
    worker.wait(10)
    posting.join(30)
    assert lost, "the killed worker answered"
    return browser, form, said


def test_a_worker_killed_after_the_orders_commit_leaves_it_to_do_and_the_sweeper_charges_it(
    make_checkout, redis_url, database_url, provider, orders, leases
):
    """SIGKILL once an order is committed, before its step (``committed``), or inside the
    step as the provider is called (``charging``): the order says its charge is still to
    do, the sweeper charges it with the key the dead worker was sending, and the user's
    retry lands on it. The worker inside the step keeps its lease while it lives (renewed
    past its length); once it is killed, the lease runs out and a sweeper that waits takes
    it then, not later. (The two workers start at once: a start costs a second or more.)"""
    points = {"committed": ADA, "charging": GRACE}
    ports = {point: free_port() for point in points}
    workers = {
        point: subprocess.Popen(
            [
                *(sys.executable, str(SERVE), str(ports[point]), redis_url, database_url),
                *(point, str(LEASE_SECONDS)),
            ],
            stdout=subprocess.PIPE,
            text=True,
            cwd=SERVE.parent,
        )
        for point in points
    }
    renewed: list[list[tuple[str, datetime]]] = []

    def renewed_while_it_lives() -> None:
        first = leases()
        time.sleep(LEASE_SECONDS * 1.5)
        renewed.extend([first, leases()])

    try:
        killed = {
            point: killed_at(
                ports[point],
                point,
                workers[point],
                data,
                renewed_while_it_lives if point == "charging" else lambda: None,
            )
            for point, data in points.items()
        }
    finally:
        for worker in workers.values():
            worker.kill()
            worker.wait(10)
            assert worker.stdout is not None
            worker.stdout.close()
    assert orders() == [("ada@example.com", None, "charge"), ("grace@example.com", None, "charge")]
    ((owner, until),), ((still, later),) = renewed
    assert still == owner and later > until
    app = make_checkout()
    started = time.monotonic()
    assert resume(app, wait=10 * LEASE_SECONDS) == {"created": 2} and all_charged(orders)
    # The lease had at most its length to run after the kill (and the polling's 0.1 s).
    assert time.monotonic() - started < LEASE_SECONDS + 1
    assert sorted(provider.calls.values()) == [1, 1]
    assert killed["committed"][2] == f"committed {workers['committed'].pid}\n"
    charging = killed["charging"][2].split()[1]
    # the key the dead worker had sent
    assert provider.calls[charging] == 1
    for browser, form, _ in killed.values():
        client = app.test_client()
        client.set_cookie("session", browser.cookies["session"])
        again = client.post("/checkout/pay", data=form)
        assert again.status_code == 303 and again.headers["Location"].startswith("/orders/")
    assert sorted(provider.calls.values()) == [1, 1]
