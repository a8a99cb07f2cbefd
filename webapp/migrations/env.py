"""Alembic environment: runs on the connection webapp.db.upgrade hands it, or on
the URL in $DATABASE_URL when the alembic command line is used."""

import os

from alembic import context
from sqlalchemy import create_engine

from webapp.shop.models import Base

target_metadata = Base.metadata


def run() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, target_metadata=target_metadata)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(os.environ["DATABASE_URL"])
    with engine.begin() as connection:
        context.configure(connection=connection, target_metadata=target_metadata)
        with context.begin_transaction():
            context.run_migrations()


run()
