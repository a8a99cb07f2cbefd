"""The models are the one home of the tables: they must say what the migrations made."""

from __future__ import annotations

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from sqlalchemy import text

from webapp.db import MIGRATIONS
from webapp.shop.models import Base

# in scripts/test --quick
pytestmark = pytest.mark.quick


def test_the_models_match_the_migrated_schema_table_for_table(servers):
    with servers.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        differences = compare_metadata(context, Base.metadata)
    assert differences == []


def test_the_digest_column_rename_goes_back_and_forth(servers):
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with servers.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "0004")
        assert _digest_columns(conn) == {"form_token_digest": "orders_form_token_digest_key"}
        command.upgrade(config, "head")
        assert _digest_columns(conn) == {"submission_digest": "orders_submission_digest_key"}


def _digest_columns(conn) -> dict[str, str]:
    """Each UNIQUE constraint on one orders column that holds a digest."""
    return dict(
        conn.execute(
            text(
                "SELECT a.attname, c.conname FROM pg_constraint c JOIN pg_attribute a "
                "ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1] "
                "WHERE c.conrelid = 'orders'::regclass AND c.contype = 'u' "
                "AND a.attname LIKE '%digest'"
            )
        ).all()
    )
