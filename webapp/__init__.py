"""A shop whose order form is placed once and only once."""

from __future__ import annotations

from importlib.util import find_spec
from typing import Any

from flask import Flask, redirect, url_for
from werkzeug.middleware.proxy_fix import ProxyFix

from . import (
    api,
    cancel,
    config,
    db,
    errors,
    health,
    metrics,
    orders,
    refunds,
    request_log,
    security,
    support,
    webhooks,
)
from .extensions import csrf, form_tokens


def installed_folder(package: str) -> str:
    """Where a data package installed with the app lies: ``webapp.templates`` and
    ``webapp.static`` (templates/ and static/ in the repository, mapped in by setup.py).
    Looked up, not imported, through the installed package, so a wheel and an editable
    install behave alike and nothing depends on the current folder."""
    spec = find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"{package} is missing: reinstall the app (pip install .)")
    return next(iter(spec.submodule_search_locations))


def create_app(test_config: dict[str, Any] | None = None) -> Flask:
    """Build the app: defaults, then the environment, then ``test_config``."""
    app = Flask(__name__, template_folder=installed_folder("webapp.templates"),
                static_folder=installed_folder("webapp.static"))
    app.config.update(config.from_environ())
    if test_config:
        app.config.update(test_config)
    config.finish(app.config)
    if app.config["TRUSTED_PROXIES"]:
        # Client address and scheme as the proxies saw them (HSTS, the HTTPS
        # Referer check, the per-client form limit). Not X-Forwarded-Host: the
        # proxy passes Host through, and a client could otherwise choose it.
        proxies = app.config["TRUSTED_PROXIES"]
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=proxies, x_proto=proxies)  # type: ignore[method-assign]

    db.init_app(app)
    form_tokens.init_app(app)
    csrf.init_app(app)
    security.init_app(app)
    errors.init_app(app)
    app.register_blueprint(orders.bp)
    api.init_app(app)
    webhooks.init_app(app)
    cancel.init_app(app)
    refunds.init_app(app)
    app.register_blueprint(health.bp)
    metrics.init_app(app)
    request_log.init_app(app)
    support.init_app(app)

    @app.get("/")
    def index():
        return redirect(url_for("orders.new"))

    return app
