"""Alembic environment: runs migrations on the connection the store hands over."""

from __future__ import annotations

from alembic import context

from tavern_tui.store.models import Base

config = context.config
connection = config.attributes.get("connection")
if connection is None:  # pragma: no cover - the store always passes a connection
    raise RuntimeError("tavern-tui migrations run through tavern_tui.store.db.upgrade()")

context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
