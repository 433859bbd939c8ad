"""Reads: status counters, inclusion counts, pages of runs, the latest run of a conversation
and the time series the dashboard draws."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import Connection, func, select, text

from engine.errors import InvalidInput, NotFound
from engine.ports import RunStats, TimeBucket
from engine.records import ArmOutcomeRecord, RunRecord, record_from_row
from storage import queries
from storage.database import reading
from storage.schema import posteriors, trace_arms, traces
from storage.store_base import StoreBase

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


class Reads(StoreBase):
    """The Store port's reads."""

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
        row = conn.exec_driver_sql(self._sql(queries.RUN_STATS), (learner_id,)).first()
        if row is None:
            raise NotFound(f"no learner with id {learner_id}")
        return queries.run_stats(row)

    def trace_page(self, learner_id: int, limit: int, offset: int) -> tuple[list[RunRecord], int]:
        t = traces.c
        with reading(self.engine) as conn:
            rows = conn.execute(
                select(traces)
                .where(t.learner_id == learner_id)
                .order_by(t.timestamp.desc(), t.id.desc())
                .limit(limit)
                .offset(offset)
            ).all()
            page = traces_with_arms(conn, rows)
        return page, self.run_stats(learner_id).all_time_traces

    def iter_traces(self, learner_id: int, batch: int = 1000) -> Iterator[RunRecord]:
        t = traces.c
        after = 0
        while True:
            with reading(self.engine) as conn:
                rows = conn.execute(
                    select(traces)
                    .where(t.learner_id == learner_id, t.id > after)
                    .order_by(t.id)
                    .limit(batch)
                ).all()
                if not rows:
                    return
                page = traces_with_arms(conn, rows)
            after = rows[-1].id
            yield from page

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
