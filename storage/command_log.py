"""SqlCommandLog: the command bus's persistence (idempotency keys, rate-limit counters, the
command audit and pending confirmations) on the same database as the learners."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    and_,
    case,
    delete,
    insert,
    literal,
    or_,
    select,
    update,
)

from learning_bot.engine.store_records import AuditEntry
from learning_bot.storage.database import (
    dialect_insert,
    marking_writes,
    reading,
    with_retries,
    write_transaction,
)
from learning_bot.storage.schema import (
    audit_log,
    command_results,
    confirmations,
    learners,
    rate_limits,
)

T = TypeVar("T")
_CONFIRMATION_FIELDS = (
    "token",
    "learner",
    "actor_id",
    "surface",
    "command",
    "summary",
    "created_at",
    "expires_at",
    "used_at",
    "used_by",
    "outcome",
)


def claim_key(conn: Connection, insert_for: Any, key: str, at: int) -> bool:
    """Record `key` in the idempotency keys' table unless it is there already; whether this
    recorded it. `insert_for`: the dialect's INSERT (storage.database.dialect_insert)."""
    stmt = (
        insert_for(command_results)
        .values(key=key, reply=None, created_at=at)
        .on_conflict_do_nothing(index_elements=["key"])
        .returning(command_results.c.key)
    )
    return conn.execute(stmt).first() is not None


class _Batch:
    """The command-log operations of one transaction (see bot.ports.CommandBatch)."""

    def __init__(self, conn: Connection, insert_for: Any) -> None:
        self.conn = conn
        self._insert = insert_for

    def claim(self, key: str, at: int, lease_ms: int | None = None) -> tuple[bool, str | None]:
        c = command_results.c
        if claim_key(self.conn, self._insert, key, at):
            return True, None
        if lease_ms is not None:
            # A claim without a reply past its lease: its process died mid-command (its
            # transaction rolled back) or it outlived the deadline. One statement takes it
            # over, so of several retries at once exactly one runs the command.
            taken = self.conn.execute(
                update(command_results)
                .where(c.key == key, c.reply.is_(None), c.created_at < at - lease_ms)
                .values(created_at=at)
            ).rowcount
            if taken:
                return True, None
        return False, self.conn.execute(select(c.reply).where(c.key == key)).scalar()

    def hit_rate_limit(self, key: str, window_ms: int, at: int) -> int:
        start = at // window_ms * window_ms
        r = rate_limits.c
        stmt = self._insert(rate_limits).values(key=key[:300], window_start=start, count=1)
        stmt = stmt.on_conflict_do_update(
            index_elements=["key"],
            set_={
                "count": case(
                    (r.window_start == stmt.excluded.window_start, r.count + 1),
                    else_=1,
                ),
                "window_start": stmt.excluded.window_start,
            },
        ).returning(r.count)
        return int(self.conn.execute(stmt).scalar_one())

    def finish(self, key: str, reply: str) -> None:
        self.conn.execute(
            update(command_results).where(command_results.c.key == key).values(reply=reply)
        )

    def audit(self, learner: str, entry: AuditEntry) -> None:
        chosen = select(
            learners.c.id,
            literal(entry.kind),
            literal(entry.actor[:256]),
            literal(entry.surface[:64]),
            literal(json.dumps(dict(entry.detail), default=str)),
            literal(entry.result),
            literal(entry.at),
        ).where(learners.c.name == learner)
        self.conn.execute(
            insert(audit_log).from_select(
                ["learner_id", "kind", "actor", "surface", "detail", "result", "created_at"],
                chosen,
            )
        )


class SqlCommandLog:
    """The bot's CommandStore port on a SQLAlchemy engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._insert: Any = dialect_insert(engine.dialect.name)

    @contextmanager
    def _writing(self) -> Iterator[Connection]:
        """A write transaction of the log itself: never a command's change (not marked)."""
        with marking_writes(self.engine, None), write_transaction(self.engine) as conn:
            yield conn

    def in_transaction(self, work: Callable[[_Batch], T]) -> T:
        def run() -> T:
            with self._writing() as conn:
                return work(_Batch(conn, self._insert))

        return with_retries(run)

    def marking(self, key: str, reply: str) -> AbstractContextManager[None]:
        """While a claimed command runs: the first write transaction that changes a learner
        (on this database) also stores `reply` as the claim's reply, in the same transaction.
        A process killed after the change, before the command's own reply is recorded, leaves
        that reply rather than a bare claim, so a retry past the lease answers it instead of
        running the command a second time."""
        column = command_results.c

        def mark(conn: Connection) -> None:
            conn.execute(
                update(command_results)
                .where(column.key == key, column.reply.is_(None))
                .values(reply=reply)
            )

        return marking_writes(self.engine, mark)

    def release_command(self, key: str) -> None:
        def run() -> None:
            with self._writing() as conn:
                conn.execute(delete(command_results).where(command_results.c.key == key))

        with_retries(run)

    def purge(self, before: int) -> int:
        """Forget idempotency keys and spent confirmations older than `before`."""

        def run() -> int:
            with self._writing() as conn:
                n = conn.execute(
                    delete(command_results).where(command_results.c.created_at < before)
                ).rowcount
                n += conn.execute(
                    delete(confirmations).where(confirmations.c.expires_at < before)
                ).rowcount
                return int(n or 0)

        return with_retries(run)

    def create_confirmation(self, confirmation: Mapping[str, Any]) -> None:
        values = {k: confirmation[k] for k in _CONFIRMATION_FIELDS[:8]}

        def run() -> None:
            with self._writing() as conn:
                conn.execute(insert(confirmations).values(**values))

        with_retries(run)

    def get_confirmation(self, token: str) -> dict[str, Any] | None:
        with reading(self.engine) as conn:
            row = conn.execute(select(confirmations).where(confirmations.c.token == token)).first()
        if row is None:
            return None
        return {name: getattr(row, name) for name in _CONFIRMATION_FIELDS}

    def use_confirmation(
        self, token: str, actor_id: str, at: int, lease_ms: int | None = None
    ) -> bool:
        c = confirmations.c
        free: ColumnElement[bool] = c.used_at.is_(None)
        if lease_ms is not None:
            # A use whose process died before writing the outcome is a lapsed lease.
            free = or_(free, and_(c.outcome.is_(None), c.used_at < at - lease_ms))

        def run() -> bool:
            with self._writing() as conn:
                done = conn.execute(
                    update(confirmations)
                    .where(c.token == token, free)
                    .values(used_at=at, used_by=actor_id)
                ).rowcount
                return bool(done)

        return with_retries(run)

    def finish_confirmation(self, token: str, outcome: str) -> None:
        def run() -> None:
            with self._writing() as conn:
                conn.execute(
                    update(confirmations)
                    .where(confirmations.c.token == token)
                    .values(outcome=outcome)
                )

        with_retries(run)
