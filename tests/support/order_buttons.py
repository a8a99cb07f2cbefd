"""The order form page as a browser sends it when a button of its own is pressed: with
"Update order N" offered, each button carries its form's token (its name and value) and
where it sends the fields (``formaction``), and only the pressed one's is sent."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tests.conftest import VALID, hidden


@dataclass(frozen=True)
class Button:
    label: str
    action: str
    token: str


def buttons(html: str) -> dict[str, Button]:
    """The page's submit buttons that carry a token, by id."""
    form = re.search(r'<form\b[^>]*\baction="([^"]*)"', html)
    assert form, "no form on the page"
    found = {}
    for tag, label in re.findall(r'(<button\b[^>]*>)\s*<span class="button-label">([^<]*)<', html):
        attributes = dict(re.findall(r'\b([\w-]+)="([^"]*)"', tag))
        if attributes.get("name") == "form_token":
            found[attributes["id"]] = Button(
                label.strip(), attributes.get("formaction", form.group(1)), attributes["value"]
            )
    return found


def press(client, html: str, button: str, **fields: str):
    """Press ``button`` (its id) on the page ``html`` with ``fields`` over VALID."""
    pressed = buttons(html)[button]
    return client.post(
        pressed.action,
        data={
            **VALID,
            "csrf_token": hidden(html, "csrf_token"),
            "form_token": pressed.token,
            **fields,
        },
    )


def landed(response) -> str:
    assert response.status_code == 303, response.get_data(as_text=True)[:800]
    return response.headers["Location"].split("?")[0]
