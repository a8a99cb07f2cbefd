"""Card checkout under fire: two app instances (real gunicorn, PostgreSQL and Redis shared)
take card orders through the form while gunicorn workers are SIGKILLed at random points
(and at the charge's own: after the token is spent, after the row commits, before the
provider call, after its answer), the provider's faults flip and Redis restarts. Then two
sweepers run at once, and the provider's charges are held against the orders: every
charge is one paid order's, no order is charged twice, none is left charging.

12 s of load in the default run; ``scripts/soak --minutes N -k charge`` for longer.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from contextlib import suppress
from pathlib import Path

import pytest
from sqlalchemy import text

from dev.embedded import EmbeddedRedis
from flask_submit_once._runner import step_key
from tests.failover.charge_soak import CardLoad, reconcile
from tests.failover.conftest import soak_seconds
from tests.support.live import ROOT, LiveServer
from tests.support.payments import Provider
from webapp.webhooks import DEV_SECRET

#: Probability, per submit, that its worker is killed at each point of the charge.
KILLS = {
    "TEST_KILL_AFTER_CONSUME": "0.02",
    "TEST_KILL_AFTER_COMMIT": "0.03",
    "TEST_KILL_BEFORE_CHARGE": "0.03",
    "TEST_KILL_AFTER_CHARGE": "0.04",
}
#: The provider's faults, flipped in turn (each for a while), and nothing between them.
FAULTS = [
    {"slow": 3},
    {"fail_before_charge": 3},
    {"fail_after_charge": 3},
    {"drop_after_charge": 3},
    {},
]


def worker_killer(
    instances: list[LiveServer], stop: threading.Event, rng: random.Random, killed: list[int]
) -> None:
    """SIGKILL a random worker of a random instance every 3-6 s (any point of any request;
    more often and, on a small machine, the instances spend their time booting workers)."""
    while not stop.wait(rng.uniform(3, 6)):
        pids = rng.choice(instances).worker_pids()
        if pids:
            with suppress(ProcessLookupError):
                os.kill(rng.choice(pids), signal.SIGKILL)
                killed.append(1)


def fault_flipper(provider: Provider, stop: threading.Event, flips: Counter) -> None:
    for n in range(10**9):
        faults = FAULTS[n % len(FAULTS)]
        provider.faults(**faults)
        flips[next(iter(faults), "none")] += 1
        if stop.wait(2.0):
            return


def redis_restarter(
    redis: EmbeddedRedis, stop: threading.Event, every: float, restarts: list[int]
) -> None:
    """Kill Redis (SIGKILL; it keeps an append-only file) and start it again after 1 s."""
    while not stop.wait(every):
        redis.kill()
        time.sleep(1)
        redis.start()
        restarts.append(1)


def sweepers(env: dict[str, str]) -> list[str]:
    """Two ``flask submit-once resume`` at once, as two instances' cron would."""
    runs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "flask",
                "--app",
                "tests.support.paused_app:create_app()",
                "submit-once",
                "resume",
                # the last killed charges' leases run out first
                "--wait",
                "10",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = []
    for run in runs:
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, err[-2000:]
        outputs.append(out.strip().splitlines()[-1])
    return outputs


def completed_by(log: Path, keys: set[str]) -> Counter:
    """Who made the last successful charge call of each key: "first" (the submit that
    made the order), "duplicate" (a repeat of it) or "sweeper"."""
    last: dict[str, str] = {}
    for line in log.read_text().splitlines():
        call = json.loads(line)
        if call["outcome"] == "charged":
            last[call["key"]] = call["caller"]
    return Counter(last[k] for k in keys if k in last)


@pytest.mark.soak
# two gunicorns, sweepers, a loaded machine
@pytest.mark.timeout(soak_seconds() * 2 + 300)
def test_card_checkout_under_kills_faults_and_redis_restarts_charges_each_order_once(
    servers, tmp_path, report
):
    seconds = soak_seconds()
    rng = random.Random(29)
    redis = EmbeddedRedis(tmp_path / "redis", persist=True).start()
    log = tmp_path / "charges.jsonl"
    provider = Provider(tmp_path / "provider.jsonl")
    env = {
        **provider.env(PAYMENT_PROVIDER_TIMEOUT="2", PAYMENT_PROVIDER_RETRIES="1"),
        "REDIS_URL": redis.url,
        "PAYMENT_WEBHOOK_SECRET": DEV_SECRET,
        "TEST_CHARGE_LOG": str(log),
        # A worker killed in a charge holds its order this long (the sweepers wait for it).
        "SUBMIT_ONCE_STEP_LEASE_SECONDS": "2",
    }
    a = LiveServer(servers, workers=2, threads=4, **env, **KILLS)
    b = LiveServer(servers, workers=2, threads=4, **env, **KILLS)
    provider.options = [
        "--webhook-url",
        f"http://127.0.0.1:{a.port}/webhooks/payments",
        "--webhook-secret",
        DEV_SECRET,
        # the provider announces each charge
    ]
    load = CardLoad([a.port, b.port])
    stop, killed, flips, restarts = load.stop, [], Counter(), []
    try:
        with provider, a, b:
            load.run(
                seconds,
                [
                    threading.Thread(target=worker_killer, args=([a, b], stop, rng, killed)),
                    threading.Thread(target=fault_flipper, args=(provider, stop, flips)),
                    threading.Thread(
                        target=redis_restarter, args=(redis, stop, max(seconds / 3, 5), restarts)
                    ),
                ],
            )
            stop.set()
            provider.faults()
            sigkills = sum(live.output().count("was sent SIGKILL") for live in (a, b))
            swept = sweepers(
                {
                    **os.environ,
                    "APP_ENV": "testing",
                    "SECRET_KEY": "test-secret",
                    "DATABASE_URL": servers.database_url,
                    **env,
                }
            )
            with servers.engine.connect() as conn:
                orders = [
                    dict(r)
                    for r in conn.execute(
                        text(
                            "SELECT order_number, public_id, customer_name, status, charge_id, "
                            "paid_cents, unit_price_cents * quantity AS total, submission_step, "
                            "submission_digest FROM orders WHERE api_client_id IS NULL"
                        )
                    ).mappings()
                ]
            charges = provider.succeeded()
    finally:
        redis.kill()
    verdict = reconcile(load, orders, charges)
    paid_keys = {
        step_key(o["submission_digest"], "charge") for o in orders if o["status"] == "paid"
    }
    by = completed_by(log, paid_keys)
    report(
        f"charge soak {seconds:.0f} s: {len(load.customers)} customers, {verdict.orders} "
        f"orders ({verdict.paid} paid, {verdict.declined} declined), {verdict.charges} "
        f"charges; workers SIGKILLed {sigkills} ({len(killed)} at random, the rest at "
        f"the charge's points); provider faults flipped {sum(flips.values())} "
        f"{dict(flips)}; Redis restarted {len(restarts)}; charges completed by the first "
        f"submit {by['first']}, by a duplicate {by['duplicate']}, by the sweeper "
        f"{by['sweeper']}; final sweepers {swept}; "
        f"answers {dict(sorted(verdict.answers.items()))}, form pages unavailable "
        f"{load.form_pages_unavailable}; charged twice "
        f"{len(verdict.charged_twice)}, charges without an order "
        f"{len(verdict.charges_without_order)}, stuck {len(verdict.stuck)}"
    )
    assert verdict.charged_twice == [] and verdict.charges_without_order == []
    assert verdict.stuck == [] and verdict.paid_without_charge == []
    assert verdict.paid == verdict.charges, "provider charges = paid orders"
    assert verdict.wrong_amount == [] and verdict.lost == []
    assert verdict.double_paid_customers == []
    assert verdict.bad_answers == [], verdict.bad_answers[:5]
    assert verdict.paid > 0 and sigkills > 0
