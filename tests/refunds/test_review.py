"""Refunds after shipping need a person: a request on a shipped order is reserved
and waits for an operator (refunds approve / refunds reject); the worker applies
it only once approved, and the customer sees that it is waiting."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from tests.app.test_logs import json_lines
from tests.refunds.conftest import (
    all_acked,
    refunds_of,
    request,
    requests_of,
    reserved_of,
    settled,
    wait_until,
)
from tests.refunds.test_refund_form import open_refund_form, refund
from webapp.refunds.stream import STREAM
from webapp.shop.order_states import transition


@pytest.fixture
def shipped(servers, paid_order) -> tuple[int, str]:
    """(id, public id) of an order paid €36.00 and shipped."""
    order_id = paid_order(3600)
    with Session(servers.engine) as db, db.begin():
        transition(db, order_id, "ship")
        public_id = db.scalar(text("SELECT public_id FROM orders WHERE id = :id"), {"id": order_id})
    return order_id, public_id


def request_id(servers, order_id: int) -> int:
    with servers.engine.connect() as conn:
        return conn.scalar(
            text("SELECT id FROM refund_requests WHERE order_id = :o"), {"o": order_id}
        )


def test_a_refund_on_a_shipped_order_waits_for_an_operator_then_applies_once_approved(
    client, app, servers, rdb, paid_order, start_worker, shipped
):
    order_id, public_id = shipped
    response = refund(client, public_id, open_refund_form(client, public_id), "36.00")
    assert response.status_code == 303
    # A request on a paid order, made after it: once it is applied, the relay has
    # had its pass over the shipped order's request too.
    other = paid_order(3600)
    request(servers, other, 1000)
    worker = start_worker()
    wait_until(
        lambda: refunds_of(servers, other)[0] == 1 and all_acked(rdb),
        what="the paid order's request applied",
    )
    assert refunds_of(servers, order_id) == (0, 0, "shipped")
    assert [r[1:3] for r in requests_of(servers, order_id)] == [(3600, "review")]
    # set aside: nothing else can take it
    assert reserved_of(servers, order_id) == 3600
    # only the other order's message, if not trimmed yet
    assert len(rdb.xrange(STREAM)) <= 1
    page = client.get(f"/orders/{public_id}").text
    assert "<strong>waiting for review</strong>" in page
    assert "as your order has shipped, our team checks the refund before it is made" in page
    assert 'id="request-refund"' not in page

    cli = app.test_cli_runner()
    waiting = cli.invoke(args=["refunds", "reviews"])
    assert waiting.exit_code == 0 and f"order {order_id}" in waiting.output
    approved = cli.invoke(args=["refunds", "approve", str(request_id(servers, order_id))])
    assert approved.exit_code == 0, approved.output
    assert "Approved by " in approved.output and "€36.00 for order" in approved.output
    wait_until(
        lambda: settled(servers) and refunds_of(servers, order_id)[0] == 1,
        what="the approved request applied",
    )
    assert refunds_of(servers, order_id) == (1, 3600, "refunded")
    assert [r[1:3] for r in requests_of(servers, order_id)] == [(3600, "applied")]
    assert reserved_of(servers, order_id) == 0
    assert "<strong>refunded</strong>" in client.get(f"/orders/{public_id}").text
    assert worker.process.poll() is None


def test_a_rejected_refund_releases_its_reservation_and_the_customer_is_told(
    client, app, servers, shipped
):
    order_id, public_id = shipped
    assert (
        refund(client, public_id, open_refund_form(client, public_id), "10.00").status_code == 303
    )
    rejected = app.test_cli_runner().invoke(
        args=[
            "refunds",
            "reject",
            str(request_id(servers, order_id)),
            "--reason",
            "the parcel has not come back to us",
        ]
    )
    assert rejected.exit_code == 0, rejected.output
    assert [r[1:] for r in requests_of(servers, order_id)] == [
        (1000, "rejected", "the parcel has not come back to us")
    ]
    assert reserved_of(servers, order_id) == 0 and refunds_of(servers, order_id) == (
        0,
        0,
        "shipped",
    )
    page = client.get(f"/orders/{public_id}").text
    assert "<strong>not refunded</strong> — the parcel has not come back to us" in page
    assert "Up to €36.00." in client.get(f"/orders/{public_id}/refund").text


@pytest.mark.parametrize(
    ("command", "which", "message"),
    [
        ("refunds approve", "unknown", "No refund request has the id"),
        ("refunds reject", "unknown", "No refund request has the id"),
        ("refunds approve", "paid order's", "is requested, not waiting for review"),
        ("refunds reject", "rejected", "is rejected, not waiting for review"),
    ],
)
def test_approve_and_reject_refuse_what_is_not_waiting_for_review(
    app, servers, paid_order, shipped, command, which, message
):
    order_id, _ = shipped
    cli = app.test_cli_runner()
    if which == "unknown":
        target = "999999"
    elif which == "paid order's":
        other = paid_order(3600)
        request(servers, other, 100)
        target = str(request_id(servers, other))
    else:
        request(servers, order_id, 100)
        target = str(request_id(servers, order_id))
        assert cli.invoke(args=["refunds", "reject", target, "--reason", "no"]).exit_code == 0
    reason = ["--reason", "no"] if command == "refunds reject" else []
    result = cli.invoke(args=[*command.split(), target, *reason])
    assert result.exit_code == 1 and message in result.output, result.output


def test_reconcile_counts_requests_waiting_for_review_as_reserved(app, servers, shipped):
    order_id, _ = shipped
    request(servers, order_id, 1200)
    result = app.test_cli_runner().invoke(args=["refunds", "reconcile"])
    assert result.exit_code == 0, result.output
    assert "1 pending (1200)" in result.output
    assert "waiting for review:    1 requests (1200 cents)" in result.output
    assert result.output.rstrip().endswith("MATCH")


def operator_lines(stderr: str, action: str) -> list[dict]:
    """The JSON log lines (webapp/shop/operators.py) that say an operator did ``action``."""
    return [line for line in json_lines(stderr) if line.get("action") == action]


@pytest.mark.parametrize("command", ["refunds approve", "refunds reject"])
def test_approve_and_reject_record_who_did_it_in_the_row_and_the_log(
    app, servers, shipped, command
):
    order_id, _ = shipped
    request(servers, order_id, 1000)
    target = str(request_id(servers, order_id))
    reason = (
        ["--reason", "the parcel has not come back to us"] if command == "refunds reject" else []
    )
    result = app.test_cli_runner().invoke(
        args=[*command.split(), target, *reason, "--by", " Grace Hopper "]
    )
    assert result.exit_code == 0, result.output
    assert "by Grace Hopper:" in result.stdout
    with servers.engine.connect() as conn:
        assert (
            conn.scalar(
                text("SELECT reviewed_by FROM refund_requests WHERE id = :id"), {"id": int(target)}
            )
            == "Grace Hopper"
        )
    (line,) = operator_lines(result.stderr, command)
    assert line["operator"] == "Grace Hopper" and line["refund_request"] == int(target)
    assert line["logger"] == "webapp.shop.operators" and line["level"] == "INFO"


@pytest.mark.parametrize(
    ("env", "recorded"),
    [
        # sudo flask …: the person behind it
        ({"SUDO_USER": "alice", "LOGNAME": "root"}, "alice"),
        # the login user (getpass)
        ({"SUDO_USER": None, "LOGNAME": "bob"}, "bob"),
    ],
)
def test_without_by_the_operator_is_sudo_user_else_the_login_user(
    app, servers, shipped, env, recorded
):
    order_id, _ = shipped
    request(servers, order_id, 1000)
    target = str(request_id(servers, order_id))
    result = app.test_cli_runner().invoke(args=["refunds", "approve", target], env=env)
    assert result.exit_code == 0, result.output
    with servers.engine.connect() as conn:
        assert (
            conn.scalar(
                text("SELECT reviewed_by FROM refund_requests WHERE id = :id"), {"id": int(target)}
            )
            == recorded
        )
    assert operator_lines(result.stderr, "refunds approve")[0]["operator"] == recorded


@pytest.mark.parametrize(
    ("reason", "said"),
    [
        (None, "--reason is required"),
        ("   ", "give 1 to 500 printable characters"),
        ("x" * 501, "give 1 to 500 printable characters"),
        ("line one\x1b[2J", "give 1 to 500 printable characters"),
    ],
)
def test_reject_refund_without_a_reason_is_refused_and_changes_nothing(
    app, servers, shipped, reason, said
):
    """Before: without --reason it succeeded, and the customer read a default text."""
    order_id, _ = shipped
    request(servers, order_id, 1000)
    target = str(request_id(servers, order_id))
    result = app.test_cli_runner().invoke(
        args=["refunds", "reject", target, *(["--reason", reason] if reason is not None else [])]
    )
    assert result.exit_code == 2, result.output
    assert said in result.output
    assert [r[1:] for r in requests_of(servers, order_id)] == [(1000, "review", None)]
    assert reserved_of(servers, order_id) == 1000


@pytest.mark.parametrize("by", ["", "   ", "x" * 101, "eve\nINFO forged line"])
def test_a_name_that_cannot_be_recorded_is_refused_before_anything_is_written(
    app, servers, shipped, by
):
    order_id, _ = shipped
    request(servers, order_id, 1000)
    result = app.test_cli_runner().invoke(
        args=["refunds", "approve", str(request_id(servers, order_id)), "--by", by]
    )
    assert result.exit_code == 2 and "printable characters" in result.output
    assert [r[2] for r in requests_of(servers, order_id)] == ["review"]
