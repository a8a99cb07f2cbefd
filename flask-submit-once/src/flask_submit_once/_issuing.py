"""Issuing a request's tokens: the session they are bound to, who may get one, the
limits they count against, and the Back-friendly header of the page that carries them."""

from __future__ import annotations

import functools
import ipaddress
import logging
import secrets
import time
from collections.abc import Sequence

import redis
from flask import Response, after_this_request, current_app, request, session

from . import signals
from ._errors import CrossSite, TooManyForms, Unavailable
from ._history import SHOW_AGAIN_ON_BACK
from ._limits import IssueLimit, TooManyIssued
from ._state import State

__all__ = ["client_networks", "issue", "session_id"]

_SESSION_KEY = "_submit_once_sid"
#: Tokens a session was issued before it had an id, counted with its next page.
_UNCOUNTED_KEY = "_submit_once_uncounted"
_TOKENS = "flask_submit_once.tokens"
#: An IPv6 /48 (a site) may open this many times a /64's (a subscriber's) forms.
WIDER_BUDGET = 8
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
log = logging.getLogger("flask_submit_once")


def session_id() -> str:
    """The random id this browser session's tokens are bound to (made on first use)."""
    sid = session.get(_SESSION_KEY)
    if not isinstance(sid, str):
        sid = session[_SESSION_KEY] = secrets.token_urlsafe(16)
    return sid


def issued(name: str) -> str | None:
    """The token this request already has for form ``name``, if any."""
    tokens: dict[str, str] = request.environ.get(_TOKENS, {})
    return tokens.get(name)


def keep(name: str, token: str) -> None:
    """Let form ``name`` be drawn with ``token`` in this request (the same token again)."""
    request.environ.setdefault(_TOKENS, {})[name] = token


def issue(state: State, names: Sequence[str]) -> dict[str, str]:
    """A fresh token for each form of ``names``, in one round trip, remembered for the
    rest of the request; refused or unavailable for all of them at once.

    :class:`CrossSite` (403) before Redis is touched when the request is a prefetch, or
    comes from another site other than as a top-level navigation (an iframe, an image, a
    script): another site's page must not spend its visitors' form limit.
    :class:`TooManyForms` (429) over the session's or the client's limit.
    :class:`Unavailable` (503) when Redis does not answer. A session with no id yet (a
    first view, a client that keeps no cookies) makes no counter, which would be a new
    key for one page: its tokens are counted with its next page instead.
    """
    if not_for_a_form():
        raise CrossSite()
    new_session = not isinstance(session.get(_SESSION_KEY), str)
    sid = session_id()
    per_session = int(state.setting("MAX_PER_SESSION"))
    per_client = int(state.setting("MAX_PER_CLIENT_PER_MINUTE"))
    uncounted = session.get(_UNCOUNTED_KEY, 0)
    # The session's window is the TTL: a session holds at most twice its cap in live tokens.
    session_cap = IssueLimit(
        f"session:{sid}",
        0 if new_session else per_session,
        state.store.ttl,
        uncounted=uncounted if isinstance(uncounted, int) else 0,
    )
    networks = client_networks(request.remote_addr)
    client_limits = [
        IssueLimit(f"client:{network}", per_client * (WIDER_BUDGET**n), 60)
        for n, network in enumerate(networks)
    ]
    limits = (session_cap, *client_limits)
    try:
        try:
            tokens = state.issuer.issue_many(session_id=sid, forms=names, limits=limits)
            state.degraded_since = None
        except redis.RedisError as error:
            if state.signed is None:
                raise Unavailable() from error
            tokens = _signed(state, sid, names, limits)
    except TooManyIssued as refused:
        per = "session" if refused.limit is session_cap else "client"
        raise TooManyForms(per, refused.retry_after) from None
    if new_session and per_session > 0:
        session[_UNCOUNTED_KEY] = len(names)
    elif session_cap.uncounted:
        session.pop(_UNCOUNTED_KEY, None)  # in the counter now
    made = dict(zip(names, tokens, strict=True))
    request.environ.setdefault(_TOKENS, {}).update(made)
    if request.method in ("GET", "HEAD") and not request.environ.get(_TOKENS + ".page"):
        request.environ[_TOKENS + ".page"] = True
        after_this_request(_back_shows_it_again)
    if signals.token_issued.receivers:
        app = current_app._get_current_object()  # type: ignore[attr-defined]
        for name in names:
            signals.token_issued.send(app, form=name)
    return made


def _signed(
    state: State, sid: str, names: Sequence[str], limits: Sequence[IssueLimit]
) -> list[str]:
    """Redis is away: tokens signed with the app's key, under limits counted here."""
    assert state.signed is not None
    if state.degraded_since is None:
        state.degraded_since = time.time()
        log.warning("Redis unreachable at render: forms get signed tokens")
    state.local_limits.take(limits, len(names))
    return [state.signed.issue(session_id=sid, form=name) for name in names]


def not_for_a_form() -> bool:
    """A prefetch, or another site's request that is not a top-level navigation."""
    environ: dict[str, str] = request.environ  # the raw headers: on every page with a form
    if "HTTP_SEC_PURPOSE" in environ or environ.get("HTTP_PURPOSE") == "prefetch":
        return True
    if environ.get("HTTP_SEC_FETCH_SITE") != "cross-site":
        return False
    return (
        environ.get("HTTP_SEC_FETCH_MODE", "navigate") != "navigate"
        or environ.get("HTTP_SEC_FETCH_DEST", "document") != "document"
    )


def _back_shows_it_again(response: Response) -> Response:
    """A page with a token: Back shows it again as it was, spent token and all, unless
    the view chose its own caching. Runs before the app's after_request functions."""
    if "Cache-Control" not in response.headers:
        response.headers["Cache-Control"] = SHOW_AGAIN_ON_BACK
    return response


@functools.lru_cache(maxsize=4096)  # parsed once per address, not on every page
def client_networks(address: str | None) -> tuple[str, ...]:
    """What the per-client limits count: an IPv4 address; for IPv6 the /64 (one
    subscriber) and the /48 around it (one site, a wider budget), so that a /48 does not
    hold 65,536 budgets; an IPv4 address mapped (``::ffff:a.b.c.d``) or translated by
    NAT64 (``64:ff9b::a.b.c.d``) is that IPv4 address."""
    if not address:
        return ("",)
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return (address,)
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return (str(ip.ipv4_mapped),)
        if ip in _NAT64:
            return (str(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)),)
        return tuple(str(ipaddress.ip_network(f"{ip}/{bits}", strict=False)) for bits in (64, 48))
    return (str(ip),)
