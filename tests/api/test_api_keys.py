"""API keys over their life: created (with an optional expiry), listed with their last
use, revoked; a revoked or expired key is refused at once."""

from __future__ import annotations

import secrets

import pytest
from sqlalchemy import event, text

from tests.support.api_client import place, problem_type

# in scripts/test --quick
pytestmark = pytest.mark.quick


@pytest.fixture
def name() -> str:
    """A client name of this test's own (API clients outlive the per-test clean-up)."""
    return f"client-{secrets.token_hex(4)}"


def cli(app, *args: str):
    return app.test_cli_runner().invoke(args=list(args))


def create_key(app, name: str, *options: str) -> str:
    result = cli(app, "api-keys", "create", name, *options)
    assert result.exit_code == 0, result.output
    return result.output.strip().splitlines()[-1]


def prefix_of(key: str) -> str:
    """What api-keys list shows of a key: its first 11 characters."""
    return key[:11]


def get_order(client, key: str, url: str):
    return client.get(url, headers={"Authorization": f"Bearer {key}"})


def test_a_revoked_key_gets_401_at_once_and_the_clients_other_key_still_works(app, name):
    client = app.test_client()
    kept, revoked = create_key(app, name), create_key(app, name)
    url = place(client, revoked).headers["Location"]
    assert get_order(client, revoked, url).status_code == 200

    result = cli(app, "api-keys", "revoke", name, "--key", prefix_of(revoked))
    assert result.exit_code == 0, result.output
    assert f"Revoked 1 key of client {name!r}" in result.output

    refused = get_order(client, revoked, url)
    assert refused.status_code == 401 and problem_type(refused) == "unauthorized"
    # What the partner can do about it; the shop's own commands are no use to them.
    detail = refused.get_json()["detail"]
    assert "expired or been revoked: ask the shop for a new one" in detail
    assert "flask" not in detail and "api-keys create" not in detail
    assert place(client, revoked, key="order-2").status_code == 401
    # same client, other key
    assert get_order(client, kept, url).status_code == 200


def test_revoking_a_client_revokes_every_key_it_holds(app, name):
    client = app.test_client()
    keys = [create_key(app, name) for _ in range(3)]
    result = cli(app, "api-keys", "revoke", name)
    assert result.exit_code == 0 and f"Revoked 3 keys of client {name!r}" in result.output
    assert [place(client, key).status_code for key in keys] == [401] * 3
    again = cli(app, "api-keys", "revoke", name)
    assert again.exit_code != 0 and "no active key" in again.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["api-keys", "revoke", "nobody-by-this-name"], "no client named"),
        (["api-keys", "revoke", "{name}", "--key", "sk_00000000"], "no active key"),
        (["api-keys", "create", "{name}", "--expires-days", "0"], "at least 1"),
        (["api-keys", "create", "{name}", "--expires-days", "-3"], "at least 1"),
        (["api-keys", "create", "{name}", "--expires-days", "soon"], "not a valid integer"),
    ],
)
def test_the_key_commands_refuse_what_they_cannot_do_and_say_why(app, name, args, message):
    create_key(app, name)
    result = cli(app, *[arg.format(name=name) for arg in args])
    assert result.exit_code != 0 and message in result.output, result.output


def test_an_expired_key_gets_401_and_a_key_before_its_expiry_works(app, servers, name):
    client = app.test_client()
    key = create_key(app, name, "--expires-days", "30")
    with servers.engine.connect() as conn:
        days = conn.scalar(
            text(
                "SELECT extract(epoch FROM expires_at - now()) / 86400 "
                "FROM api_keys WHERE key_prefix = :p"
            ),
            {"p": prefix_of(key)},
        )
    assert 29.99 < days <= 30
    assert place(client, key).status_code == 201
    with servers.engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE key_prefix = :p"
            ),
            {"p": prefix_of(key)},
        )
    refused = place(client, key, key="order-2")
    assert refused.status_code == 401 and problem_type(refused) == "unauthorized"


def test_list_api_keys_shows_each_key_by_prefix_with_its_expiry_last_use_and_state(
    app, servers, name
):
    client = app.test_client()
    used, unused, revoked = (
        create_key(app, name, "--expires-days", "7"),
        create_key(app, name),
        create_key(app, name),
    )
    place(client, used)
    cli(app, "api-keys", "revoke", name, "--key", prefix_of(revoked))
    result = cli(app, "api-keys", "list", name)
    assert result.exit_code == 0, result.output
    lines = {line.split()[1]: line for line in result.output.splitlines()[1:]}
    assert set(lines) == {prefix_of(used), prefix_of(unused), prefix_of(revoked)}
    assert lines[prefix_of(used)].split()[0] == name
    assert "never" not in lines[prefix_of(used)] and "UTC" in lines[prefix_of(used)]
    assert lines[prefix_of(used)].rstrip().endswith("active")
    assert "never" in lines[prefix_of(unused)] and "no expiry" in lines[prefix_of(unused)]
    assert lines[prefix_of(revoked)].rstrip().endswith("revoked")
    # the keys themselves are never shown again
    for key in (used, unused, revoked):
        assert key not in result.output


def test_last_use_is_written_at_most_once_a_minute_per_key(app, servers, name):
    client = app.test_client()
    key = create_key(app, name)
    url = place(client, key).headers["Location"]
    updates: list[str] = []

    def count(conn, cursor, statement, *args):
        if statement.lstrip().upper().startswith("UPDATE API_KEYS"):
            updates.append(statement)

    engine = app.extensions["db"].kw["bind"]
    event.listen(engine, "before_cursor_execute", count)
    try:
        for _ in range(5):
            assert get_order(client, key, url).status_code == 200
        # written by the place() above, less than a minute ago
        assert updates == []
        with servers.engine.begin() as conn:
            conn.execute(
                text(
                    "UPDATE api_keys SET last_used_at = now() - interval '61 seconds' "
                    "WHERE key_prefix = :p"
                ),
                {"p": prefix_of(key)},
            )
        for _ in range(5):
            assert get_order(client, key, url).status_code == 200
        assert len(updates) == 1
    finally:
        event.remove(engine, "before_cursor_execute", count)
    with servers.engine.connect() as conn:
        age = conn.scalar(
            text(
                "SELECT extract(epoch FROM now() - last_used_at) FROM api_keys "
                "WHERE key_prefix = :p"
            ),
            {"p": prefix_of(key)},
        )
    assert age < 5
