"""The models are the one home of the tables: they must say what the migrations made."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from webapp.models import Base


def test_the_models_match_the_migrated_schema_table_for_table(servers):
    with servers.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        differences = compare_metadata(context, Base.metadata)
    assert differences == []
