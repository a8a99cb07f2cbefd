"""How often one browser session may have a card checked at the provider.

The order form turns the card number into the provider's token while it validates
(webapp/orders/forms.py), before its form token is spent: the library decides a
token's fate only after the form is valid. A made-up token is refused by its MAC, and a
spent or expired one by ``submit_once.token_is_live()``, before the provider is asked;
but one live token stays live while each card sent with it is refused, so a script could
send it again and again, card after card, and make the shop call the provider from its
own key once a submit: what card testing looks like to the provider. Each browser
session (the shop's own value in the session cookie, webapp/orders/same_order.py) may
ask ``CARD_CHECKS_PER_SESSION`` times per :data:`WINDOW_SECONDS`; past that the form
comes back (429, the input kept, ``Retry-After``) and the provider is not called. A new
session needs a form drawn for it (its CSRF token), and form views are bounded per
client address (``SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE``).

Counted in Redis with one script (INCR, and the window's EXPIRE on the first), so the
count is shared by every process and every key expires. While Redis cannot be reached
the check is let through: the shop keeps selling during an outage, as its forms do.
"""

from __future__ import annotations

import logging

from flask import current_app, g
from redis.exceptions import RedisError

from ..extensions import submit_once

__all__ = ["WINDOW_SECONDS", "may_check_card"]

log = logging.getLogger(__name__)

#: The window the per-session count runs over.
WINDOW_SECONDS = 600
#: INCR the count; give it the window's TTL when it has none (the first of a window).
#: Returns the count and the seconds left in the window.
COUNT = """
local n = redis.call('INCR', KEYS[1])
if redis.call('TTL', KEYS[1]) < 0 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return {n, redis.call('TTL', KEYS[1])}
"""


def may_check_card(session: str) -> bool:
    """Count one card check for browser session ``session`` (its digest); False past
    the bound, with ``g.card_checks_retry_after`` set to the seconds left in the window."""
    bound = int(current_app.config["CARD_CHECKS_PER_SESSION"])
    if bound <= 0:
        return True
    try:
        count = submit_once.redis.register_script(COUNT)
        checks, ttl = count(keys=[f"shop:card-checks:{session}"], args=[WINDOW_SECONDS])
    except RedisError as error:
        log.warning("card check not counted, Redis unavailable: %s", type(error).__name__)
        return True
    if int(checks) <= bound:
        return True
    g.card_checks_retry_after = max(int(ttl), 1)
    return False
