"""Form views are bounded per client address (SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE),
counted in Redis in the token's own round trip."""

from __future__ import annotations

import os

import pytest
import redis

from tests.conftest import VALID, hidden, order_count, token_keys

LIMIT = 40


class CountingConnection(redis.Connection):
    """A real connection that counts how often it writes to Redis: one write
    per command, or per pipeline (which sends all its commands at once)."""

    writes = 0

    def send_packed_command(self, command, check_health=True):  # type: ignore[no-untyped-def]
        CountingConnection.writes += 1
        return super().send_packed_command(command, check_health)


# The count is kept per minute of the clock: each test stops the clock (stopped_clock)
# so that its burst falls in one minute, however long it takes.


def test_120_cookieless_form_views_from_one_client_leave_at_most_the_limit(
    make_app, rdb, stopped_clock
):
    app = make_app(SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE=LIMIT)
    client = app.test_client(use_cookies=False)
    stopped_clock(0)
    statuses = [client.get("/orders/new").status_code for _ in range(120)]
    assert statuses == [200] * LIMIT + [429] * (120 - LIMIT)
    # rejected views left no live key behind
    assert len(token_keys(rdb, "so:*")) == LIMIT
    refused = client.get("/orders/new")
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "60"
    assert "Please try again in 60 seconds" in refused.text and "a minute" not in refused.text
    assert 'name="form_token"' not in refused.text
    # Another address has its own count.
    assert client.get("/orders/new", environ_base={"REMOTE_ADDR": "192.0.2.7"}).status_code == 200


def test_the_client_is_the_address_the_trusted_proxy_saw(make_app, rdb, stopped_clock):
    app = make_app(SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE=3, TRUSTED_PROXIES=1)
    client = app.test_client(use_cookies=False)
    stopped_clock(0)

    def view(address: str) -> int:
        return client.get("/orders/new", headers={"X-Forwarded-For": address}).status_code

    assert [view("203.0.113.1") for _ in range(4)] == [200, 200, 200, 429]
    # same proxy, another client
    assert view("203.0.113.2") == 200
    # addresses only as digests
    assert not any("203.0.113" in key for key in rdb.keys("*"))


def test_the_limit_is_off_at_zero_and_the_session_cap_stays(make_app, rdb, stopped_clock):
    client = make_app(
        SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE=0, SUBMIT_ONCE_MAX_FORMS_PER_SESSION=5
    ).test_client()
    # the session's count is kept per hour of the clock
    stopped_clock(0)
    assert [client.get("/orders/new").status_code for _ in range(6)] == [200] * 5 + [429]
    # One key for the session's count beside the five tokens.
    assert len(rdb.keys("so:issued:*")) == 1 and len(token_keys(rdb, "so:*")) == 5


def test_a_user_within_the_limit_orders_as_before(make_app, servers, stopped_clock):
    client = make_app(SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE=LIMIT).test_client()
    stopped_clock(0)
    html = client.get("/orders/new").text
    tokens = {"csrf_token": hidden(html, "csrf_token"), "form_token": hidden(html, "form_token")}
    assert client.post("/orders", data={**VALID, **tokens}).status_code == 303
    assert order_count(servers) == 1


def test_a_refused_form_view_writes_nothing_to_redis(make_app, rdb, stopped_clock):
    """Every limit is checked before a counter moves: 300 cookieless views over the
    limit (a new session each) add no key at all, so a flood cannot evict open forms."""
    app = make_app(SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE=LIMIT)
    client = app.test_client(use_cookies=False)
    stopped_clock(0)
    assert [client.get("/orders/new").status_code for _ in range(LIMIT)] == [200] * LIMIT
    keys_at_the_limit = rdb.dbsize()
    assert {client.get("/orders/new").status_code for _ in range(300)} == {429}
    assert rdb.dbsize() == keys_at_the_limit


@pytest.mark.parametrize(
    "cap, limit, commands",
    [
        (0, 0, {"set": 1, "getdel": 1}),
        # One script: the counts were made (with their TTLs) at the first form.
        (0, LIMIT, {"evalsha": 1, "get": 1, "incrby": 1, "set": 1, "getdel": 1}),
        (200, LIMIT, {"evalsha": 1, "get": 2, "incrby": 2, "set": 1, "getdel": 1}),
    ],
)
def test_an_order_costs_two_round_trips_to_redis_with_or_without_the_limits(
    make_app, rdb, cap, limit, commands, stopped_clock
):
    """The limits add work to the form's one command, not round trips."""
    app = make_app(
        SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE=limit, SUBMIT_ONCE_MAX_FORMS_PER_SESSION=cap
    )
    pool = app.extensions["submit_once"].store.client.connection_pool
    pool.disconnect()
    pool.connection_class = CountingConnection
    client = app.test_client()
    stopped_clock(0)
    # the connection is open (CLIENT SETINFO is done)
    client.get("/orders/new")
    # and the session's count exists (made at its second form)
    client.get("/orders/new")
    rdb.config_resetstat()
    CountingConnection.writes = 0
    html = client.get("/orders/new").text
    tokens = {"csrf_token": hidden(html, "csrf_token"), "form_token": hidden(html, "form_token")}
    assert client.post("/orders", data={**VALID, **tokens}).status_code == 303
    assert CountingConnection.writes == 2
    calls = {
        name.removeprefix("cmdstat_"): stat["calls"]
        for name, stat in rdb.info("commandstats").items()
    }
    assert {k: v for k, v in calls.items() if k not in ("config", "info")} == commands


def test_a_redis_that_forgot_the_counting_script_is_taught_it_again(make_app, rdb, stopped_clock):
    """After a restart or a failover Redis has no scripts: the next form still opens
    (redis-py answers NOSCRIPT with SCRIPT LOAD and sends it again) and is counted."""
    client = make_app(SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE=LIMIT).test_client()
    stopped_clock(0)
    assert client.get("/orders/new").status_code == 200
    rdb.script_flush()
    assert client.get("/orders/new").status_code == 200
    assert len(token_keys(rdb, "so:*")) == 2
    # Both count both forms (the session's first, issued before it had an id, with its
    # second).
    assert sorted(int(rdb.get(key)) for key in rdb.keys("so:issued:*")) == [2, 2]


def test_a_cookieless_view_makes_no_per_session_counter(make_app, rdb, stopped_clock):
    """A client that keeps no cookie has a new session each view: counting it would
    make a new key for one token every time."""
    client = make_app(SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE=LIMIT).test_client(
        use_cookies=False
    )
    stopped_clock(0)
    assert {client.get("/orders/new").status_code for _ in range(10)} == {200}
    # the client's count, no session's
    assert len(rdb.keys("so:issued:*")) == 1


@pytest.mark.parametrize(
    "first, second, shared",
    [
        # one /64: one subscriber
        ("2001:db8:1:2::1", "2001:db8:1:2:ffff::9", True),
        ("2001:db8:1:2::1", "2001:db8:1:3::1", False),
        # an IPv4-mapped address is that address
        ("::ffff:192.0.2.7", "192.0.2.7", True),
    ],
)
def test_the_client_limit_counts_an_ipv6_64_as_one_client(
    make_app, rdb, first, second, shared, stopped_clock
):
    client = make_app(SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE=3).test_client(use_cookies=False)
    stopped_clock(0)
    for _ in range(3):
        assert client.get("/orders/new", environ_base={"REMOTE_ADDR": first}).status_code == 200
    other = client.get("/orders/new", environ_base={"REMOTE_ADDR": second}).status_code
    assert other == (429 if shared else 200)


def test_another_sites_page_cannot_open_forms_in_a_visitors_name(make_app, rdb, stopped_clock):
    """An <img> or a script on another site (cross-site, not a navigation) gets no
    token and spends nothing of the visitor's limit; following a link still works."""
    client = make_app(SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE=2).test_client()
    stopped_clock(0)
    image = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"}
    answers = {client.get("/orders/new", headers=image).status_code for _ in range(20)}
    assert answers == {403} and rdb.dbsize() == 0
    link = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}
    assert [client.get("/orders/new", headers=link).status_code for _ in range(2)] == [200, 200]


#: The flood's cookieless views: 500 here, 1,000 from scripts/soak (FLOOD_VIEWS).
FLOOD_VIEWS = int(os.environ.get("FLOOD_VIEWS", "500"))


@pytest.mark.soak
def test_a_flood_from_one_address_under_maxmemory_evicts_no_open_form(make_app, rdb, stopped_clock):
    """FLOOD_VIEWS cookieless views from one address against a limit of 120 a minute,
    with Redis near a maxmemory it evicts by volatile-ttl (room for about 80 % of the
    flood's forms: a flood let through would evict): the flood gets the limit and no
    more, nothing is evicted, and a form a customer opened before it still places."""
    app = make_app(SUBMIT_ONCE_MAX_FORMS_PER_CLIENT_PER_MINUTE=120)
    customer = app.test_client()
    stopped_clock(0)
    html = customer.get("/orders/new").text
    tokens = {"csrf_token": hidden(html, "csrf_token"), "form_token": hidden(html, "form_token")}
    used = int(rdb.info("memory")["used_memory"])
    rdb.config_set("maxmemory-policy", "volatile-ttl")
    # room for ~0.8 × FLOOD_VIEWS small keys (about 100 bytes each), not more
    rdb.config_set("maxmemory", used + 80 * FLOOD_VIEWS)
    evicted_before = int(rdb.info("stats")["evicted_keys"])
    try:
        flood = app.test_client(use_cookies=False)
        statuses = [
            flood.get("/orders/new", environ_base={"REMOTE_ADDR": "198.51.100.9"}).status_code
            for _ in range(FLOOD_VIEWS)
        ]
        evicted = int(rdb.info("stats")["evicted_keys"]) - evicted_before
    finally:
        rdb.config_set("maxmemory", 0)
    assert statuses.count(200) == 120 and set(statuses) == {200, 429}
    assert evicted == 0
    assert customer.post("/orders", data={**VALID, **tokens}).status_code == 303
