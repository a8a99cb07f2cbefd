"""Tokens for pages: the session and form they are bound to, who may get one, the limits
they count against, signed tokens while Redis is away, and the Back-friendly page that
carries them.

Each limit is a counter per window of the clock, and the counters and the tokens' SETs
are one command, one round trip (a Cluster, whose keys live on different nodes, gets
them as one pipeline instead)::

    EVALSHA <issue> <token keys...> <counter keys...>
        GET each counter; one the new tokens would take over its limit: stop, nothing written
        INCRBY each counter (EXPIRE it with its first count)
        SET each token key 1 EX <ttl> NX

A count kept in a cookie is the client's to drop; these are kept in Redis, and the
client's address is counted as well as its session, so a flood of form views without
cookies cannot fill Redis either. Only digests of who is counted reach Redis.

**Signed tokens.** With ``SUBMIT_ONCE_REDIS_AWAY_SIGN_FORMS``, a form rendered when Redis
cannot be reached still gets a token: ``s1.`` and a payload signed with the app's secret
key (itsdangerous, Flask's own signer), carrying a random nonce, a digest of the form and
session it is bound to, and the time it was issued; nothing in it is a secret, and nothing
of the session or the form is in the clear. Its digest is made from the nonce exactly as
an issued token's is, so the UNIQUE column and the lock treat both alike; the nonce itself
carries no MAC, so sent bare it is refused as a token never issued (the signed token's
expiry cannot be skipped by sending its nonce alone). What is lost
while Redis is away, and how the rest holds:

* consuming it: a signed token is not in Redis to be GETDEL'd. Its submit claims its
  digest there (``SET NX``) when Redis answers; when it does not, the lock and the UNIQUE
  column decide alone (find, then create), so a double submit still makes one row and
  both land on it. A signed token whose submit failed can be submitted again;
* expiry comes from the signed issue time (``SUBMIT_ONCE_TTL_SECONDS``), not from a Redis TTL;
* the per-session and per-client limits are counted in this process only (bounded).

**Back shows a form exactly as it was rendered, used token and all.** A user who goes
back to a form after submitting it and submits it again must land on the result, not make
a second one: the page they go back to must carry the token they already used. Browsers
show a page again from their cache on Back and Forward (without asking the server) when
it is ``no-cache`` (never when ``no-store``), but only while its ``Vary`` headers still
match. Flask adds ``Vary: Cookie`` to every response that sets or reads the session, and
the form's first rendering had no cookie yet, so Back would fetch a fresh form with a
fresh token instead (and the browser would type the old input back into it).

Pages sent ``private, no-cache`` (:data:`SHOW_AGAIN_ON_BACK`: what every page that issued
a form token is sent with, unless its view chose a ``Cache-Control``) go out without
``Vary: Cookie`` when the app uses :class:`BackFriendlySessionInterface`: only the user's
own browser stores them, and outside history navigation it always fetches them anew (they
have no validators), so the header only changes what Back shows. One more condition is
the app's: the form must be sent to another URL than the page it is on (``GET /signup``
renders, ``POST /signup/send`` submits), since a browser drops its cached copy of a URL
that a POST went to.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import ipaddress
import logging
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis
from flask import Flask, Response, after_this_request, current_app, request, session
from flask.sessions import SecureCookieSessionInterface, SessionMixin
from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer
from redis.cluster import RedisCluster

from . import signals
from ._errors import CrossSiteError, FormTokenError, TooManyFormsError, UnavailableError
from ._tokens import TOKEN_BYTES, TokenStore

if TYPE_CHECKING:
    from ._extension import State

__all__ = [
    "NAME_ATTRIBUTE",
    "SHOW_AGAIN_ON_BACK",
    "BackFriendlySessionInterface",
    "Limit",
    "LimitedTokens",
    "LocalLimits",
    "SignedExpired",
    "SignedTokens",
    "OverLimit",
    "carry_token",
    "binding",
    "client_networks",
    "existing_session_id",
    "form_name",
    "is_signed",
    "request_token",
    "reuse_token",
    "tokens_for_page",
    "session_id",
]

log = logging.getLogger("flask_submit_once")

_SESSION_KEY = "_submit_once_sid"
#: Tokens a session was issued before it had an id, counted with its next page.
_UNCOUNTED_KEY = "_submit_once_uncounted"
_TOKENS = "flask_submit_once.tokens"
#: An IPv6 /48 (a site) may open this many times a /64's (a subscriber's) forms.
WIDER_BUDGET = 8
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
#: Where a protected view keeps the name its decorator was given, if any.
NAME_ATTRIBUTE = "_submit_once_name"
#: Cache-Control for a page that Back may show again as it was.
SHOW_AGAIN_ON_BACK = "private, no-cache"


# What a token is bound to


def session_id() -> str:
    """The random id this browser session's tokens are bound to (made on first use)."""
    sid = existing_session_id()
    if sid is None:
        sid = session[_SESSION_KEY] = secrets.token_urlsafe(16)
    return sid


def existing_session_id() -> str | None:
    """This browser session's id, if it was given one."""
    sid = session.get(_SESSION_KEY)
    return sid if isinstance(sid, str) else None


def binding(session_id: str, form: str) -> str:
    """What a signed value is bound to: one form in one browser session (22 characters;
    neither can be read back from it)."""
    material = "\x00".join((form, session_id)).encode()
    return base64.urlsafe_b64encode(hashlib.sha256(material).digest()).decode()[:22]


def form_name(endpoint: str, values: Mapping[str, Any] | None = None) -> str:
    """What a token is bound to: the form's name (the endpoint it is sent to, unless its
    decorator named it) and the values of its URL (``cancel`` for order 17 is another
    form than for order 18)."""
    view = current_app.view_functions.get(endpoint)
    base = getattr(view, NAME_ATTRIBUTE, None) or endpoint
    if not values:
        return base
    return base + "".join(f":{name}={values[name]}" for name in sorted(values))


# This request's tokens


def request_token(name: str) -> str | None:
    """The token this request already has for form ``name``, if any."""
    tokens: dict[str, str] = request.environ.get(_TOKENS, {})
    return tokens.get(name)


def reuse_token(name: str, token: str) -> None:
    """Let form ``name`` be drawn with ``token`` in this request (the same token again)."""
    request.environ.setdefault(_TOKENS, {})[name] = token


def carry_token(name: str, token: str) -> None:
    """Draw form ``name`` with ``token``, issued on an earlier step's page and sent with
    this step: the page is shown again on Back as it was, like a page that issued it."""
    reuse_token(name, token)
    _page_shows_again_on_back()


def tokens_for_page(state: State, names: Sequence[str]) -> dict[str, str]:
    """A fresh token for each form of ``names``, in one round trip, remembered for the
    rest of the request; refused or unavailable for all of them at once.

    :class:`CrossSiteError` (403) before Redis is touched when the request is a prefetch, or
    comes from another site other than as a top-level navigation (an iframe, an image, a
    script): another site's page must not consumable its visitors' form limit.
    :class:`TooManyFormsError` (429) over the session's or the client's limit.
    :class:`UnavailableError` (503) when Redis does not answer. A session with no id yet (a
    first view, a client that keeps no cookies) makes no counter, which would be a new
    key for one page: its tokens are counted with its next page instead.
    """
    if not_for_a_form():
        raise CrossSiteError()
    new_session = existing_session_id() is None
    sid = session_id()
    per_session = int(state.setting("MAX_FORMS_PER_SESSION"))
    per_client = int(state.setting("MAX_FORMS_PER_CLIENT_PER_MINUTE"))
    uncounted = session.get(_UNCOUNTED_KEY, 0)
    # The session's window is the TTL: a session holds at most twice its cap in live tokens.
    session_cap = Limit(
        f"session:{sid}",
        0 if new_session else per_session,
        state.store.ttl,
        uncounted=uncounted if isinstance(uncounted, int) else 0,
    )
    networks = client_networks(request.remote_addr)
    client_limits = [
        Limit(f"client:{network}", per_client * (WIDER_BUDGET**n), 60)
        for n, network in enumerate(networks)
    ]
    limits = (session_cap, *client_limits)
    try:
        try:
            tokens = state.limited_tokens.create_many(session_id=sid, forms=names, limits=limits)
            state.degraded_since = None
        except redis.RedisError as error:
            if state.signed is None:
                raise UnavailableError() from error
            tokens = _signed(state, sid, names, limits)
    except OverLimit as refused:
        per = "session" if refused.limit is session_cap else "client"
        raise TooManyFormsError(per, refused.retry_after) from None
    if new_session and per_session > 0:
        session[_UNCOUNTED_KEY] = len(names)
    elif session_cap.uncounted:
        # In the counter now.
        session.pop(_UNCOUNTED_KEY, None)
    made = dict(zip(names, tokens, strict=True))
    request.environ.setdefault(_TOKENS, {}).update(made)
    if request.method in ("GET", "HEAD"):
        _page_shows_again_on_back()
    if signals.token_issued.receivers:
        app = current_app._get_current_object()  # type: ignore[attr-defined]
        for name in names:
            signals.token_issued.send(app, form=name)
    return made


def _signed(state: State, sid: str, names: Sequence[str], limits: Sequence[Limit]) -> list[str]:
    """Redis is away: tokens signed with the app's key, under limits counted here."""
    assert state.signed is not None
    if state.degraded_since is None:
        state.degraded_since = time.time()
        log.warning("Redis unreachable at render: forms get signed tokens")
    state.local_limits.count(limits, len(names))
    return [state.signed.sign(session_id=sid, form=name) for name in names]


def not_for_a_form() -> bool:
    """A prefetch, or another site's request that is not a top-level navigation."""
    # The raw headers: this runs on every page with a form.
    environ: dict[str, str] = request.environ
    if "HTTP_SEC_PURPOSE" in environ or environ.get("HTTP_PURPOSE") == "prefetch":
        return True
    if environ.get("HTTP_SEC_FETCH_SITE") != "cross-site":
        return False
    return (
        environ.get("HTTP_SEC_FETCH_MODE", "navigate") != "navigate"
        or environ.get("HTTP_SEC_FETCH_DEST", "document") != "document"
    )


# Limits


@dataclass(frozen=True)
class Limit:
    """At most ``most`` tokens per ``seconds`` for whoever ``who`` names (0: no limit).
    Windows are aligned to multiples of ``seconds``, so any span of ``seconds`` holds at
    most twice ``most``. ``uncounted``: tokens issued under it before its counter could
    be kept (a session's first page, before it had an id), added with this issue."""

    who: str
    most: int
    seconds: int = 60
    uncounted: int = 0


class OverLimit(Exception):
    """``limit`` refused the tokens; none was left behind."""

    def __init__(self, limit: Limit, retry_after: int) -> None:
        super().__init__(f"too many tokens issued; retry after {retry_after} s")
        self.limit, self.retry_after = limit, retry_after


#: KEYS: the n tokens, then one counter per limit. ARGV[1] n, ARGV[2] the tokens' TTL,
#: then per limit its most, its counter's TTL and what to add. Returns 0 when the tokens
#: are set, the refusing limit's 1-based number, or -1 on the impossible collision. Every
#: limit is checked before anything is written; a script runs whole, so a counter never
#: lives without its TTL.
_CREATE_COUNTED = """
local n = tonumber(ARGV[1])
local limits = #KEYS - n
for j = 1, limits do
  local count = tonumber(redis.call('GET', KEYS[n + j]) or '0')
  if count + tonumber(ARGV[3 * j + 2]) > tonumber(ARGV[3 * j]) then return j end
end
for j = 1, limits do
  local add = tonumber(ARGV[3 * j + 2])
  if redis.call('INCRBY', KEYS[n + j], add) == add then
    redis.call('EXPIRE', KEYS[n + j], ARGV[3 * j + 1])
  end
end
for i = 1, n do
  if not redis.call('SET', KEYS[i], '1', 'EX', ARGV[2], 'NX') then return -1 end
end
return 0
"""


class LimitedTokens:
    """Issues a store's tokens under limits, one round trip a page."""

    def __init__(self, store: TokenStore) -> None:
        self.store = store
        # EVALSHA, and SCRIPT LOAD again when Redis forgot it (a restart, a flush).
        self._script = store.client.register_script(_CREATE_COUNTED)

    def create_many(
        self, *, session_id: str, forms: Sequence[str], limits: Sequence[Limit] = ()
    ) -> list[str]:
        """A token for each of ``forms`` (in order), counted against ``limits``, in one
        round trip. Over a limit, none is issued and :class:`OverLimit` says which
        limit and when its window ends."""
        store = self.store
        tokens = [store.new_token(session_id=session_id, form=form) for form in forms]
        keys = [
            store.key(store.digest(token, session_id=session_id, form=form))
            for token, form in zip(tokens, forms, strict=True)
        ]
        limits = [limit for limit in limits if limit.most > 0]
        if not keys:
            return tokens
        now = int(time.time())
        counters = _counters(store, limits, now, len(keys))
        if len(keys) == 1 and not counters:
            refused = 0 if store.client.set(keys[0], 1, ex=store.ttl, nx=True) else -1
        elif isinstance(store.client, RedisCluster):
            refused = _in_pipeline(store, keys, counters)
        else:
            refused = int(
                self._script(
                    keys=[*keys, *(counter for counter, *_ in counters)],
                    args=[
                        len(keys),
                        store.ttl,
                        *(n for _, most, life, add in counters for n in (most, life, add)),
                    ],
                )
            )
        if refused < 0:
            raise RuntimeError("token collision: the random source is broken")
        if refused:
            limit = limits[refused - 1]
            raise OverLimit(limit, retry_after=limit.seconds - now % limit.seconds)
        return tokens


def _counters(
    store: TokenStore, limits: Sequence[Limit], now: int, tokens: int
) -> list[tuple[str, int, int, int]]:
    """(key, most, TTL, what to add) of each limit's counter for the window ``now`` is
    in. A counter lives two windows, so it never ends inside its own, and longer than any
    token of its window: under ``volatile-ttl`` eviction a counter never goes before the
    tokens it counted."""
    return [
        (
            f"{store.prefix}:issued:{_short(limit.who)}:{now // limit.seconds}",
            limit.most,
            max(2 * limit.seconds, store.ttl + limit.seconds),
            tokens + limit.uncounted,
        )
        for limit in limits
    ]


def _short(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:16]


def _in_pipeline(
    store: TokenStore, keys: list[str], counters: list[tuple[str, int, int, int]]
) -> int:
    """The script's work for a Cluster, in one pipeline: the tokens are set first and
    deleted when a limit refuses them."""
    pipe = store.client.pipeline(transaction=False)
    for counter, _, life, add in counters:
        pipe.incrby(counter, add)
        # Every time: INCRBY alone could make a key with no TTL.
        pipe.expire(counter, life)
    for key in keys:
        pipe.set(key, 1, ex=store.ttl, nx=True)
    replies = pipe.execute()
    for number, (_, most, _, _) in enumerate(counters, start=1):
        if int(replies[2 * number - 2]) > most:
            store.client.delete(*keys)
            return number
    return 0 if all(replies[2 * len(counters) :]) else -1


class LocalLimits:
    """The same limits counted in this process alone, for the tokens issued while Redis
    is away: at most ``size`` counters, the oldest forgotten first."""

    def __init__(self, size: int = 10_000) -> None:
        self.size = size
        self._counts: OrderedDict[tuple[str, int], int] = OrderedDict()
        self._lock = threading.Lock()

    def count(self, limits: Sequence[Limit], tokens: int) -> None:
        """Count ``tokens`` against each limit, or none when one would pass its most
        (:class:`OverLimit`)."""
        now = int(time.time())
        limits = [limit for limit in limits if limit.most > 0]
        keys = [(limit.who, now // limit.seconds) for limit in limits]
        with self._lock:
            for limit, key in zip(limits, keys, strict=True):
                if self._counts.get(key, 0) + tokens + limit.uncounted > limit.most:
                    raise OverLimit(limit, retry_after=limit.seconds - now % limit.seconds)
            for limit, key in zip(limits, keys, strict=True):
                self._counts[key] = self._counts.get(key, 0) + tokens + limit.uncounted
                self._counts.move_to_end(key)
            while len(self._counts) > self.size:
                self._counts.popitem(last=False)


# Parsed once per address, not on every page.
@functools.lru_cache(maxsize=4096)
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


# Signed tokens, for forms drawn while Redis is away

SIGNED_PREFIX = "s1."
_SIGNED_SHAPE = re.compile(r"s1\.[A-Za-z0-9_.-]{40,400}")
_SALT = "flask-submit-once signed form token"


def is_signed(token: object) -> bool:
    """Whether ``token`` has the shape of a signed token (not whether it is good)."""
    return isinstance(token, str) and _SIGNED_SHAPE.fullmatch(token) is not None


class SignedExpired(Exception):
    """A signed token older than the TTL, or bound to another form or session."""


class SignedTokens:
    """Make and open signed tokens with the app's secret key."""

    def __init__(self, secret_key: str | bytes, ttl: int) -> None:
        self.serializer = URLSafeTimedSerializer(secret_key, salt=_SALT)
        self.ttl = ttl

    def sign(self, *, session_id: str, form: str) -> str:
        """A signed token for one rendering of ``form`` in ``session_id``."""
        # Random, with no MAC: read out of the payload and sent bare, it is no token the
        # store issued (TokenStore.verify), so the signed expiry cannot be stepped around.
        nonce = secrets.token_urlsafe(TOKEN_BYTES)
        return SIGNED_PREFIX + self.serializer.dumps([nonce, binding(session_id, form)])

    def nonce(self, token: str, *, session_id: str, form: str) -> str:
        """The nonce of a good token for this form and session: what its digest is made
        from. :class:`SignedExpired` when it is too old or bound elsewhere (answered as
        an expired form), :class:`~flask_submit_once.FormTokenError` when it was not signed
        here (400)."""
        try:
            nonce, bound = self.serializer.loads(token[len(SIGNED_PREFIX) :], max_age=self.ttl)
        except SignatureExpired:
            raise SignedExpired() from None
        except (BadSignature, ValueError, TypeError):
            raise FormTokenError() from None
        if bound != binding(session_id, form) or not isinstance(nonce, str):
            raise SignedExpired()
        return nonce


# The page that carries the tokens


def _page_shows_again_on_back() -> None:
    """This request's page carries a token: sent :data:`SHOW_AGAIN_ON_BACK` (once)."""
    if not request.environ.get(_TOKENS + ".page"):
        request.environ[_TOKENS + ".page"] = True
        after_this_request(_back_shows_it_again)


def _back_shows_it_again(response: Response) -> Response:
    """A page with a token: Back shows it again as it was, used token and all, unless
    the view chose its own caching. Runs before the app's after_request functions."""
    if "Cache-Control" not in response.headers:
        response.headers["Cache-Control"] = SHOW_AGAIN_ON_BACK
    return response


class BackFriendlySessionInterface(SecureCookieSessionInterface):
    """Flask's signed-cookie sessions, minus ``Vary: Cookie`` on pages marked
    :data:`SHOW_AGAIN_ON_BACK`."""

    def save_session(self, app: Flask, session: SessionMixin, response: Response) -> None:
        super().save_session(app, session, response)
        headers = response.headers
        value = headers.get("Cache-Control")
        if value is None or "no-cache" not in value:
            # Most pages: no header to parse.
            return
        if value != SHOW_AGAIN_ON_BACK:
            # A view's own: read it as a cache would.
            control = response.cache_control
            if not (control.private and control.no_cache and not control.no_store):
                return
        if headers.get("Vary") == "Cookie":
            # What Flask's session adds: nothing to parse.
            del headers["Vary"]
        else:
            response.vary.discard("Cookie")
