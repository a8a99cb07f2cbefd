"""Let Back show a form exactly as it was rendered, spent token and all.

A user who goes back to a form after submitting it and submits it again must land
on the result, not make a second one: the page they go back to must carry the token
they already spent. Browsers show a page again from their cache on Back and Forward
(without asking the server) when it is ``no-cache`` (never when ``no-store``), but
only while its ``Vary`` headers still match. Flask adds ``Vary: Cookie`` to every
response that sets or reads the session, and the form's first rendering had no
cookie yet, so Back would fetch a fresh form with a fresh token instead (and the
browser would type the old input back into it).

Pages sent ``private, no-cache`` (:data:`SHOW_AGAIN_ON_BACK`: what every page that
issued a form token is sent with, unless its view chose a ``Cache-Control``) go out
without ``Vary: Cookie``: only the user's own browser stores them, and outside history
navigation it always fetches them anew (they have no validators), so the header only
changes what Back shows. :class:`~flask_submit_once.SubmitOnce` installs this session
interface when the app uses Flask's default one (``SUBMIT_ONCE_BACK_SHOWS_FORM``).

One more condition is the app's: the form must be sent to another URL than the page
it is on (``GET /signup`` renders, ``POST /signup/send`` submits), since a browser
drops its cached copy of a URL that a POST went to.
"""

from __future__ import annotations

from flask import Flask, Response
from flask.sessions import SecureCookieSessionInterface, SessionMixin

__all__ = ["SHOW_AGAIN_ON_BACK", "BackFriendlySessionInterface"]

#: Cache-Control for a page that Back may show again as it was.
SHOW_AGAIN_ON_BACK = "private, no-cache"


class BackFriendlySessionInterface(SecureCookieSessionInterface):
    """Flask's signed-cookie sessions, minus ``Vary: Cookie`` on pages marked
    :data:`SHOW_AGAIN_ON_BACK`."""

    def save_session(self, app: Flask, session: SessionMixin, response: Response) -> None:
        super().save_session(app, session, response)
        headers = response.headers
        value = headers.get("Cache-Control")
        if value is None or "no-cache" not in value:
            return  # most pages: no header to parse
        if value != SHOW_AGAIN_ON_BACK:  # a view's own: read it as a cache would
            control = response.cache_control
            if not (control.private and control.no_cache and not control.no_store):
                return
        if headers.get("Vary") == "Cookie":  # what Flask's session adds: nothing to parse
            del headers["Vary"]
        else:
            response.vary.discard("Cookie")
