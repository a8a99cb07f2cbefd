"""The order form under htmx (hx-post, HX-Request: true): the server answers with the
form's fragment or an HX-Redirect, never a whole page inside the form."""

from __future__ import annotations

import pytest

from tests.conftest import VALID, flashed, hidden, order_count, order_page

# in scripts/test --quick
pytestmark = pytest.mark.quick

HTMX = {"HX-Request": "true"}


def test_the_page_loads_htmx_from_our_own_static_files_with_error_swaps_on(client):
    page = client.get("/orders/new").text
    assert 'src="/static/vendor/htmx.min.js"' in page
    assert '"includeIndicatorStyles": false' in page
    assert '"^(400|409|422|503)$", "swap": true' in page
    with client.get("/static/vendor/htmx.min.js") as script:
        assert script.status_code == 200 and b"htmx" in script.data[:2000]


def test_a_submit_redirects_the_whole_page_to_the_order_and_a_repeat_lands_on_it(
    once_forms, servers
):
    page = order_page(once_forms)
    first = page.submit(VALID, headers=HTMX)
    assert first.status_code == 200 and first.headers["HX-Redirect"].startswith("/orders/")
    # nothing for htmx to swap into the form
    assert first.data == b""
    again = page.submit(VALID, headers=HTMX)
    assert again.headers["HX-Redirect"] == first.headers["HX-Redirect"]
    # for the page it loads
    assert flashed(first) == [] and flashed(again) == ["already_placed"]
    assert order_count(servers) == 1


def test_invalid_fields_come_back_as_the_form_fragment_with_the_same_token(once_forms, servers):
    page = order_page(once_forms)
    answer = page.submit({**VALID, "email": "not-an-address"}, headers=HTMX)
    html = answer.get_data(as_text=True)
    assert answer.status_code == 422
    assert html.lstrip().startswith('<div id="order-form-area">') and "<html" not in html
    assert "Please fix this" in html and 'value="not-an-address"' in html
    assert 'hx-post="/orders"' in html
    assert hidden(html, "form_token") == page.token and order_count(servers) == 0


def test_a_changed_resubmit_is_a_409_fragment_with_the_new_input_and_a_fresh_token(
    once_forms, servers
):
    page = order_page(once_forms)
    page.submit(VALID, headers=HTMX)
    answer = page.submit({**VALID, "quantity": "7"}, headers=HTMX)
    html = answer.get_data(as_text=True)
    assert answer.status_code == 409 and "<html" not in html
    assert "already used for order" in html and 'value="7"' in html
    # hidden(): there is one
    assert hidden(html, "form_token") != page.token
    assert order_count(servers) == 1
