"""Let Back show the order form exactly as it was rendered.

A user who goes back to the form after placing an order and submits it again
must land on that order, not place a second one: the page they go back to must
carry the token they already spent. Browsers show a page again from their cache
on Back and Forward (without asking the server) when it is ``no-cache`` (never
when ``no-store``), but only if its ``Vary`` headers still match the request.
Flask adds ``Vary: Cookie`` to every response that sets or reads the session,
and the first visit to the form had no cookie yet, so Back would fetch a fresh
form with a fresh token instead.

Pages marked ``private, no-cache`` therefore go out without ``Vary: Cookie``:
only the user's own browser stores them, and outside history navigation it
always fetches them anew (they have no validators), so the header only ever
changed what Back shows.
"""

from __future__ import annotations

from flask import Flask
from flask.sessions import SecureCookieSessionInterface, SessionMixin
from werkzeug.wrappers import Response

#: Cache-Control for a page that Back may show again as it was.
SHOW_AGAIN_ON_BACK = "private, no-cache"


class BackFriendlySessionInterface(SecureCookieSessionInterface):
    """Flask's signed-cookie sessions, minus ``Vary: Cookie`` on pages marked
    :data:`SHOW_AGAIN_ON_BACK`."""

    def save_session(self, app: Flask, session: SessionMixin, response: Response) -> None:
        super().save_session(app, session, response)
        value = response.headers.get("Cache-Control")
        if value is None or "no-cache" not in value:
            return  # most pages: no header to parse
        control = response.cache_control
        if control.private and control.no_cache and not control.no_store:
            response.vary.discard("Cookie")


def init_app(app: Flask) -> None:
    app.session_interface = BackFriendlySessionInterface()
