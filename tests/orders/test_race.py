"""Many identical POSTs at once against gunicorn with several worker processes: the shop's
wiring of the library's storm promise (which the library's tests/orders/test_race.py owns, with
its first submit holding the token and without)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from tests.conftest import flashed, order_count
from tests.support.live import LiveServer, open_form, request

DUPLICATES = 50


def storm(port: int, cookie: str, form: dict[str, str], n: int = DUPLICATES):
    with ThreadPoolExecutor(n) as pool:
        return list(
            pool.map(lambda _: request(port, "POST", "/orders", cookie=cookie, form=form), range(n))
        )


def test_fifty_concurrent_posts_of_one_form_make_one_order_and_all_land_on_it(servers):
    # the first holds its token 0.5 s, so the others arrive while it runs
    with LiveServer(servers, workers=4, threads=16, TEST_PAUSE_AFTER_CONSUME="0.5") as live:
        cookie, form = open_form(live.port)
        responses = storm(live.port, cookie, form)
        locations = {r.headers.get("location", "") for r in responses}
        assert [r.status for r in responses] == [303] * DUPLICATES
        assert len(locations) == 1
        (location,) = locations
        assert location.startswith("/orders/")
        fresh = [r for r in responses if "already_placed" not in flashed(r)]
        assert len(fresh) == 1, "exactly one response is the one that placed the order"
        assert request(live.port, "GET", location, cookie=cookie).status == 200
    assert order_count(servers) == 1
