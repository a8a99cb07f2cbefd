"""The shop's error page: a title and words in the shop's voice for every status, and the
page itself (swapping nothing for htmx). Kept apart from the error handlers (errors.py),
which reach into the API and the order pages, so that any view may draw an error page
without importing them."""

from __future__ import annotations

from flask import render_template, request
from werkzeug.exceptions import default_exceptions

#: Every status a page of ours can answer has a title in the shop's words.
TITLES = {
    400: "This request could not be processed",
    401: "You are not signed in for this",
    403: "This could not be done from here",
    404: "Page not found",
    405: "That action is not allowed here",
    406: "We cannot send this page in that format",
    408: "This took too long to arrive",
    409: "This could not be done as things stand",
    410: "This page is gone",
    411: "This request could not be processed",
    412: "This page changed in the meantime",
    413: "That was too much data",
    414: "That address is too long",
    415: "This form was sent in a format we do not accept",
    416: "This request could not be processed",
    417: "This request could not be processed",
    418: "This request could not be processed",
    421: "This request reached the wrong server",
    422: "This could not be accepted as it is",
    423: "This is locked just now",
    424: "This could not be done",
    428: "This request could not be processed",
    429: "Too many forms opened",
    431: "This request could not be processed",
    451: "This page is not available",
    500: "Something went wrong on our side",
    501: "That action is not available",
    502: "We are briefly unavailable",
    503: "We are briefly unavailable",
    504: "We are briefly unavailable",
    505: "This request could not be processed",
}
#: Werkzeug's own sentences, by status, and what our pages say instead.
WERKZEUG_WORDING = {code: error.description for code, error in default_exceptions.items()}
WORDS = {
    400: "Something in this request was not as we expected. Go back, reload the page and "
    "try again.",
    404: "There is no page at this address. Check that you typed or copied all of it, or "
    "start from the order form.",
    405: "This address cannot be opened that way: it takes a form sent from our pages. "
    "Start from the order form, or go back to the page you came from.",
    409: "This could not be done, because something changed in the meantime. Go back to "
    "the page you came from and reload it to see how things stand.",
    413: "This was more than we accept in one go. Go back and send less.",
    500: "Something broke on our side, so we could not finish this; nothing you did caused "
    "it. Please try again in a few moments, or write to orders@fernleaf.example.",
}
#: Said on a 429 page whatever the refusal's own words: the library's name a wait of their
#: own ("a minute"), and the page names one wait only, the one Retry-After gives.
TOO_MANY_FORMS = (
    "Very many forms were opened from your browser or your network, so we are "
    "not opening another one just yet."
)


def render_error(code: int, description: str | None, headers: dict[str, str] | None = None):
    headers = dict(headers or {})
    if request.headers.get("HX-Request") == "true":
        # htmx expects a form to swap, not a whole page (a refusal, a lost session or an
        # outage on the order or refund form): swap nothing; static/submit-once.js shows
        # the page's words above the form, which keeps what was typed.
        headers["HX-Reswap"] = "none"
    title = TITLES.get(
        code,
        "Something went wrong on our side"
        if code >= 500
        else "This request could not be processed",
    )
    if code == 429:
        description = TOO_MANY_FORMS
    elif description is None or description == WERKZEUG_WORDING.get(code):
        description = WORDS.get(code, description)
    return (
        render_template(
            "errors/error.html",
            code=code,
            title=title,
            description=description,
            retry_after=headers.get("Retry-After"),
        ),
        code,
        headers,
    )
