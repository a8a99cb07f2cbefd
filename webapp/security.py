"""Strict response headers on every page."""

from __future__ import annotations

from flask import Flask, Response, request

CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "font-src 'self'",
    "connect-src 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
])


def init_app(app: Flask) -> None:
    app.after_request(_headers)


def _headers(response: Response) -> Response:
    headers = response.headers
    headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
    headers.setdefault("X-Content-Type-Options", "nosniff")
    headers.setdefault("X-Frame-Options", "DENY")
    # Order pages carry the order's public id in the URL: never send it to
    # another site. Same-origin requests keep their Referer: over HTTPS the CSRF
    # check requires it (no-referrer made every HTTPS order submit fail).
    headers.setdefault("Referrer-Policy", "same-origin")
    headers.setdefault("Cross-Origin-Opener-Policy", "same-origin")
    headers.setdefault("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
    if request.is_secure:
        headers.setdefault("Strict-Transport-Security", "max-age=63072000; includeSubDomains")
    if response.mimetype == "text/html":
        # Pages hold per-render tokens and personal details: never cache them.
        headers.setdefault("Cache-Control", "no-store")
    return response
