"""Signals a submit sends: seams for metrics, logging and tests.

They are `blinker <https://blinker.readthedocs.io>`_ signals (Flask's own
signal library). Connect a receiver, for one app or for all::

    from submit_once.signals import submit_decided

    @submit_decided.connect_via(app)
    def count(sender, form, outcome, seconds, digest, **extra): ...

Receivers run synchronously in the request, in the order blinker picks, and
an exception a receiver raises propagates into the submit at that point. The
token itself is never sent, only its ``digest`` (safe to log by its first 12
characters, like everything in this package does).

The two signals from the runner mark the submit's critical windows: between
``token_consumed`` and ``submit_committed`` this request alone owns the token,
holds the advisory lock and has an open transaction. Duplicates wait for it;
a process killed there commits nothing, and the token stays spent.
"""

from __future__ import annotations

from blinker import Namespace

__all__ = ["submit_committed", "submit_decided", "token_consumed", "token_issued"]

_signals = Namespace()

token_issued = _signals.signal("form-token-issued", doc="""\
Sent by ``FormTokens.issue`` after a token was stored in Redis.

Sender: the Flask app. Keyword arguments: ``form`` (the form's name).
""")

token_consumed = _signals.signal("form-token-consumed", doc="""\
Sent by the runner right after the one Redis step handed this request the
token (GETDEL returned it, or a claim's ``SET NX`` succeeded), and before
``create`` runs: inside the transaction, holding the advisory lock.

Sender: the ``sender`` given to ``run_once`` / ``submit_once`` (``FormTokens``
passes the Flask app; ``None`` otherwise). Keyword arguments: ``digest``.
Also sent when ``redis_down_fallback`` lets the database decide alone.
""")

submit_committed = _signals.signal("form-submit-committed", doc="""\
Sent by the runner right after the COMMIT of the transaction that ran
``create``, before the outcome is returned (and so before any response).

Sender: as for ``token_consumed``. Keyword arguments: ``digest`` and
``result`` (what ``create`` returned).
""")

submit_decided = _signals.signal("form-submit-decided", doc="""\
Sent by ``FormTokens.submit_once`` once a submit's outcome is known.

Sender: the Flask app. Keyword arguments: ``form``, ``outcome`` (a
``Created``, ``Duplicate``, ``Expired``, ``Failed`` or ``StillRunning``),
``seconds`` (how long the submit took) and ``digest``.
""")
