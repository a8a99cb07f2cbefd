"""Confirm through the order's email: an order's details change only from the browser
session that placed it, or from one the customer confirmed with a link sent to the
order's address (webapp/orders/confirm_by_mail.py). The development outbox is the
mailbox here (webapp/mail.py)."""

from __future__ import annotations

import logging
import re
import secrets
import smtplib
import time
from urllib.parse import urlsplit

import pytest
from sqlalchemy import text

from tests.conftest import VALID
from tests.faults.steps import open_form, submit
from tests.support.order_buttons import landed, press
from webapp import create_app, mail
from webapp.orders.confirm_by_mail import LINK_SECONDS, SENDS_PER_HOUR

EDITED = {**VALID, "quantity": "5", "address": "1 Other Street\nLeeds LS1 1AA"}
MASKED = "a•••@e•••.com"


@pytest.fixture(autouse=True)
def empty_outbox(rdb):
    rdb.delete(mail.OUTBOX_KEY)


def place(client) -> str:
    """Place VALID from ``client``'s session: the order's path."""
    return landed(submit(client, open_form(client)))


def outbox(app) -> list[mail.Mail]:
    with app.app_context():
        return mail.outbox()


def update(client, path: str, csrf: str):
    """What a browser without an Update button of its own can do: send the update form
    with a token it made up (the answer is 403, or, where it may change the order, the
    form again with a token of its own)."""
    return client.post(
        f"{path}/amendments",
        data={**EDITED, "csrf_token": csrf, "form_token": secrets.token_urlsafe(32)},
    )


def ask_for_link(client, path: str, csrf: str):
    return client.post(f"{path}/confirmation-link", data={"csrf_token": csrf})


def link_path(sent: mail.Mail) -> str:
    found = re.search(r"https?://\S+", sent.body)
    assert found, sent.body
    return urlsplit(found.group(0)).path


def quantity(servers, path: str) -> int:
    public_id = path.rsplit("/", 1)[-1]
    with servers.engine.connect() as conn:
        return conn.scalar(
            text("SELECT quantity FROM orders WHERE public_id = :id"), {"id": public_id}
        )


def test_another_browser_confirms_through_the_orders_email_and_may_then_update_it(app, servers):
    owner, stranger = app.test_client(), app.test_client()
    path = place(owner)
    csrf = open_form(stranger)["csrf_token"]
    refused = update(stranger, path, csrf)
    page = refused.get_data(as_text=True)
    assert refused.status_code == 403 and 'id="confirm-offer"' in page
    assert f'action="{path}/confirmation-link"' in page and "ada@example.com" not in page
    sent = ask_for_link(stranger, path, csrf)
    page = sent.get_data(as_text=True)
    assert sent.status_code == 200 and MASKED in page and "ada@example.com" not in page
    (confirmation,) = outbox(app)
    assert confirmation.to == "ada@example.com" and "Confirm" in confirmation.subject
    link = link_path(confirmation)
    # opening the link uses nothing up (a mail scanner may open it first)
    assert stranger.get(link).status_code == 200
    opened = stranger.get(link)
    assert opened.status_code == 200 and 'id="confirm-link"' in opened.get_data(as_text=True)
    confirmed = stranger.post(link, data={"csrf_token": csrf})
    assert (confirmed.status_code, confirmed.headers["Location"]) == (303, path)
    assert "this browser can now change your order" in stranger.get(path).get_data(as_text=True)
    again = update(stranger, path, csrf)
    assert again.status_code == 409
    landed(press(stranger, again.get_data(as_text=True), "update-order", **EDITED))
    assert quantity(servers, path) == 5
    # the link works once, in this browser or any other
    assert stranger.post(link, data={"csrf_token": csrf}).status_code == 410
    third = app.test_client()
    assert third.get(link).status_code == 410
    assert update(third, path, open_form(third)["csrf_token"]).status_code == 403


def test_a_link_expires_after_30_minutes(app, rdb, monkeypatch):
    owner, stranger = app.test_client(), app.test_client()
    path = place(owner)
    csrf = open_form(stranger)["csrf_token"]
    ask_for_link(stranger, path, csrf)
    (confirmation,) = outbox(app)
    (key,) = rdb.keys("shop:confirm-link:*")
    assert LINK_SECONDS - 5 <= rdb.ttl(key) <= LINK_SECONDS
    later = time.time() + LINK_SECONDS + 60
    monkeypatch.setattr(time, "time", lambda: later)
    link = link_path(confirmation)
    assert stranger.get(link).status_code == 410
    assert stranger.post(link, data={"csrf_token": csrf}).status_code == 410
    assert update(stranger, path, csrf).status_code == 403


def test_a_link_for_one_order_does_not_unlock_another(app, servers):
    owner, stranger = app.test_client(), app.test_client()
    first, second = place(owner), place(owner)
    csrf = open_form(stranger)["csrf_token"]
    ask_for_link(stranger, first, csrf)
    (confirmation,) = outbox(app)
    moved = link_path(confirmation).replace(first, second)
    assert stranger.get(moved).status_code == 410
    assert stranger.post(moved, data={"csrf_token": csrf}).status_code == 410
    assert update(stranger, second, csrf).status_code == 403
    # the link, refused elsewhere, still works for its own order
    assert stranger.post(link_path(confirmation), data={"csrf_token": csrf}).status_code == 303
    assert update(stranger, first, csrf).status_code == 409
    assert update(stranger, second, csrf).status_code == 403


def test_links_are_sent_a_few_times_an_hour_an_order_and_the_answer_never_says_so(app):
    owner, stranger = app.test_client(), app.test_client()
    path = place(owner)
    csrf = open_form(stranger)["csrf_token"]
    answers = [ask_for_link(stranger, path, csrf) for _ in range(SENDS_PER_HOUR + 3)]
    said = {
        (
            answer.status_code,
            re.search(r'id="confirmation-sent">(.*?)</p>', answer.get_data(as_text=True)).group(1),
        )
        for answer in answers
    }
    assert len(said) == 1 and said.pop()[0] == 200
    assert len(outbox(app)) == SENDS_PER_HOUR
    # another browser asking counts for the same order
    other = app.test_client()
    ask_for_link(other, path, open_form(other)["csrf_token"])
    assert len(outbox(app)) == SENDS_PER_HOUR


def test_an_order_that_can_no_longer_change_gets_the_same_answer_and_no_mail(app, servers):
    owner, stranger = app.test_client(), app.test_client()
    path = place(owner)
    with servers.engine.begin() as conn:
        conn.execute(text("UPDATE orders SET status = 'cancelled'"))
    csrf = open_form(stranger)["csrf_token"]
    sent = ask_for_link(stranger, path, csrf)
    assert sent.status_code == 200 and MASKED in sent.get_data(as_text=True)
    assert outbox(app) == []


def test_asking_for_a_link_needs_the_sessions_csrf_token(app):
    path = place(app.test_client())
    stranger = app.test_client()
    open_form(stranger)
    forged = stranger.post(f"{path}/confirmation-link", data={"csrf_token": "forged"})
    assert forged.status_code == 400
    assert outbox(app) == []


def test_the_operator_reads_the_outbox_and_no_log_line_holds_the_link(app, caplog):
    owner, stranger = app.test_client(), app.test_client()
    path = place(owner)
    csrf = open_form(stranger)["csrf_token"]
    with caplog.at_level(logging.DEBUG):
        ask_for_link(stranger, path, csrf)
        (confirmation,) = outbox(app)
        link = link_path(confirmation)
        stranger.get(link)
        stranger.post(link, data={"csrf_token": csrf})
    token = link.rsplit("/", 1)[-1]
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert token not in logged and "ada@example.com" not in logged and MASKED in logged
    result = app.test_cli_runner().invoke(args=["mail", "outbox"])
    assert result.exit_code == 0 and "To: ada@example.com" in result.output
    assert link in result.output


class RecordingSMTP:
    """smtplib's SMTP_SSL as a test sees it: what was logged in with and sent."""

    sent: list = []
    logins: list = []

    def __init__(self, host, port, **kwargs):
        self.host, self.port = host, port

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def login(self, user, password):
        self.logins.append((self.host, self.port, user, password))

    def send_message(self, message):
        self.sent.append(message)


def test_with_an_smtp_url_the_link_is_sent_by_smtp(make_app, monkeypatch):
    RecordingSMTP.sent, RecordingSMTP.logins = [], []
    monkeypatch.setattr(smtplib, "SMTP_SSL", RecordingSMTP)
    app = make_app(
        MAIL_SMTP_URL="smtps://shop%40fernleaf.example:pa%2Fss@smtp.example:2465",
        MAIL_FROM="Fernleaf <orders@fernleaf.example>",
    )
    owner, stranger = app.test_client(), app.test_client()
    path = place(owner)
    ask_for_link(stranger, path, open_form(stranger)["csrf_token"])
    assert RecordingSMTP.logins == [("smtp.example", 2465, "shop@fernleaf.example", "pa/ss")]
    (message,) = RecordingSMTP.sent
    assert message["To"] == "ada@example.com" and message["From"].endswith("fernleaf.example>")
    assert path + "/confirm/" in message.get_content()


class PlainSMTP(RecordingSMTP):
    """smtplib's SMTP (port 587 or 25), offering STARTTLS or not."""

    offers_starttls = True
    tls: list = []

    def ehlo(self):
        pass

    def has_extn(self, name):
        return name == "starttls" and self.offers_starttls

    def starttls(self, context=None):
        self.tls.append(self.host)


@pytest.mark.parametrize(
    ("host", "offers_starttls", "sent", "tls"),
    [
        ("smtp.example", True, True, True),
        ("smtp.example", False, False, False),
        ("127.0.0.1", False, True, False),
    ],
    ids=["starttls", "remote-without-starttls", "local-relay"],
)
def test_smtp_on_587_needs_starttls_unless_the_relay_is_this_machine(
    make_app, monkeypatch, caplog, host, offers_starttls, sent, tls
):
    """A mail that cannot be sent safely is not sent, and the customer's page is the
    same: the password and the link never cross the network in the clear."""
    PlainSMTP.sent, PlainSMTP.logins, PlainSMTP.tls = [], [], []
    PlainSMTP.offers_starttls = offers_starttls
    monkeypatch.setattr(smtplib, "SMTP", PlainSMTP)
    app = make_app(MAIL_SMTP_URL=f"smtp://shop:pw@{host}:587", MAIL_FROM="orders@fernleaf.example")
    path = place(app.test_client())
    stranger = app.test_client()
    with caplog.at_level(logging.WARNING):
        answer = ask_for_link(stranger, path, open_form(stranger)["csrf_token"])
    assert answer.status_code == 200 and MASKED in answer.get_data(as_text=True)
    assert (len(PlainSMTP.sent), bool(PlainSMTP.tls)) == (int(sent), tls)
    assert ("confirmation link not sent" in caplog.text) is not sent


PRODUCTION_KEY = secrets.token_hex(32)


@pytest.mark.parametrize(
    ("settings", "refusal"),
    [
        ({"MAIL_BACKEND": "outbox"}, "MAIL_BACKEND=outbox keeps mail in Redis"),
        ({"MAIL_SMTP_URL": "smtps://smtp.example"}, "MAIL_FROM is not set"),
        ({"MAIL_FROM": "orders@fernleaf.example"}, "MAIL_SMTP_URL is not set"),
        ({"MAIL_BACKEND": "smtp"}, "MAIL_SMTP_URL is not set"),
        ({"MAIL_SMTP_URL": "http://smtp.example", "MAIL_FROM": "a@b.example"}, "smtps://"),
        ({"MAIL_BACKEND": "pigeon"}, "MAIL_BACKEND='pigeon' is not one of"),
    ],
)
def test_production_refuses_to_start_on_incomplete_mail_settings(servers, settings, refusal):
    config = servers.config(APP_ENV="production", SECRET_KEY=PRODUCTION_KEY, **settings)
    with pytest.raises(RuntimeError, match=re.escape(refusal)):
        create_app(config)


def test_production_without_mail_settings_offers_no_link(make_app, caplog):
    with caplog.at_level(logging.WARNING):
        app = make_app(APP_ENV="production", SECRET_KEY=PRODUCTION_KEY)
    assert app.config["MAIL_BACKEND"] == "off"
    assert "mail is off" in caplog.text
