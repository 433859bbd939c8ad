"""Alembic environment: migrations run on the connection the store hands over."""

from __future__ import annotations

from alembic import context
from sqlalchemy import engine_from_config, pool

from learning_bot.storage.schema import metadata

config = context.config
target_metadata = metadata


def include_object(
    obj: object, name: str | None, kind: str, reflected: bool, other: object
) -> bool:
    """slack_sdk keeps its OAuth installations and states in tables of its own (created by its
    stores when the multi-workspace install is on); they are not ours to migrate."""
    return not (kind == "table" and name is not None and name.startswith("slack_"))


def run_migrations() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=True,
            include_object=include_object,
        )
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = engine_from_config(
        config.get_section(config.config_ini_section) or {},
        prefix="sqlalchemy.",
        poolclass=pool.NullPool,
    )
    with engine.connect() as conn:
        context.configure(
            connection=conn,
            target_metadata=target_metadata,
            render_as_batch=True,
            include_object=include_object,
        )
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()
else:
    run_migrations()
