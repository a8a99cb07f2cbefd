"""Two gunicorn instances on different ports sharing one Redis and one PostgreSQL,
as behind a load balancer that sends a user's requests wherever it likes."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from tests.conftest import flashed, order_count, token_keys
from tests.support.live import LiveServer, open_form, request

STORM = 40


def test_a_storm_split_across_two_instances_makes_one_order_and_all_land_on_it(servers):
    with (
        LiveServer(servers, workers=2, threads=8) as a,
        LiveServer(servers, workers=2, threads=8) as b,
    ):
        cookie, form = open_form(a.port)
        ports = [a.port, b.port] * (STORM // 2)
        with ThreadPoolExecutor(STORM) as pool:
            responses = list(
                pool.map(
                    lambda port: request(port, "POST", "/orders", cookie=cookie, form=form), ports
                )
            )
        assert [r.status for r in responses] == [303] * STORM
        locations = {r.headers["location"] for r in responses}
        assert len(locations) == 1
        assert sum("already_placed" not in flashed(r) for r in responses) == 1
        (location,) = locations
        assert request(b.port, "GET", location, cookie=cookie).status == 200
    assert order_count(servers) == 1


def test_a_duplicate_on_instance_b_while_a_is_still_placing_waits_and_lands_on_a_s_order(
    servers, rdb
):
    with (
        LiveServer(servers, workers=1, threads=4, TEST_PAUSE_AFTER_CONSUME="3") as a,
        LiveServer(servers, workers=1, threads=4) as b,
    ):
        # the forms the start-up checks rendered
        rdb.flushall()
        cookie, form = open_form(a.port)
        # the one token just issued
        assert len(token_keys(rdb)) == 1
        with ThreadPoolExecutor(1) as pool:
            first = pool.submit(request, a.port, "POST", "/orders", cookie=cookie, form=form)
            deadline = time.monotonic() + 20
            # A has run its GETDEL
            while token_keys(rdb) and time.monotonic() < deadline:
                time.sleep(0.01)
            assert token_keys(rdb) == [], "instance A never consumed the token"
            assert not first.done(), "A finished before B's duplicate was sent: nothing proved"
            duplicate = request(b.port, "POST", "/orders", cookie=cookie, form=form)
            placed = first.result(timeout=30)
    assert placed.status == duplicate.status == 303
    assert flashed(placed) == [] and flashed(duplicate) == ["already_placed"]
    assert duplicate.headers["location"] == placed.headers["location"]
    assert order_count(servers) == 1
