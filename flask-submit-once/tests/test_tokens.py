"""The framework-free token store (flask_submit_once.TokenStore) on a real Redis."""

from __future__ import annotations

import os
import re
import secrets
import string
import threading

import pytest
import redis
from redis.backoff import NoBackoff
from redis.exceptions import MaxConnectionsError
from redis.retry import Retry

from flask_submit_once import TokenStore
from servers import free_port

SID, OTHER_SID = "session-a", "session-b"


@pytest.fixture
def store(rdb) -> TokenStore:
    return TokenStore(rdb, ttl=60, prefix="test")


def test_issued_token_is_256_bits_urlsafe_and_consumed_once(store):
    token = store.create(session_id=SID, form="order")
    # 43 base64url characters: 256 bits
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", token)
    assert store.consume(token, session_id=SID, form="order") is True
    assert store.consume(token, session_id=SID, form="order") is False


def test_a_token_lives_as_long_as_its_ttl_and_no_longer(rdb):
    store = TokenStore(rdb, ttl=7, prefix="test")
    token = store.create(session_id=SID, form="order")
    assert 6000 < rdb.pttl(store.key(store.digest(token, session_id=SID, form="order"))) <= 7000
    with pytest.raises(ValueError, match="positive"):
        TokenStore(rdb, ttl=0)


def test_a_token_is_live_until_it_is_consumed_and_asking_consumes_nothing(rdb):
    store = TokenStore(rdb, ttl=60, prefix="test", secret=secrets.token_bytes(32))
    token = store.create(session_id=SID, form="order")
    assert store.is_live(token, session_id=SID, form="order") is True
    assert store.is_live(token, session_id=SID, form="order") is True
    assert store.is_live(token, session_id=OTHER_SID, form="order") is False
    assert store.consume(token, session_id=SID, form="order") is True
    assert store.is_live(token, session_id=SID, form="order") is False
    # made up: its MAC does not verify, so no command is sent
    made_up = store.new_token(session_id=OTHER_SID, form="order")
    rdb.connection_pool.disconnect()
    before = rdb.info("stats")["total_commands_processed"]
    assert store.is_live(made_up, session_id=SID, form="order") is False
    # INFO itself is the one command counted between the two readings
    assert rdb.info("stats")["total_commands_processed"] == before + 1


def test_token_from_another_session_is_refused_and_not_burned(store):
    token = store.create(session_id=SID, form="order")
    assert store.consume(token, session_id=OTHER_SID, form="order") is False
    assert store.consume(token, session_id=SID, form="order") is True


def test_token_for_another_form_is_refused_and_not_burned(store):
    token = store.create(session_id=SID, form="order")
    assert store.consume(token, session_id=SID, form="cancel") is False
    assert store.consume(token, session_id=SID, form="order") is True


def test_many_tabs_get_independent_tokens(store):
    tokens = [store.create(session_id=SID, form="order") for _ in range(20)]
    assert len(set(tokens)) == 20
    assert store.consume(tokens[7], session_id=SID, form="order")
    assert all(store.consume(t, session_id=SID, form="order") for t in tokens if t != tokens[7])


def test_concurrent_consumers_of_one_token_have_exactly_one_winner(store):
    token = store.create(session_id=SID, form="order")
    barrier = threading.Barrier(16)
    results: list[bool] = []

    def consume():
        barrier.wait()
        results.append(store.consume(token, session_id=SID, form="order"))

    threads = [threading.Thread(target=consume) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(True) == 1 and len(results) == 16


def test_neither_the_token_nor_the_session_id_appears_in_redis(store, rdb):
    token = store.create(session_id=SID, form="order")
    keys = rdb.keys("*")
    assert keys == [store.key(store.digest(token, session_id=SID, form="order"))]
    assert token not in keys[0] and SID not in keys[0]
    assert rdb.get(keys[0]) == "1"


def test_every_key_has_a_ttl(store, rdb):
    for _ in range(5):
        store.create(session_id=SID, form="order")
    assert all(0 < rdb.ttl(key) <= 60 for key in rdb.keys("*"))


def test_a_claimed_key_is_one_callers_until_it_is_given_back(store, rdb):
    """What an Idempotency-Key gets: no token is issued first; SET NX EX claims it."""
    digest = store.digest("key-1", session_id="client:7", form="api")
    assert [store.claim(digest) for _ in range(3)] == [True, False, False]
    assert 0 < rdb.ttl(store.key(digest)) <= 60
    store.release(digest)
    assert store.claim(digest, ttl=5) is True and 0 < rdb.ttl(store.key(digest)) <= 5


def test_digest_differs_by_form_and_session():
    digests = {
        TokenStore.digest("t" * 43, session_id=s, form=f)
        for s in (SID, OTHER_SID)
        for f in ("order", "cancel")
    }
    assert len(digests) == 4 and all(len(d) == 43 for d in digests)


def flip_last_bits(token: str) -> str:
    """``token`` with an unused bit of its last character flipped: another string that
    decodes to the same 32 bytes (43 characters carry 258 bits)."""
    alphabet = string.ascii_uppercase + string.ascii_lowercase + string.digits + "-_"
    return token[:-1] + alphabet[alphabet.index(token[-1]) ^ 0b01]


def test_a_token_proves_it_was_issued_for_its_session_and_form_without_redis(rdb):
    """With a secret, a token carries a MAC over its session, form and nonce: what the
    server issued is told from a made-up string without asking Redis (which may be away),
    and only for the session and form it was issued for, under the secret that made it."""
    store = TokenStore(rdb, ttl=60, prefix="test", secret=b"k" * 32)
    token = store.create(session_id=SID, form="order")
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", token)
    assert store.verify(token, session_id=SID, form="order")
    assert not store.verify(token, session_id=OTHER_SID, form="order")
    assert not store.verify(token, session_id=SID, form="cancel")
    other = TokenStore(rdb, ttl=60, prefix="test", secret=b"j" * 32)
    assert not other.verify(token, session_id=SID, form="order")
    made_up = [secrets.token_urlsafe(32) for _ in range(3)] + ["a" * 43, flip_last_bits(token)]
    assert not any(store.verify(t, session_id=SID, form="order") for t in made_up)
    # Refused before any command: a made-up token consumes nothing, even by chance.
    assert store.consume(made_up[0], session_id=SID, form="order") is False
    assert store.consume(token, session_id=OTHER_SID, form="order") is False
    assert store.consume(token, session_id=SID, form="order") is True
    # Without a secret, as in 0.10: any well-formed token may be tried.
    assert TokenStore(rdb, ttl=60).verify(made_up[0], session_id=SID, form="order")


def test_a_connection_the_server_closed_while_idle_is_opened_again_before_a_command(store, rdb):
    """A Redis restart or an idle timeout closes the pool's connections server side;
    the next command must not fail the request."""
    token = store.create(session_id=SID, form="order")
    rdb.client_kill_filter(_type="normal", skipme=True)
    assert store.consume(token, session_id=SID, form="order") is True
    assert store.create(session_id=SID, form="order")


def test_threads_never_share_a_connection_at_once(store):
    """Replies cannot cross between threads: 8 threads consume 200 tokens twice each,
    and every token is won exactly once."""
    tokens = [store.create(session_id=SID, form="order") for _ in range(200)]
    won: list[bool] = []

    def consume(mine: list[str]) -> None:
        won.extend(store.consume(t, session_id=SID, form="order") for t in mine * 2)

    threads = [threading.Thread(target=consume, args=(tokens[i::8],)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert won.count(True) == 200 and won.count(False) == 200


def test_a_forked_worker_never_talks_on_its_parents_connections(store):
    """gunicorn --preload forks workers from a process that may already hold a connection:
    parent and child sending on one socket at once would read each other's replies."""
    store.consume(store.create(session_id=SID, form="order"), session_id=SID, form="order")

    def cycles(session_id: str) -> bool:
        return all(
            store.consume(
                store.create(session_id=session_id, form="order"),
                session_id=session_id,
                form="order",
            )
            for _ in range(100)
        )

    pid = os.fork()
    # the child
    if pid == 0:
        ok = False
        try:
            ok = cycles(OTHER_SID)
        finally:
            os._exit(0 if ok else 1)
    assert cycles(SID)
    assert os.waitpid(pid, 0)[1] == 0


def test_a_redis_that_keeps_failing_never_uses_up_the_pools_connection_limit():
    """A command that fails gives its connection back to the pool: ten failures in a
    row against a pool of two never turn into 'too many connections'."""
    client = redis.Redis(port=free_port(), max_connections=2, retry=Retry(NoBackoff(), 0))
    store = TokenStore(client, ttl=60, prefix="test")
    for _ in range(10):
        with pytest.raises(redis.ConnectionError) as refused:
            store.create(session_id=SID, form="order")
        assert not isinstance(refused.value, MaxConnectionsError)
