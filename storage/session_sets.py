"""Session sets in the database: the first writer of a session wins, appends compare and set.

Two replicas asked for the same new session at the same moment both draw a set; the insert
of one of them lands and the other reads it back and answers with it, so a session has one
set whichever replica answers. A session idle past its window is replaced by the next first
select (the same upsert, conditioned on the stored row being idle). Appends (arms new to the
inventory, arms the model needed) carry the version they were made from and are refused when
another replica got there first: the caller reads again and recomputes.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import delete, select, update

from learning_bot.engine.session_sets import SessionDecisions, SessionSet
from learning_bot.storage import queries
from learning_bot.storage.database import reading, with_retries, write_transaction
from learning_bot.storage.schema import session_sets
from learning_bot.storage.store_base import StoreBase

IDLE_ROWS_KEPT_MS = 86_400_000
"""Rows idle for longer than a day are deleted as new sessions start (the longest idle
window a learner may set is a day), so a learner keeps at most a day of sessions."""

PURGE_EVERY = 256
"""New sessions between two deletions of idle rows (per process)."""


_DECISION_LISTS = ("provisional", "added", "wanted")
_DECISION_TEXTS = ("provider", "model", "broken")
_DECISION_COUNTS = ("prompt_tokens", "reviewed", "drawn_turn", "missed_turn")


def _decision(raw: str | None) -> dict[str, Any]:
    """The `decision` column's fields as SessionSet keywords (a row without one: none)."""
    data = json.loads(raw) if raw else {}
    if not isinstance(data, dict):
        return {}
    out: dict[str, Any] = {}
    for name in _DECISION_LISTS:
        value = data.get(name)
        if isinstance(value, list):
            out[name] = tuple(str(v) for v in value)
    for name in _DECISION_TEXTS:
        value = data.get(name)
        if isinstance(value, str):
            out[name] = value
    for name in _DECISION_COUNTS:
        value = data.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            out[name] = value
    if data.get("grew") is True:
        out["grew"] = True
    return out


def _decision_json(session: SessionSet) -> str:
    data: dict[str, Any] = {}
    for name in _DECISION_LISTS:
        if getattr(session, name):
            data[name] = list(getattr(session, name))
    for name in (*_DECISION_TEXTS, *_DECISION_COUNTS):
        if getattr(session, name):
            data[name] = getattr(session, name)
    if session.grew:
        data["grew"] = True
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _row_to_set(row: Any) -> SessionSet:
    return SessionSet(
        key=row.session_key,
        included=tuple(json.loads(row.included)),
        left_out=tuple(json.loads(row.left_out)),
        is_baseline=bool(row.is_baseline),
        decided_at=int(row.decided_at),
        used_at=int(row.used_at),
        version=int(row.version),
        opening=tuple(json.loads(row.opening)) if row.opening else (),
        turns=int(row.turns or 0),
        redraws=int(row.redraws or 0),
        reason=row.reason or "",
        **_decision(row.decision),
    )


def _ids(arm_ids: tuple[str, ...]) -> str:
    return json.dumps(list(arm_ids), ensure_ascii=False, separators=(",", ":"))


def _decided(session: SessionSet) -> dict[str, Any]:
    """The columns a session's decision is stored in."""
    return {
        "turns": session.turns,
        "redraws": session.redraws,
        "reason": session.reason[:64] or None,
        "decision": _decision_json(session),
    }


class SessionSetStore(StoreBase):
    """The SessionSets port: the `session_sets` table (a part of SqlStore)."""

    _session_claims = 0

    def session_set(self, learner_id: int, key: str) -> SessionSet | None:
        s = session_sets.c
        with reading(self.engine) as conn:
            row = conn.execute(
                select(session_sets).where(s.learner_id == learner_id, s.session_key == key)
            ).first()
        return None if row is None else _row_to_set(row)

    def claim_session_set(self, learner_id: int, candidate: SessionSet, idle_ms: int) -> SessionSet:
        """Store `candidate` as the session's set unless a set used within `idle_ms` of its
        decision is stored already; returns the set that holds (the stored one, or it)."""
        s = session_sets.c
        values = {
            "learner_id": learner_id,
            "session_key": candidate.key,
            "included": _ids(candidate.included),
            "left_out": _ids(candidate.left_out),
            "is_baseline": candidate.is_baseline,
            "decided_at": candidate.decided_at,
            "used_at": candidate.used_at,
            "version": 0,
            "opening": json.dumps(list(candidate.opening)) if candidate.opening else None,
            **_decided(candidate),
        }
        stmt = self._insert(session_sets).values(**values)
        stmt = stmt.on_conflict_do_update(
            index_elements=["learner_id", "session_key"],
            set_={
                "included": stmt.excluded.included,
                "left_out": stmt.excluded.left_out,
                "is_baseline": stmt.excluded.is_baseline,
                "decided_at": stmt.excluded.decided_at,
                "used_at": stmt.excluded.used_at,
                "opening": stmt.excluded.opening,
                "turns": stmt.excluded.turns,
                "redraws": stmt.excluded.redraws,
                "reason": stmt.excluded.reason,
                "decision": stmt.excluded.decision,
                "version": s.version + 1,
            },
            where=s.used_at < candidate.decided_at - idle_ms,
        )
        self._session_claims += 1
        purge = self._session_claims % PURGE_EVERY == 1

        def run() -> SessionSet:
            with write_transaction(self.engine) as conn:
                if purge:
                    conn.execute(
                        delete(session_sets).where(
                            s.learner_id == learner_id,
                            s.used_at < candidate.decided_at - IDLE_ROWS_KEPT_MS,
                        )
                    )
                conn.execute(stmt)
                row = conn.execute(
                    select(session_sets).where(
                        s.learner_id == learner_id, s.session_key == candidate.key
                    )
                ).one()
                return _row_to_set(row)

        return with_retries(run)

    def save_session_set(self, learner_id: int, changed: SessionSet) -> bool:
        """Write `changed` (its arms and `used_at`) over the stored set it was made from
        (`changed.version`); False when another writer changed the set first."""
        s = session_sets.c

        def run() -> bool:
            with write_transaction(self.engine) as conn:
                result = conn.execute(
                    update(session_sets)
                    .where(
                        s.learner_id == learner_id,
                        s.session_key == changed.key,
                        s.version == changed.version,
                    )
                    .values(
                        included=_ids(changed.included),
                        left_out=_ids(changed.left_out),
                        is_baseline=changed.is_baseline,
                        decided_at=changed.decided_at,
                        used_at=changed.used_at,
                        version=changed.version + 1,
                        **_decided(changed),
                    )
                )
                return bool(result.rowcount)

        return with_retries(run)

    def session_decisions(self, learner_id: int) -> SessionDecisions:
        """The learner's stored sessions (at most a day of them), those redrawn while live,
        their redraws, and the sessions per latest redraw reason."""
        with reading(self.engine) as conn:
            totals = conn.exec_driver_sql(
                self._sql(queries.SESSION_DECISIONS), (learner_id,)
            ).first()
            reasons = conn.exec_driver_sql(
                self._sql(queries.SESSION_REDRAW_REASONS), (learner_id,)
            ).all()
        decided: SessionDecisions = queries.session_decisions(totals, reasons)
        return decided
