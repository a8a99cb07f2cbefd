"""A shop whose order form is placed once and only once.

The package in three kinds, the way a request meets them:

Infrastructure, here at the top: what every feature stands on.
    config.py  secret_rules.py   settings from the environment, checked at start-up
    db.py                        PostgreSQL: the engine, short sessions, migrations
    redis_urls.py  extensions.py Redis clients; the extension instances (Flask-Submit-Once, CSRF)
    security.py  forms.py  htmx.py   strict headers; how a form is read; htmx requests
    errors.py  error_pages.py  problems.py   every error as a page or as problem+json
    logs.py  request_log.py  metrics.py  health.py   JSON logs, /metrics, /healthz, /readyz
    mail.py                      mail the shop sends; ``flask mail outbox``
    cli.py                       ``flask init-db``; the commands listed without an environment
    gunicorn_conf.py             gunicorn's settings for production
    migrations/                  Alembic's migrations (the schema)

The order domain every channel shares: ``shop/`` (models, order rules, states and money,
placing an order, notices, operators).

Features, a package each, each registered by its ``init_app`` (its blueprint, its
``flask <feature>`` commands):
    orders/    the order form, its once-only submit, the review step, amendments;
               ``flask orders find | ship``
    cancel/    cancelling an order from its page
    refunds/   refund requests, the outbox relay and the worker; ``flask refunds …``
    payments/  the card charged once at checkout; ``flask payments reconcile``
    webhooks/  the payment provider's signed events
    api/       the idempotent JSON API; ``flask api-keys …``
    products/  the catalogue; ``flask products …``
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flask import Flask, redirect, url_for
from werkzeug.middleware.proxy_fix import ProxyFix

from . import (
    api,
    cancel,
    cli,
    config,
    db,
    errors,
    forms,
    health,
    mail,
    metrics,
    orders,
    payments,
    products,
    redis_urls,
    refunds,
    request_log,
    security,
    webhooks,
)
from .extensions import csrf, submit_once
from .shop import order_money


def shipped_folder(name: str) -> str:
    """Where ``templates`` or ``static`` lies: inside the package in a wheel (setup.py
    copies them there), next to it in a checkout or an editable install. Found from
    this file, never from the current folder."""
    package = Path(__file__).resolve().parent
    for folder in (package / name, package.parent / name):
        if folder.is_dir():
            return str(folder)
    raise RuntimeError(f"webapp/{name}/ is missing: reinstall the app (pip install .)")


def create_app(test_config: dict[str, Any] | None = None) -> Flask:
    """Build the app: defaults, then the environment, then ``test_config``."""
    app = Flask(
        __name__,
        template_folder=shipped_folder("templates"),
        static_folder=shipped_folder("static"),
    )
    try:
        app.config.update(config.from_environ())
        if test_config:
            app.config.update(test_config)
        config.finish(app.config)
    except RuntimeError as error:
        # under `flask`; else raises error
        return cli.listing_only(error, create_app)
    if app.config["TRUSTED_PROXIES"]:
        # Client address and scheme as the proxies saw them (HSTS, the HTTPS
        # Referer check, the per-client form limit). Not X-Forwarded-Host: the
        # proxy passes Host through, and a client could otherwise choose it.
        proxies = app.config["TRUSTED_PROXIES"]
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=proxies, x_proto=proxies)  # type: ignore[method-assign]

    db.init_app(app)
    payments.init_app(app)
    cli.init_app(app)
    submit_once.init_app(
        app, sessions=app.extensions["db"], client=redis_urls.make_client(app.config["REDIS_URL"])
    )
    # before the CSRF check, which cannot read a nameless form part
    forms.init_app(app)
    csrf.init_app(app)
    security.init_app(app)
    errors.init_app(app)
    orders.init_app(app)
    mail.init_app(app)
    order_money.init_app(app)
    api.init_app(app)
    webhooks.init_app(app)
    cancel.init_app(app)
    refunds.init_app(app)
    products.init_app(app)
    health.init_app(app)
    # after the features: their after_request hooks run before these (last in, first run)
    metrics.init_app(app)
    request_log.init_app(app)

    @app.get("/")
    def index():
        return redirect(url_for("orders.new"))

    return app
