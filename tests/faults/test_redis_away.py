"""Forms that keep working while Redis is away (the shop's default,
SUBMIT_ONCE_REDIS_AWAY_SIGN_FORMS): the order, cancel and refund forms are drawn with
signed tokens, each submit is placed once by the lock and the UNIQUE column, a signed
token works only in the session and for the form it was drawn for and only for the TTL,
and when Redis is back new forms get Redis tokens again while those drawn during the
outage still submit once, on any instance."""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import replace

from itsdangerous import URLSafeTimedSerializer
from sqlalchemy import text
from sqlalchemy.orm import Session

from flask_submit_once.testing import OnceForms, landed_on
from tests.conftest import VALID, flashed, order_page
from tests.faults.steps import form_kept, placed
from tests.faults.test_redis_faults import redis_hung
from webapp.orders import EXPIRED
from webapp.shop.order_states import transition

SIGNED = "s1."
#: What differs between two renderings of one page: the values of its hidden tokens.
TOKENS = re.compile(r'(name="(?:csrf_token|form_token)"[^>]*value=")[^"]*"')


def rows(servers, table: str) -> int:
    with servers.engine.connect() as conn:
        return conn.scalar(text(f"SELECT count(*) FROM {table}"))


def order_status(servers) -> str:
    with servers.engine.connect() as conn:
        return conn.scalar(text("SELECT status FROM orders"))


def place_order(client) -> str:
    """Place an order through the form; its page's path."""
    answer = order_page(OnceForms(client)).submit(VALID)
    assert answer.status_code == 303
    return answer.headers["Location"]


def test_with_redis_away_the_order_form_looks_the_same_and_a_double_click_places_once(
    fault_app, fault_servers
):
    app = fault_app()
    usual = app.test_client().get("/orders/new")
    fault_servers.redis.stop()
    forms = OnceForms(app.test_client())
    away = forms.client.get("/orders/new")
    assert away.status_code == 200
    # Nothing alarming: the page is the usual one, token values aside.
    assert TOKENS.sub(r"\1", away.text) == TOKENS.sub(r"\1", usual.text)
    # the details page's token, sent with the fields to the submit, as the review sends it
    page = replace(forms.page("/orders/new", away.text), url="/orders")
    assert page.token.startswith(SIGNED)
    answers = page.submit_concurrently([VALID, VALID])
    where = forms.assert_once(answers, rows=lambda: rows(fault_servers, "orders"))
    # one placed, one "already"
    assert sorted(len(flashed(a)) for a in answers) == [0, 1]
    assert forms.client.get(where).status_code == 200


def test_with_redis_away_cancel_and_refund_forms_are_shown_and_take_effect_once(
    fault_app, fault_servers
):
    client = fault_app().test_client()
    order = place_order(client)
    with Session(fault_servers.engine) as db, db.begin():
        transition(db, db.scalar(text("SELECT id FROM orders")), "pay", paid_cents=3600)
    fault_servers.redis.stop()
    forms = OnceForms(client)
    refund = forms.open(f"{order}/refund")
    assert refund.token.startswith(SIGNED)
    answers = refund.submit_concurrently([{"amount": "10"}, {"amount": "10"}])
    assert forms.assert_once(answers, rows=lambda: rows(fault_servers, "refund_requests")) == order
    cancel = forms.open(f"{order}/cancel")
    assert cancel.token.startswith(SIGNED)
    answers = cancel.submit_concurrently([{}, {}, {}])
    assert {landed_on(a) for a in answers} == {order}
    assert sorted(flashed(a)[-1] for a in answers) == [
        "already_cancelled",
        "already_cancelled",
        "cancelled",
    ]
    assert order_status(fault_servers) == "cancelled"


def test_a_signed_token_works_only_in_its_own_session_and_for_its_own_form(
    fault_app, fault_servers
):
    app = fault_app()
    fault_servers.redis.stop()
    owner, stranger = OnceForms(app.test_client()), OnceForms(app.test_client())
    mine = order_page(owner)
    theirs = order_page(stranger)
    # Pasted into another session (with that session's own CSRF token): expired, input
    # kept, a fresh token of the stranger's own; nothing placed.
    pasted = stranger.client.post(
        "/orders", data={**theirs.hidden, **VALID, "form_token": mine.token}
    )
    fresh = form_kept(pasted, 409, EXPIRED)
    assert fresh.startswith(SIGNED) and fresh != mine.token
    assert rows(fault_servers, "orders") == 0
    # Sent to another form (the cancel form of an order this session placed).
    order = place_order(owner.client)
    cancel = owner.open(f"{order}/cancel")
    wrong_form = owner.client.post(
        f"{order}/cancellation", data={**cancel.hidden, "form_token": mine.token}
    )
    assert wrong_form.status_code == 409 and order_status(fault_servers) == "placed"
    # A token whose signature was tampered with is no token of ours: 400, nothing spent.
    forged = mine.token[:-4] + ("AAAA" if not mine.token.endswith("AAAA") else "BBBB")
    assert (
        owner.client.post(
            "/orders", data={**mine.hidden, **VALID, "form_token": forged}
        ).status_code
        == 400
    )
    # The owner's own token, in its own session, still places its order once.
    assert mine.submit(VALID).status_code == 303
    assert rows(fault_servers, "orders") == 2


def test_with_redis_away_only_a_token_the_shop_issued_places_an_order(fault_app, fault_servers):
    """With Redis away no key says which tokens were issued: each token proves it by its
    MAC. Made-up tokens, and the nonce read out of a signed token's payload and sent bare,
    place nothing (the expired form, input kept); a form drawn before the outage and the
    signed form place one order each."""
    app = fault_app()
    forms = OnceForms(app.test_client())
    before = order_page(forms)
    fault_servers.redis.stop()
    during = order_page(forms)
    assert during.token.startswith(SIGNED)
    _, (nonce, _) = URLSafeTimedSerializer("any").loads_unsafe(during.token[len(SIGNED) :])
    for token in [secrets.token_urlsafe(32) for _ in range(3)] + [nonce]:
        form_kept(during.submit({**VALID, "form_token": token}), 409, EXPIRED)
    assert rows(fault_servers, "orders") == 0
    assert before.submit(VALID).status_code == 303
    assert during.submit(VALID).status_code == 303
    assert rows(fault_servers, "orders") == 2


def test_a_signed_token_older_than_the_ttl_is_expired_with_the_input_kept_and_a_fresh_token(
    fault_app, fault_servers, stopped_clock
):
    """The clock is stopped, then moved past the TTL: the signed tokens expire without a
    wait, and the fresh tokens answered live a whole TTL in Redis's own clock (with a TTL
    of 1 s, a loaded machine let one expire before the test sent it)."""
    # A CSRF token outliving the form's: what is tested is the form token's own expiry.
    app = fault_app(SUBMIT_ONCE_TTL_SECONDS=60, WTF_CSRF_TIME_LIMIT=3600)
    forms = OnceForms(app.test_client())
    fault_servers.redis.stop()
    stopped_clock(0)
    during = order_page(forms)
    stale = order_page(forms)
    # past the TTL
    stopped_clock(61)
    answer = during.submit(VALID)
    fresh = form_kept(answer, 409, EXPIRED)
    assert fresh.startswith(SIGNED)
    assert forms.page("/orders/new", answer.text).submit(VALID).status_code == 303
    # Redis back: still expired (the signed time says so), and the fresh token is Redis's.
    fault_servers.redis.start()
    answer = stale.submit(VALID)
    fresh = form_kept(answer, 409, EXPIRED)
    assert not fresh.startswith(SIGNED)
    assert forms.page("/orders/new", answer.text).submit(VALID).status_code == 303
    assert rows(fault_servers, "orders") == 2


def test_when_redis_is_back_forms_drawn_during_the_outage_submit_once_on_any_instance(
    fault_app, fault_servers
):
    """Two app instances (two processes' memories): a form drawn and placed during the
    outage, sent again after it through the other instance, lands on its order (the
    claim is new, the UNIQUE column holds); one drawn during it and first sent after
    it is placed once; new forms get Redis tokens again."""
    first, second = fault_app(), fault_app()
    forms = OnceForms(first.test_client())
    fault_servers.redis.stop()
    placed_during, sent_after = order_page(forms), order_page(forms)
    during = placed_during.submit(VALID)
    assert during.status_code == 303
    fault_servers.redis.start()
    other = forms.clone()
    other_instance = second.test_client()
    other_instance.set_cookie("session", other.get_cookie("session").value)
    again = placed_during.submit(VALID, client=other_instance)
    assert landed_on(again) == landed_on(during) and flashed(again) == ["already_placed"]
    answers = [sent_after.submit(VALID, client=other_instance), sent_after.submit(VALID)]
    assert len({landed_on(a) for a in answers}) == 1 and None not in map(landed_on, answers)
    assert len(placed(fault_servers)) == 2
    assert order_page(forms).token is not None
    assert not order_page(forms).token.startswith(SIGNED)
    assert not order_page(OnceForms(second.test_client())).token.startswith(SIGNED)


def test_a_hung_redis_costs_a_render_one_timeout_and_a_form_sent_meanwhile_is_placed_once(
    fault_app, fault_servers
):
    """Redis stops answering without closing anything (SIGSTOP). The form is drawn after
    one socket timeout, with a signed token; a form drawn before, sent meanwhile, is
    placed by the lock and the UNIQUE column (its GETDEL may run when Redis wakes), and
    sent again after, it lands on that order."""
    forms = OnceForms(fault_app().test_client())
    before = order_page(forms)
    with redis_hung(fault_servers):
        started = time.monotonic()
        during = order_page(forms)
        took = time.monotonic() - started
        first = before.submit(VALID)
    assert during.token.startswith(SIGNED)
    assert took < 5, f"{took:.1f} s: one 2 s timeout, not a hung page"
    assert first.status_code == 303
    again = before.submit(VALID)
    assert landed_on(again) == landed_on(first) and flashed(again) == ["already_placed"]
    assert during.submit(VALID).status_code == 303
    assert len(placed(fault_servers)) == 2
