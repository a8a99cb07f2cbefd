"""A gunicorn worker SIGKILLed at each point of the checkout's charge: the order's row says
what is next, and a resubmit or the sweeper finishes it with one charge. The rows of the
step's failure table that need a real kill (tests/support/charge_hooks.py stops the worker
there)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from tests.support.live import LiveServer, open_form, request
from tests.support.payments import PAYS, Provider

ROOT = Path(__file__).resolve().parents[2]
#: The charge's lease on its order: a worker killed in the charge holds the order up this long
#: (the resubmit waits for it within SUBMIT_ONCE_WAIT_SECONDS, the sweeper within --wait).
LEASE_SECONDS = "1"


def the_order(servers) -> dict:
    with servers.engine.connect() as conn:
        (row,) = (
            conn.execute(
                text("SELECT status, charge_id, submission_step, payment_reference FROM orders")
            )
            .mappings()
            .all()
        )
    return dict(row)


def calls(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def sweeper(servers, provider: Provider, log: Path) -> str:
    """``flask submit-once resume`` in a process of its own, as cron runs it."""
    env = {
        **os.environ,
        "APP_ENV": "testing",
        "SECRET_KEY": "test-secret",
        "DATABASE_URL": servers.database_url,
        "REDIS_URL": servers.redis.url,
        "TEST_CHARGE_LOG": str(log),
        **provider.env(),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "flask",
            "--app",
            "tests.support.paused_app:create_app()",
            "submit-once",
            "resume",
            # the killed worker's lease runs out first (LEASE_SECONDS)
            "--wait",
            "10",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("point", ["AFTER_COMMIT", "BEFORE_CHARGE"])
def test_killed_between_the_orders_commit_and_its_charge_the_resubmit_charges_it_once(
    servers, provider, tmp_path, point
):
    log = tmp_path / "charges.jsonl"
    with LiveServer(
        servers,
        workers=1,
        threads=2,
        **provider.env(),
        TEST_CHARGE_LOG=str(log),
        SUBMIT_ONCE_STEP_LEASE_SECONDS=LEASE_SECONDS,
        **{f"TEST_KILL_{point}": "1", "TEST_KILL_ONCE": str(tmp_path / "once")},
    ) as live:
        cookie, fields = open_form(live.port)
        fields["card"] = PAYS
        # the worker died: no answer at all
        with pytest.raises(OSError):
            request(live.port, "POST", "/orders", cookie=cookie, form=fields)
        row = the_order(servers)
        assert (row["status"], row["submission_step"]) == ("charging", "charge")
        assert provider.succeeded(row["payment_reference"]) == []
        # The customer presses the button again (gunicorn has a new worker by now).
        again = request(live.port, "POST", "/orders", cookie=cookie, form=fields)
        assert again.status == 303, again.body[:500]
    row = the_order(servers)
    assert (row["status"], row["submission_step"]) == ("paid", None)
    assert [c["id"] for c in provider.succeeded(row["payment_reference"])] == [row["charge_id"]]
    assert [c["caller"] for c in calls(log)] == ["duplicate"]


def test_killed_between_the_charge_and_its_record_the_sweeper_records_the_same_charge(
    servers, provider, tmp_path
):
    log = tmp_path / "charges.jsonl"
    with LiveServer(
        servers,
        workers=1,
        threads=2,
        **provider.env(),
        TEST_CHARGE_LOG=str(log),
        SUBMIT_ONCE_STEP_LEASE_SECONDS=LEASE_SECONDS,
        TEST_KILL_AFTER_CHARGE="1",
        TEST_KILL_ONCE=str(tmp_path / "once"),
    ) as live:
        cookie, fields = open_form(live.port)
        fields["card"] = PAYS
        with pytest.raises(OSError):
            request(live.port, "POST", "/orders", cookie=cookie, form=fields)
        row = the_order(servers)
        # charged, not recorded
        (charged,) = provider.succeeded(row["payment_reference"])
        assert (row["status"], row["charge_id"]) == ("charging", None)
        assert sweeper(servers, provider, log) == "created=1"
        row = the_order(servers)
        assert (row["status"], row["charge_id"], row["submission_step"]) == (
            "paid",
            charged["id"],
            None,
        )
        # The customer comes back to the form and presses the button again: the order.
        again = request(live.port, "POST", "/orders", cookie=cookie, form=fields)
        assert again.status == 303
    assert len(provider.succeeded(row["payment_reference"])) == 1
    assert [c["caller"] for c in calls(log)] == ["first", "sweeper"]
