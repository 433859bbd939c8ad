"""Reads: status counters, inclusion counts, pages of runs, the latest run of a conversation
and the time series the dashboard draws."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import Connection, Select, func, select, text

from learning_bot.engine.errors import InvalidInput
from learning_bot.engine.ports import RunStats
from learning_bot.engine.records import ArmOutcomeRecord, RunRecord
from learning_bot.engine.store_records import TimeBucket
from learning_bot.storage import queries
from learning_bot.storage.database import reading
from learning_bot.storage.schema import posteriors, trace_arms, traces
from learning_bot.storage.store_base import StoreBase
from learning_bot.storage.trace_rows import record_from_row

_CONVERGENCE = """
SELECT (at / :w) * :w AS t, arm_id, SUM(gained), COUNT(*) FROM (
    SELECT t.timestamp AS at, p.arm_id AS arm_id, ta.reward AS gained
    FROM trace_arms ta JOIN traces t ON t.id = ta.trace_pk
    JOIN posteriors p ON p.learner_id = t.learner_id AND p.arm_key = ta.arm_key
    WHERE t.learner_id = :learner AND t.timestamp >= :since AND ta.reward IS NOT NULL
    UNION ALL
    SELECT o.created_at, o.arm_id, o.reward FROM observations o
    WHERE o.learner_id = :learner AND o.created_at >= :since
) AS c GROUP BY (at / :w) * :w, arm_id ORDER BY t
"""


PIECE_BYTES = 8 * 1024 * 1024
"""About how much memory a piece of traces read at once may take (records, rows and the
text written from them), whatever the number or width of the traces."""

BYTES_PER_ARM = 1024
"""What one arm outcome of a trace costs in memory while a piece is read and written out:
its row, its record, its JSON object and text (about 1 KB as bench/export_memory.py measures
`GET traces`, rounded up), so a piece of PIECE_BYTES holds about 8,000 arms."""

BYTES_PER_TRACE = 4096
"""The same for a trace's own columns, besides its context and error."""

PLANNED_TRACES = 1000
"""Traces weighed per planning query of a full listing (an id and two numbers each)."""


def _weighed(learner_id: int, dialect: str, *, with_arms: bool) -> Select[tuple[Any, Any]]:
    """The ids of a learner's traces with what reading each takes in memory, about: its
    context and error as stored, its arms at BYTES_PER_ARM, the rest at BYTES_PER_TRACE."""
    t = traces.c
    # PostgreSQL's octet_length reads a long value's stored size without fetching it
    size = func.octet_length if dialect == "postgresql" else func.length
    text_size = func.coalesce(size(t.context), 0) + func.coalesce(size(t.error), 0)
    weight = text_size + BYTES_PER_TRACE
    if with_arms:
        arms = (
            select(func.count())
            .select_from(trace_arms)
            .where(trace_arms.c.trace_pk == t.id)
            .scalar_subquery()
        )
        weight = weight + arms * BYTES_PER_ARM
    return select(t.id, weight).where(t.learner_id == learner_id)


def pieces(plan: Sequence[Any], piece_bytes: int) -> Iterator[list[int]]:
    """Consecutive runs of the planned (id, weight) rows whose weights add up to at most
    `piece_bytes`; a trace heavier than that alone is a piece of its own."""
    ids: list[int] = []
    held = 0
    for trace_pk, weight in plan:
        w = int(weight)
        if ids and held + w > piece_bytes:
            yield ids
            ids, held = [], 0
        ids.append(int(trace_pk))
        held += w
    if ids:
        yield ids


class Reads(StoreBase):
    """The Store port's reads."""

    piece_bytes: int = PIECE_BYTES
    """The size in memory a piece of traces is read in (PIECE_BYTES unless set otherwise)."""

    def inclusion_counts(self, learner_id: int, last: int) -> dict[str, tuple[int, int, int]]:
        sql = queries.INCLUSION_SQLITE if self.dialect == "sqlite" else self._sql(queries.INCLUSION)
        with reading(self.engine) as conn:
            rows = conn.exec_driver_sql(sql, (learner_id, learner_id, last)).all()
        return queries.inclusion_counts(rows)

    def latest_run(self, learner_id: int, conversation: str) -> RunRecord | None:
        t = traces.c
        with reading(self.engine) as conn:
            row = conn.execute(
                select(traces)
                .where(t.learner_id == learner_id, t.conversation == conversation)
                .order_by(t.timestamp.desc(), t.id.desc())
                .limit(1)
            ).first()
            if row is None:
                return None
            return traces_with_arms(conn, [row])[0]

    def run_stats(self, learner_id: int) -> RunStats:
        with reading(self.engine) as conn:
            return self._run_stats(conn, learner_id)

    def _run_stats(self, conn: Connection, learner_id: int) -> RunStats:
        return queries.run_stats(self._learner_row(conn, queries.RUN_STATS, learner_id))

    def trace_page(self, learner_id: int, limit: int, offset: int) -> tuple[list[RunRecord], int]:
        page = [r for piece in self.trace_pieces(learner_id, limit, offset) for r in piece]
        return page, self.run_stats(learner_id).all_time_traces

    def trace_pieces(self, learner_id: int, limit: int, offset: int) -> Iterator[list[RunRecord]]:
        """The page `trace_page` reads (newest first), in pieces of about `piece_bytes` each
        (see `_weighed`): what a streamed answer holds at once, however wide the traces.
        Each piece is its own short read, so a slow consumer holds no connection."""
        t = traces.c
        with reading(self.engine) as conn:
            plan = conn.execute(
                _weighed(learner_id, self.dialect, with_arms=True)
                .order_by(t.timestamp.desc(), t.id.desc())
                .limit(limit)
                .offset(offset)
            ).all()
        for ids in pieces(plan, self.piece_bytes):
            yield self._read_piece(ids, with_arms=True)

    def iter_traces(self, learner_id: int, *, with_arms: bool = True) -> Iterator[RunRecord]:
        """Every trace, oldest first, read in pieces of about `piece_bytes` (exports): memory
        stays bounded by the piece whatever the number or the width of the traces.
        `with_arms` off leaves the arm outcomes unread (the records hold none)."""
        for piece in self.iter_trace_pieces(learner_id, with_arms=with_arms):
            yield from piece

    def iter_trace_pieces(
        self, learner_id: int, *, with_arms: bool = True
    ) -> Iterator[list[RunRecord]]:
        """`iter_traces` piece by piece."""
        t = traces.c
        after = 0
        while True:
            with reading(self.engine) as conn:
                plan = conn.execute(
                    _weighed(learner_id, self.dialect, with_arms=with_arms)
                    .where(t.id > after)
                    .order_by(t.id)
                    .limit(PLANNED_TRACES)
                ).all()
            if not plan:
                return
            after = int(plan[-1][0])
            for ids in pieces(plan, self.piece_bytes):
                yield self._read_piece(ids, with_arms=with_arms)

    def _read_piece(self, ids: Sequence[int], *, with_arms: bool) -> list[RunRecord]:
        """The traces of `ids` in that order (one gone since it was planned is left out)."""
        with reading(self.engine) as conn:
            rows = conn.execute(select(traces).where(traces.c.id.in_(ids))).all()
            by_id = {r.id: r for r in rows}
            ordered = [by_id[i] for i in ids if i in by_id]
            if with_arms:
                return traces_with_arms(conn, ordered)
        return [record_from_row(r, ()) for r in ordered]

    def timeseries(
        self, learner_id: int, metric: str, window_ms: int, since: int | None
    ) -> list[TimeBucket]:
        if window_ms <= 0:
            raise InvalidInput("window must be positive")
        with reading(self.engine) as conn:
            if metric == "tokens":
                t = traces.c
                bucket = (t.timestamp // window_ms) * window_ms
                query = select(bucket.label("t"), func.sum(t.usage_total), func.count()).where(
                    t.learner_id == learner_id
                )
                if since is not None:
                    query = query.where(t.timestamp >= since)
                rows = conn.execute(query.group_by(bucket).order_by(bucket)).all()
                return [TimeBucket(int(r[0]), float(r[1] or 0), None, int(r[2])) for r in rows]
            if metric == "convergence":
                rows = conn.execute(
                    text(_CONVERGENCE),
                    {"learner": learner_id, "w": window_ms, "since": since or 0},
                ).all()
                return [
                    TimeBucket(int(r[0]), float(r[2] or 0) / max(1, int(r[3])), r[1], int(r[3]))
                    for r in rows
                ]
        raise InvalidInput(f"unknown metric {metric!r}; expected tokens or convergence")


def traces_with_arms(conn: Connection, rows: Sequence[Any]) -> list[RunRecord]:
    """The run records of `rows` (traces of one learner), with their arm outcomes read in one
    query."""
    if not rows:
        return []
    pks = [r.id for r in rows]
    by_trace: dict[int, list[ArmOutcomeRecord]] = {pk: [] for pk in pks}
    a = trace_arms.c
    p = posteriors.c
    learner_id = rows[0].learner_id
    arm_rows = conn.execute(
        select(
            a.trace_pk,
            p.arm_id,
            p.label,
            a.included,
            a.referenced,
            a.token_cost,
            a.reward,
        )
        .select_from(
            trace_arms.join(posteriors, (p.learner_id == learner_id) & (p.arm_key == a.arm_key))
        )
        .where(a.trace_pk.in_(pks))
        .order_by(a.trace_pk, p.arm_id)
    ).all()
    for r in arm_rows:
        by_trace[r.trace_pk].append(
            ArmOutcomeRecord(
                r.arm_id,
                r.label,
                bool(r.included),
                bool(r.referenced),
                int(r.token_cost),
                r.reward,
            )
        )
    return [record_from_row(r, tuple(by_trace[r.id])) for r in rows]
