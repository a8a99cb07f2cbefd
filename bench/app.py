"""What the benchmark serves: the production app plus the /baseline blueprint.

    gunicorn 'bench.app:create_app()'
"""

from __future__ import annotations

from flask import Flask

import webapp

from . import baseline


def create_app() -> Flask:
    """The real app (configured from the environment) with the baseline mounted beside it."""
    app = webapp.create_app()
    app.register_blueprint(baseline.bp)
    return app
