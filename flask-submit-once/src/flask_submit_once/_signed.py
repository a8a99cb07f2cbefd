"""Tokens the server can check without Redis, for forms drawn while Redis is away.

With ``SUBMIT_ONCE_SIGNED_WHEN_REDIS_AWAY``, a form rendered when Redis cannot be reached
still gets a token: ``s1.`` and a payload signed with the app's secret key (itsdangerous,
Flask's own signer), carrying a random nonce, a digest of the form and session it is
bound to, and the time it was issued; nothing in it is a secret, and nothing of the
session or the form is in the clear. Its digest is made from the nonce exactly as an
issued token's is, so the UNIQUE column and the lock treat both alike. What is lost while
Redis is away, and how the rest holds:

* spending it: a signed token is not in Redis to be GETDEL'd. Its submit claims its
  digest there (``SET NX``) when Redis answers; when it does not, the lock and the UNIQUE
  column decide alone (find, then create), so a double submit still makes one row and
  both land on it. A signed token whose submit failed can be submitted again;
* expiry comes from the signed issue time (``SUBMIT_ONCE_TTL``), not from a Redis TTL;
* the per-session and per-client limits are counted in this process only (bounded).
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets

from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer

from ._errors import BadFormToken
from ._tokens import TOKEN_BYTES

__all__ = ["PREFIX", "SignedExpired", "SignedTokens", "is_signed"]

PREFIX = "s1."
_SHAPE = re.compile(r"s1\.[A-Za-z0-9_.-]{40,400}")
_SALT = "flask-submit-once signed form token"


def is_signed(token: object) -> bool:
    """Whether ``token`` has the shape of a signed token (not whether it is good)."""
    return isinstance(token, str) and _SHAPE.fullmatch(token) is not None


class SignedExpired(Exception):
    """A signed token older than the TTL, or bound to another form or session."""


class SignedTokens:
    """Make and open signed tokens with the app's secret key."""

    def __init__(self, secret_key: str | bytes, ttl: int) -> None:
        self.serializer = URLSafeTimedSerializer(secret_key, salt=_SALT)
        self.ttl = ttl

    def issue(self, *, session_id: str, form: str) -> str:
        nonce = secrets.token_urlsafe(TOKEN_BYTES)
        return PREFIX + self.serializer.dumps([nonce, _binding(session_id, form)])

    def nonce(self, token: str, *, session_id: str, form: str) -> str:
        """The nonce of a good token for this form and session: what its digest is made
        from. :class:`SignedExpired` when it is too old or bound elsewhere (answered as
        an expired form), :class:`~flask_submit_once.BadFormToken` when it was not signed
        here (400)."""
        try:
            nonce, binding = self.serializer.loads(token[len(PREFIX) :], max_age=self.ttl)
        except SignatureExpired:
            raise SignedExpired() from None
        except (BadSignature, ValueError, TypeError):
            raise BadFormToken() from None
        if binding != _binding(session_id, form) or not isinstance(nonce, str):
            raise SignedExpired()
        return nonce


def _binding(session_id: str, form: str) -> str:
    material = "\x00".join((form, session_id)).encode()
    return base64.urlsafe_b64encode(hashlib.sha256(material).digest()).decode()[:22]
