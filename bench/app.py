"""What the benchmark serves: the production app plus the /baseline and /nonce blueprints.

    gunicorn 'bench.app:create_app()'
"""

from __future__ import annotations

from flask import Flask

import webapp

from . import baseline, floor, nonce


def create_app() -> Flask:
    """The real app (configured from the environment) with the baseline, the
    floor (two bare Redis commands) and the signed-nonce alternative beside it."""
    app = webapp.create_app()
    app.register_blueprint(baseline.bp)
    app.register_blueprint(nonce.bp)
    app.register_blueprint(floor.bp)
    return app
