"""The suite's apps as gunicorn serves them, for the storms over real HTTP
(test_storms_over_gunicorn.py)::

    gunicorn --chdir tests 'serve_gunicorn:create_app("letters")'

``"letters"``: signup_app.py (the referral letter upload, the sign-up in two steps);
``"edits"``: edits_app.py (a patient's address, a ``VersionedMixin`` row). The servers come
from ``SUBMIT_ONCE_TEST_REDIS_URL`` and ``SUBMIT_ONCE_TEST_DATABASE_URL``. Every answer
says which worker process gave it (``X-Worker``), so a test can send a request to the
worker that saw a submit, or to the other one.
"""

from __future__ import annotations

import os

from flask import Flask, Response
from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker

import edits_app
import signup_app


def create_app(kind: str) -> Flask:
    sessions = sessionmaker(create_engine(os.environ["SUBMIT_ONCE_TEST_DATABASE_URL"]))
    # A storm comes from one address: the per-address cap would count it, not the forms.
    config = {
        "REDIS_URL": os.environ["SUBMIT_ONCE_TEST_REDIS_URL"],
        "SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE": 0,
    }
    maker = {"letters": signup_app.create_app, "edits": edits_app.create_app}[kind]
    app = maker(sessions, **config)

    @app.after_request
    def say_which_worker(response: Response) -> Response:
        response.headers["X-Worker"] = str(os.getpid())
        return response

    return app
