"""Signals a submit sends: seams for metrics, logging and tests.

They are `blinker <https://blinker.readthedocs.io>`_ signals (Flask's own signal
library). Connect a receiver for one app::

    from flask_submit_once import signals

    @signals.submit_decided.connect_via(app)
    def count(sender, form, outcome, seconds, **extra): ...

Receivers run in the request, synchronously; an exception a receiver raises propagates
into the submit at that point. The token itself is never sent, only its ``digest`` (safe
to log by its first 12 characters). Between ``token_consumed`` and ``submit_committed``
this request alone owns the token, holds the submit's lock and has an open transaction:
duplicates wait for it, and a process killed there commits nothing.
"""

from __future__ import annotations

from blinker import Namespace

__all__ = ["submit_committed", "submit_decided", "token_consumed", "token_issued"]

_signals = Namespace()

token_issued = _signals.signal(
    "submit-once-token-issued",
    doc="""Sent after a token was issued for a rendering of a form: stored in Redis, or signed
while Redis is away (``SUBMIT_ONCE_REDIS_AWAY_SIGN_FORMS``).

Sender: the Flask app. Keyword arguments: ``form`` (the form's name).
""",
)

token_consumed = _signals.signal(
    "submit-once-token-consumed",
    doc="""Sent right after the one Redis step handed this request the token (``GETDEL`` returned
it, or a claim's ``SET NX`` succeeded) and before the view runs: inside the transaction,
holding the submit's lock. Also sent when Redis is away and the database decides alone.

Sender: the Flask app. Keyword arguments: ``digest``.
""",
)

submit_committed = _signals.signal(
    "submit-once-committed",
    doc="""Sent right after the COMMIT of the transaction the view's work ran in, before the
answer is made.

Sender: the Flask app. Keyword arguments: ``digest`` and ``result`` (what the view
returned).
""",
)

submit_decided = _signals.signal(
    "submit-once-decided",
    doc="""Sent once a submit's outcome is known, before its answer is made: every outcome,
an outage's 503 (``unavailable``, its ``error`` what did not answer) too.

Sender: the Flask app. Keyword arguments: ``form`` (its name), ``outcome`` (an
:class:`~flask_submit_once.Outcome`), ``seconds`` (how long the submit took) and
``digest``.
""",
)
