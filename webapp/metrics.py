"""Prometheus metrics at /metrics, correct under gunicorn's many worker processes.

Multi-process mode: set ``PROMETHEUS_MULTIPROC_DIR`` to an empty directory that
every worker can write to *before* gunicorn starts (and empty it at each start);
each worker then writes its samples there and /metrics sums them. Without it the
numbers are those of the one worker that answered. See docs/DEPLOY.md.

Who may read it: with ``METRICS_TOKEN`` set, only a request carrying
``Authorization: Bearer <METRICS_TOKEN>`` (others get 401); unset, /metrics is
a 404 in production and open in development and testing.

Every label value comes from a fixed set, so no request can add series: the
form's kind (the endpoint it is sent to: ``orders.create``, ``cancel.cancel``,
``refunds.create``; never the order key that a cancel or refund form's name carries),
the route's rule (never the path), the method (anything outside :data:`METHODS` is
``OTHER``), and the channel an order came through (:data:`CHANNELS`).

``orders_placed_total{channel}`` counts orders whose INSERT committed, whatever
placed them: it watches the app's sessions (SQLAlchemy's session events, see
:func:`init_app`), so the order form and the JSON API are counted alike, a
rolled-back order is not, and a duplicate (no INSERT) is not.

``submit_once_degraded`` is 1 while a worker draws forms with signed tokens because
Redis was away at its last render (``SUBMIT_ONCE_REDIS_AWAY_SIGN_FORMS``); under
gunicorn the page shows the highest of the live workers' values.

What the design can tell apart, and what it cannot: a token pasted into another
session names a Redis key that does not exist (the key is a digest of form,
session and token), so it is counted with the expired and unknown ones
(``reason="expired_or_unknown"``). Only a submit whose session cookie is missing
or different *and* whose CSRF check therefore fails is counted as
``reason="session_mismatch"``.
"""

from __future__ import annotations

import os
import time

from flask import Blueprint, Flask, Response, abort, current_app, g, request, request_started
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.multiprocess import MultiProcessCollector
from sqlalchemy import event
from sqlalchemy.orm import Session, UOWTransaction

from flask_submit_once import Outcome, signals

from .extensions import submit_once
from .secret_rules import metrics_access
from .shop.models import Order

bp = Blueprint("metrics", __name__)

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
#: Where an order came from: the HTML order form, or an API client.
CHANNELS = ("form", "api")

if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    # gunicorn's master imports this package (for webapp.gunicorn_conf) before its
    # on_starting hook has made the directory, and an unlabelled metric writes at import.
    os.makedirs(os.environ["PROMETHEUS_MULTIPROC_DIR"], exist_ok=True)

TOKENS_ISSUED = Counter(
    "submit_once_tokens_issued", "Form tokens issued (one per rendered form).", ["form"]
)
TOKENS_CONSUMED = Counter(
    "submit_once_tokens_consumed", "Form tokens consumed by a GETDEL that won.", ["form"]
)
DUPLICATES = Counter(
    "submit_once_duplicates",
    "Duplicate submits sent to the first submit's result.",
    ["form", "waited"],
)
DUPLICATE_WAIT = Histogram(
    "submit_once_duplicate_wait_seconds",
    "How long duplicates that found the first submit still running waited for it.",
    ["form"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
REJECTED = Counter(
    "submit_once_rejected",
    "Submits refused for their token: expired_or_unknown (includes tokens from "
    "another session: by design the two cannot be told apart), first_failed, "
    "still_running, session_mismatch (caught by the CSRF check), cross_site "
    "(a forged submit from another site).",
    ["form", "reason"],
)
ORDERS_PLACED = Counter(
    "orders_placed",
    "Orders committed, by channel: form (the order form) or api (the JSON API).",
    ["channel"],
)
# both series exist from the start, at 0
for _channel in CHANNELS:
    ORDERS_PLACED.labels(_channel)
#: Where a session keeps the channels of the orders its transaction inserted.
_PLACED = "metrics.orders_placed"
#: Per process; the page shows the highest of the live workers' (1: one draws signed forms).
DEGRADED = Gauge(
    "submit_once_degraded",
    "1 while this process draws forms with signed tokens "
    "because Redis was away at its last try (their submits are decided by the "
    "lock and the UNIQUE column alone); 0 once Redis answers a render.",
    multiprocess_mode="livemax",
)
REQUEST_SECONDS = Histogram(
    "http_request_duration_seconds", "Request latency by route.", ["method", "route", "status"]
)


def init_app(app: Flask) -> None:
    app.register_blueprint(bp)
    # A signal, not before_request: CSRF refusals raise in an earlier before_request.
    request_started.connect(_start_timer, app)
    app.after_request(_observe_request)
    signals.token_issued.connect(_on_issue, app)
    signals.submit_decided.connect(_on_submit, app)
    # Orders are counted when their INSERT commits, whichever channel placed them.
    # webapp.db.init_app made it
    sessions = app.extensions["db"]
    event.listen(sessions, "after_flush", _note_orders)
    event.listen(sessions, "after_commit", _count_orders)
    event.listen(sessions, "after_rollback", _forget_orders)


def count_session_mismatch(endpoint: str, reason: str | None = None) -> str:
    """A submit to ``endpoint`` failed the CSRF/session check: ``cross_site`` (it came
    from another site) or ``session_mismatch``; returns which."""
    reason = reason or "session_mismatch"
    REJECTED.labels(form_kind(endpoint), reason).inc()
    return reason


def form_kind(form: str) -> str:
    """``cancel.cancel:public_id=<order key>`` -> ``cancel.cancel``: the kind of form (the
    endpoint it is sent to), never which order."""
    return form.partition(":")[0]


@bp.get("/metrics")
def metrics():
    _authorize()
    _note_degraded()
    registry = REGISTRY
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
    return Response(
        generate_latest(registry),
        headers={"Content-Type": CONTENT_TYPE_LATEST, "Cache-Control": "no-store"},
    )


def _authorize() -> None:
    access = metrics_access(
        current_app.config.get("METRICS_TOKEN"),
        current_app.config["APP_ENV"],
        request.headers.get("Authorization", ""),
    )
    if access == "off":
        abort(404)
    if access == "refused":
        abort(
            Response(
                "A bearer token is required.\n",
                401,
                {
                    "WWW-Authenticate": 'Bearer realm="metrics"',
                    "Cache-Control": "no-store",
                    "Content-Type": "text/plain; charset=utf-8",
                },
            )
        )


def _on_issue(app: Flask, *, form: str, **_: object) -> None:
    TOKENS_ISSUED.labels(form_kind(form)).inc()


def _on_submit(app: Flask, *, form: str, outcome: Outcome, seconds: float, **_: object) -> None:
    form = form_kind(form)
    match outcome:
        case Outcome(kind="created"):
            TOKENS_CONSUMED.labels(form).inc()
        case Outcome(kind="duplicate" | "changed", waited=waited):
            DUPLICATES.labels(form, str(waited).lower()).inc()
            if waited:
                DUPLICATE_WAIT.labels(form).observe(seconds)
        case Outcome(kind="refused" | "failed" | "unconfirmed"):
            TOKENS_CONSUMED.labels(form).inc()
        case Outcome(kind="expired", waited=True):
            REJECTED.labels(form, "first_failed").inc()
        case Outcome(kind="expired"):
            REJECTED.labels(form, "expired_or_unknown").inc()
        case Outcome(kind="still_running"):
            REJECTED.labels(form, "still_running").inc()


def _note_orders(db: Session, _flush: UOWTransaction) -> None:
    """Orders this flush inserted (``db.new`` still lists them here), kept until the
    transaction ends."""
    placed = db.info.setdefault(_PLACED, [])
    placed += [
        "api" if row.api_client_id is not None else "form"
        for row in db.new
        if isinstance(row, Order)
    ]


def _count_orders(db: Session) -> None:
    for channel in db.info.pop(_PLACED, ()):
        ORDERS_PLACED.labels(channel).inc()


def _forget_orders(db: Session) -> None:
    db.info.pop(_PLACED, None)


def _start_timer(app: Flask, **_: object) -> None:
    g.request_started = time.perf_counter()


def _note_degraded() -> None:
    DEGRADED.set(1 if submit_once.degraded else 0)


def _observe_request(response: Response) -> Response:
    # after every request: the render that found Redis away included
    _note_degraded()
    started = g.get("request_started")
    if started is not None:
        # The rule (/orders/<public_id>), never the path: bounded label values, no order ids.
        route = request.url_rule.rule if request.url_rule else "unmatched"
        method = request.method if request.method in METHODS else "OTHER"
        REQUEST_SECONDS.labels(method, route, str(response.status_code)).observe(
            time.perf_counter() - started
        )
    return response
