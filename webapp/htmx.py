"""Requests htmx sends: answered with the part of the page it swaps, or told to reload."""

from flask import request

__all__ = ["sent_by_htmx"]


def sent_by_htmx() -> bool:
    """Whether htmx sent this request (its ``HX-Request: true`` header)."""
    return request.headers.get("HX-Request") == "true"
