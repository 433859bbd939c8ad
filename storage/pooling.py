"""Connection pools and connection poolers for PostgreSQL: how many connections a process opens,
and whether named prepared statements are safe on them. Importable without SQLAlchemy.

A transaction-mode pooler (pgbouncer's `pool_mode = transaction`, and the poolers that work like
it) hands each transaction to whichever server connection is free, so a statement prepared on
one server connection is missing on the next ("prepared statement "_pg3_1" does not exist").
Behind one, nothing is prepared: psycopg's automatic preparation is off
(`prepare_threshold=None`) and the observe statement is sent unprepared.

`auto` (the default) asks each new connection whether a pooler stands between it and the
server: PostgreSQL tells the client its backend's process id when the connection opens, and a
pooler, which shares server connections between clients, tells the client an id of its own
instead. When `SELECT pg_backend_pid()` answers another id than the one the connection was
given, the connection goes through a pooler and prepares nothing. One query per new connection
(pooled connections are reused), and it decides per connection, so a server that starts while
the database is down still decides right when it answers.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from learning_bot.engine.errors import InvalidConfig

ENV_POOLER = "LEARNING_BOT_DB_POOLER"
ENV_POOL_SIZE = "LEARNING_BOT_DB_POOL_SIZE"
ENV_MAX_OVERFLOW = "LEARNING_BOT_DB_MAX_OVERFLOW"

Pooler = Literal["auto", "transaction", "session", "none"]
POOLERS: tuple[Pooler, ...] = ("auto", "transaction", "session", "none")

POOLS_PER_PROCESS = 2
"""PostgreSQL pools a process keeps: the engine every read and transaction uses, and the
autocommit connections of the observe statement."""


@dataclass(frozen=True)
class PoolSettings:
    """`pooler`: auto (probe each connection), transaction (never prepare), session or none
    (prepare: the server connection is the client's for its whole session). `size`: connections
    each pool keeps open; `overflow`: connections it may open beyond them under load (closed
    when returned)."""

    pooler: Pooler = "auto"
    size: int = 8
    overflow: int = 8

    def __post_init__(self) -> None:
        if self.pooler not in POOLERS:
            raise InvalidConfig(ENV_POOLER, f"must be one of {', '.join(POOLERS)}")
        if self.size < 1:
            raise InvalidConfig(ENV_POOL_SIZE, "must be at least 1")
        if self.overflow < 0:
            raise InvalidConfig(ENV_MAX_OVERFLOW, "must be >= 0")

    @property
    def max_connections(self) -> int:
        """The most PostgreSQL connections one process opens (`serve --workers N`: N times)."""
        return POOLS_PER_PROCESS * (self.size + self.overflow)


def _whole(name: str, raw: str, default: int) -> int:
    text = raw.strip()
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        raise InvalidConfig(name, f"must be a whole number, got {raw!r}") from None


def pool_settings(env: Mapping[str, str] | None = None) -> PoolSettings:
    """LEARNING_BOT_DB_POOLER, LEARNING_BOT_DB_POOL_SIZE and LEARNING_BOT_DB_MAX_OVERFLOW,
    validated; an invalid value is an error naming the variable."""
    env = os.environ if env is None else env
    pooler = env.get(ENV_POOLER, "").strip().lower() or "auto"
    if pooler not in POOLERS:
        raise InvalidConfig(
            ENV_POOLER, f"must be one of {', '.join(POOLERS)}, got {env.get(ENV_POOLER)!r}"
        )
    defaults = PoolSettings()
    return PoolSettings(
        pooler=pooler,
        size=_whole(ENV_POOL_SIZE, env.get(ENV_POOL_SIZE, ""), defaults.size),
        overflow=_whole(ENV_MAX_OVERFLOW, env.get(ENV_MAX_OVERFLOW, ""), defaults.overflow),
    )


def behind_pooler(dbapi_conn: Any) -> bool:
    """Whether a psycopg connection reaches its server through a pooler: the backend process id
    it was given when it opened is not the one its server connection has."""
    given = dbapi_conn.info.backend_pid
    with dbapi_conn.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()", prepare=False)
        row = cur.fetchone()
    if not dbapi_conn.autocommit:
        dbapi_conn.rollback()
    return row is None or int(row[0]) != int(given)


def configure_connection(dbapi_conn: Any, pooler: Pooler) -> None:
    """Turn off named prepared statements on a new psycopg connection that goes through a
    transaction-mode pooler (stated, or found by `auto`)."""
    if pooler == "transaction" or (pooler == "auto" and behind_pooler(dbapi_conn)):
        dbapi_conn.prepare_threshold = None


def prepares(dbapi_conn: Any) -> bool:
    """Whether statements may be prepared on this psycopg connection (see configure_connection)."""
    return dbapi_conn.prepare_threshold is not None
