"""Strict response headers on every page."""

from __future__ import annotations

from flask import Flask, Response, request

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    ]
)


#: Sent with every response that has not set its own.
DEFAULT_HEADERS = (
    ("Content-Security-Policy", CONTENT_SECURITY_POLICY),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    # Order pages carry the order's public id in the URL: never send it to
    # another site. Same-origin requests keep their Referer: over HTTPS the CSRF
    # check requires it (no-referrer made every HTTPS order submit fail).
    ("Referrer-Policy", "same-origin"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
    ("Permissions-Policy", "camera=(), microphone=(), geolocation=()"),
)
HSTS = ("Strict-Transport-Security", "max-age=63072000; includeSubDomains")
#: Pages hold per-render tokens and personal details: never cache them.
HTML_CACHE_CONTROL = ("Cache-Control", "no-store")


def init_app(app: Flask) -> None:
    app.after_request(_headers)


def _headers(response: Response) -> Response:
    """The defaults a response lacks, added in one pass over its headers (a setdefault
    each would scan them once per default)."""
    headers = response.headers
    present = {name.lower() for name in headers.keys()}
    wanted = [*DEFAULT_HEADERS]
    if request.is_secure:
        wanted.append(HSTS)
    if response.mimetype == "text/html":
        wanted.append(HTML_CACHE_CONTROL)
    headers.extend([(name, value) for name, value in wanted if name.lower() not in present])
    return response
