"""The context-aware policy's per-feature evidence in the database (the ContextStore port):
the `context_evidence` table, bounded per learner and shared by every replica.

The table's rows, by feature:

- feature > 0 (a 63-bit feature hash), arm_id an arm: a cell, the arm's rewards and runs under
  the feature as of the feature's run count `tick` (a cell the feature's later runs did not
  reward only decayed since, which the difference of ticks says);
- feature > 0, arm_id "": the feature's run count (its runs with rewards) in `runs`, and in
  `tick` the learner's evidence count as of the feature's last change (what a replica reads
  to know which features changed since it read them: ix_context_evidence_tick finds them);
- feature 0, arm_id "": the learner's evidence count in `tick`, which every observe that
  carried a context, every reset and every undo advances, and in `runs` the learner's
  evidence generation, which resets and undos advance: a replica whose evidence was read at
  another count reads the features changed since, at another generation all of it again.
  Advancing the count locks the row (PostgreSQL; SQLite writes one at a time), which makes the
  learner's evidence writes take turns;
- feature 0, arm_id an arm: how many runs that reported tool search deferred the arm (`runs`)
  and loaded it (`rewards`), added to by each observe;
- feature < 0: what the learner's last reset cleared, for its undo: the row (f, arm) kept as
  (-1 - f, arm), normalised to f's run count at the reset; the row (-1, "") names the reset in
  `tick`.

Writes add to what is stored, so replicas on one database add up: an observe's transaction
advances the learner's count, reads the rows of the runs' features and rewarded arms (and the
features' counts), computes the runs' change as the in-memory evidence does
(engine.context_policy.advance_cells: decay by the feature's runs since each cell's tick, then
add) and writes it, all under that lock. A reset and an undo take the same lock. Every
EVICT_EVERY saves (per process) the learner's cells are counted and, past the bound, whole
features are deleted, those seen in the fewest runs first (ties: the least recently changed),
with the counts of features left without cells: a learner holds at most max_cells +
EVICT_EVERY * (cells one observe writes) cells, and one count row per feature that has cells.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, and_, delete, func, insert, select

from learning_bot.engine.context_policy import EvidenceCell, advance_cells
from learning_bot.storage.database import reading, with_retries, write_transaction
from learning_bot.storage.schema import context_evidence
from learning_bot.storage.store_base import StoreBase

EVICT_EVERY = 32
"""Saves between two counts of a learner's cells (per process)."""
TICK_FEATURE = 0
"""The feature of the learner's rows: its evidence count (arm_id "") and deferral counts."""
RESET_MARK = -1
"""With arm_id "": the row naming the reset whose cleared evidence the negative rows keep."""
CHUNK = 500
"""Keys per IN list."""

RunEvidence = tuple[Sequence[int], Mapping[str, float]]
"""One observed run's features and rewards (arm id -> reward)."""


def _kept(feature: int) -> int:
    """The row a reset keeps the cell of `feature` in (and back)."""
    return -1 - feature


def _advance(conn: Connection, insert_: Any, learner_id: int, by: int, generation: int = 0) -> int:
    """Advance the learner's evidence count by `by` (and its generation by `generation`) and
    return the count; the row stays locked until the transaction ends (PostgreSQL), so the
    learner's evidence writes take turns."""
    c = context_evidence.c
    stmt = insert_(context_evidence).values(
        learner_id=learner_id,
        feature=TICK_FEATURE,
        arm_id="",
        rewards=0.0,
        runs=float(generation),
        tick=by,
    )
    stmt = stmt.on_conflict_do_update(
        index_elements=["learner_id", "feature", "arm_id"],
        set_={"tick": c.tick + by, "runs": c.runs + generation},
    ).returning(c.tick)
    return int(conn.execute(stmt).scalar_one())


def _cell(feature: int, arm_id: str, rewards: float, runs: float, tick: int) -> EvidenceCell:
    """A stored row as the engine reads it: a feature's own row (arm id "") as its run count."""
    if arm_id == "" and feature > TICK_FEATURE:
        return EvidenceCell(int(feature), "", 0.0, 0.0, int(runs))
    return EvidenceCell(int(feature), arm_id, float(rewards), float(runs), int(tick))


def _cells(
    conn: Connection, learner_id: int, features: Sequence[int], arm_ids: Sequence[str] | None = None
) -> list[EvidenceCell]:
    """The stored rows of the given features: every arm's, or those of `arm_ids` (with the
    features' own rows, arm id "")."""
    c = context_evidence.c
    out: list[EvidenceCell] = []
    arms = None if arm_ids is None else sorted({"", *arm_ids})
    for i in range(0, len(features), CHUNK):
        for j in range(0, 1 if arms is None else len(arms), CHUNK):
            where = [c.learner_id == learner_id, c.feature.in_(features[i : i + CHUNK])]
            if arms is not None:
                where.append(c.arm_id.in_(arms[j : j + CHUNK]))
            rows = conn.execute(
                select(c.feature, c.arm_id, c.rewards, c.runs, c.tick).where(*where)
            ).all()
            out.extend(_cell(*row) for row in rows)
    return out


def _run_counts(conn: Connection, learner_id: int, features: Sequence[int]) -> list[EvidenceCell]:
    """The run count of features without a row of their own (new ones, or cells written
    before features had one): the highest tick of their cells, as a row of arm id ""."""
    c = context_evidence.c
    out: list[EvidenceCell] = []
    for i in range(0, len(features), CHUNK):
        rows = conn.execute(
            select(c.feature, func.max(c.tick))
            .where(
                c.learner_id == learner_id,
                c.feature.in_(features[i : i + CHUNK]),
                c.arm_id != "",
            )
            .group_by(c.feature)
        ).all()
        out.extend(EvidenceCell(int(f), "", 0.0, 0.0, int(t)) for f, t in rows)
    return out


class ContextEvidenceStore(StoreBase):
    """The ContextStore port (a part of SqlStore)."""

    _evidence_saves = 0

    def context_evidence(self, learner_id: int) -> tuple[list[EvidenceCell], int]:
        """Every stored cell of the learner, and its evidence count (one read: a consistent
        pair)."""
        c = context_evidence.c
        with reading(self.engine) as conn:
            rows = conn.execute(
                select(c.feature, c.arm_id, c.rewards, c.runs, c.tick).where(
                    c.learner_id == learner_id, c.feature >= TICK_FEATURE
                )
            ).all()
        tick = 0
        cells = []
        for feature, arm_id, rewards, runs, at in rows:
            if feature == TICK_FEATURE:
                if arm_id == "":
                    tick = int(at)
            else:
                cells.append(_cell(feature, arm_id, rewards, runs, at))
        return cells, tick

    def context_evidence_state(self, learner_id: int) -> tuple[int, int]:
        """The learner's evidence count and generation (one row): another count than the one
        its evidence was read at says another replica changed it; another generation, that a
        reset or an undo did."""
        c = context_evidence.c
        with reading(self.engine) as conn:
            row = conn.execute(
                select(c.tick, c.runs).where(
                    c.learner_id == learner_id, c.feature == TICK_FEATURE, c.arm_id == ""
                )
            ).first()
        return (0, 0) if row is None else (int(row[0]), round(row[1]))

    def context_evidence_since(self, learner_id: int, tick: int) -> tuple[list[EvidenceCell], int]:
        """Every stored row of the features changed after the learner's evidence count `tick`
        (their own rows as run counts), and the count now (one read)."""
        c = context_evidence.c
        mine = c.learner_id == learner_id
        changed = (
            select(c.feature)
            .where(mine, c.tick > tick, c.feature > TICK_FEATURE, c.arm_id == "")
            .scalar_subquery()
        )
        now = (
            select(c.tick).where(mine, c.feature == TICK_FEATURE, c.arm_id == "").scalar_subquery()
        )
        with reading(self.engine) as conn:
            rows = conn.execute(
                select(c.feature, c.arm_id, c.rewards, c.runs, c.tick, now).where(
                    mine, c.feature.in_(changed)
                )
            ).all()
            if not rows:
                count = conn.execute(select(now)).scalar()
                return [], int(count or 0)
        return [_cell(*row[:5]) for row in rows], int(rows[0][5] or 0)

    def add_context_evidence(
        self,
        learner_id: int,
        runs: Sequence[RunEvidence],
        keep: float,
        max_cells: int,
        deferrals: Mapping[str, tuple[int, int]] | None = None,
    ) -> int:
        """Add observed runs (in order) to the learner's evidence, and `deferrals` (arm id ->
        (runs that deferred it, runs that loaded it)) to its counts, in one transaction;
        evict past `max_cells` now and then. Returns the learner's evidence count after it
        (the count before plus len(runs) when no other writer came in between)."""
        features = sorted({int(f) for fs, rewards in runs if rewards for f in fs})
        arm_ids = sorted({a for fs, rewards in runs if fs for a in rewards})
        deferred = sorted((deferrals or {}).items())
        self._evidence_saves += 1
        evict = self._evidence_saves % EVICT_EVERY == 0
        c = context_evidence.c

        def run() -> int:
            with write_transaction(self.engine) as conn:
                tick = _advance(conn, self._insert, learner_id, len(runs))
                if features:
                    stored = _cells(conn, learner_id, features, arm_ids)
                    counted = {s.feature for s in stored if s.arm_id == ""}
                    missing = [f for f in features if f not in counted]
                    if missing:
                        stored.extend(_run_counts(conn, learner_id, missing))
                    changed = advance_cells(stored, runs, keep)
                    self._write_cells(conn, learner_id, changed, tick)
                if deferred:
                    stmt = self._insert(context_evidence)
                    stmt = stmt.on_conflict_do_update(
                        index_elements=["learner_id", "feature", "arm_id"],
                        set_={
                            "runs": c.runs + stmt.excluded.runs,
                            "rewards": c.rewards + stmt.excluded.rewards,
                        },
                    )
                    conn.execute(
                        stmt,
                        [
                            {
                                "learner_id": learner_id,
                                "feature": TICK_FEATURE,
                                "arm_id": arm_id,
                                "rewards": float(loaded),
                                "runs": float(d),
                                "tick": 0,
                            }
                            for arm_id, (d, loaded) in deferred
                        ],
                    )
                if evict:
                    self._evict(conn, learner_id, max_cells)
                return tick

        return with_retries(run)

    def _write_cells(
        self, conn: Connection, learner_id: int, cells: Iterable[EvidenceCell], stamp: int
    ) -> None:
        """Write cells as computed, a feature's run count (arm id "") stamped with the
        learner's evidence count `stamp`."""
        rows = [
            {
                "learner_id": learner_id,
                "feature": cell.feature,
                "arm_id": cell.arm_id,
                "rewards": cell.rewards,
                "runs": float(cell.tick) if cell.arm_id == "" else cell.runs,
                "tick": stamp if cell.arm_id == "" else cell.tick,
            }
            for cell in sorted(cells, key=lambda c: (c.feature, c.arm_id))
        ]
        if not rows:
            return
        stmt = self._insert(context_evidence)
        stmt = stmt.on_conflict_do_update(
            index_elements=["learner_id", "feature", "arm_id"],
            set_={
                "rewards": stmt.excluded.rewards,
                "runs": stmt.excluded.runs,
                "tick": stmt.excluded.tick,
            },
        )
        conn.execute(stmt, rows)

    def _evict(self, conn: Connection, learner_id: int, max_cells: int) -> None:
        """Past the bound, delete whole features, those seen in the fewest runs first and
        among them the least recently changed (many rare words seen once each tie on their
        count: a cut by count alone deleted none of them)."""
        c = context_evidence.c
        rows = and_(c.learner_id == learner_id, c.feature > TICK_FEATURE)
        mine = and_(rows, c.arm_id != "")
        sizes = {
            int(f): int(n)
            for f, n in conn.execute(
                select(c.feature, func.count()).where(mine).group_by(c.feature)
            ).all()
        }
        excess = sum(sizes.values()) - max_cells
        if excess <= 0:
            return
        counts = {
            int(f): (float(runs), int(stamp))
            for f, runs, stamp in conn.execute(
                select(c.feature, c.runs, c.tick).where(rows, c.arm_id == "")
            ).all()
        }
        doomed: list[int] = []
        for feature in sorted(sizes, key=lambda f: (*counts.get(f, (0.0, 0)), f)):
            if excess <= 0:
                break
            doomed.append(feature)
            excess -= sizes[feature]
        for at in range(0, len(doomed), CHUNK):
            conn.execute(
                delete(context_evidence).where(rows, c.feature.in_(doomed[at : at + CHUNK]))
            )
        # and the run counts of features left without cells
        cells = select(c.feature).where(mine).distinct()
        conn.execute(delete(context_evidence).where(rows, c.arm_id == "", c.feature.not_in(cells)))

    def context_deferrals(self, learner_id: int, arm_id: str) -> tuple[int, int]:
        """Runs that deferred the arm (left it out and reported what they loaded), and runs
        that loaded it, since its last reset."""
        c = context_evidence.c
        with reading(self.engine) as conn:
            row = conn.execute(
                select(c.runs, c.rewards).where(
                    c.learner_id == learner_id, c.feature == TICK_FEATURE, c.arm_id == arm_id
                )
            ).first()
        return (0, 0) if row is None else (round(row[0]), round(row[1]))

    def context_evidence_rows(self, learner_id: int) -> int:
        """The learner's stored evidence cells (its count's and deferral rows not counted)."""
        c = context_evidence.c
        with reading(self.engine) as conn:
            return int(
                conn.execute(
                    select(func.count())
                    .select_from(context_evidence)
                    .where(c.learner_id == learner_id, c.feature > TICK_FEATURE, c.arm_id != "")
                ).scalar_one()
            )


def clear_evidence(
    conn: Connection, insert_: Any, learner_id: int, arm_ids: Sequence[str] | None, reset_id: int
) -> None:
    """Inside a reset's transaction: clear the arms' evidence cells and deferral counts (every
    arm's with None), keeping them for the reset's undo in place of what the previous reset
    kept, and advance the learner's evidence count and generation (every replica reads its
    evidence again).

    A kept cell is normalised to its feature's run count at the reset (decayed by the feature's
    runs since the cell's tick), so that undo can add it to what the feature learnt since
    without comparing run counts across the reset (a full reset starts every feature's count
    again)."""
    c = context_evidence.c
    _advance(conn, insert_, learner_id, 1, generation=1)
    conn.execute(delete(context_evidence).where(c.learner_id == learner_id, c.feature < 0))
    mine = and_(c.learner_id == learner_id, c.feature >= TICK_FEATURE, c.arm_id != "")
    if arm_ids is not None:
        mine = and_(mine, c.arm_id.in_(arm_ids))
    rows = conn.execute(select(c.feature, c.arm_id, c.rewards, c.runs, c.tick).where(mine)).all()
    features = and_(c.learner_id == learner_id, c.feature > TICK_FEATURE)
    ticks = dict(  # each feature's run count: its own row's, else its cells' highest tick
        conn.execute(
            select(c.feature, func.max(c.tick)).where(features, c.arm_id != "").group_by(c.feature)
        ).all()
    )
    ticks.update(
        (f, round(n))
        for f, n in conn.execute(select(c.feature, c.runs).where(features, c.arm_id == ""))
    )
    keep = _keep_of(conn, learner_id)
    kept: list[dict[str, Any]] = [
        {"feature": RESET_MARK, "arm_id": "", "rewards": 0.0, "runs": 0.0, "tick": reset_id}
    ]
    for feature, arm_id, rewards, runs, tick in rows:
        at = int(ticks.get(feature, tick)) if feature > TICK_FEATURE else int(tick)
        decay = keep ** (at - int(tick)) if at > tick else 1.0
        kept.append(
            {
                "feature": _kept(int(feature)),
                "arm_id": arm_id,
                "rewards": float(rewards) * decay,
                "runs": float(runs) * decay,
                "tick": at,
            }
        )
    for row in kept:
        row["learner_id"] = learner_id
    conn.execute(insert(context_evidence), kept)
    conn.execute(delete(context_evidence).where(mine))


def restore_evidence(conn: Connection, insert_: Any, learner_id: int, reset_id: int) -> bool:
    """Inside an undo's transaction: put back what reset `reset_id` cleared, adding it to what
    was learnt since (as undo does for posteriors: nothing of the kept evidence decays for the
    runs in between), and advance the learner's evidence count and generation. False when the
    kept evidence
    is another reset's (only the last reset's is kept: undoing an earlier one after undoing
    it restores its posteriors, not its evidence)."""
    c = context_evidence.c
    mark = conn.execute(
        select(c.tick).where(c.learner_id == learner_id, c.feature == RESET_MARK, c.arm_id == "")
    ).scalar()
    _advance(conn, insert_, learner_id, 1, generation=1)
    if mark is None or int(mark) != reset_id:
        return False
    kept = [
        EvidenceCell(_kept(int(f)), a, float(s), float(n), int(t))
        for f, a, s, n, t in conn.execute(
            select(c.feature, c.arm_id, c.rewards, c.runs, c.tick).where(
                c.learner_id == learner_id, c.feature < 0, c.arm_id != ""
            )
        ).all()
    ]
    features = sorted({k.feature for k in kept})  # TICK_FEATURE among them: deferral counts
    current = {(x.feature, x.arm_id): x for x in _cells(conn, learner_id, features)}
    ticks: dict[int, int] = {}
    for cell in current.values():
        ticks[cell.feature] = max(ticks.get(cell.feature, 0), cell.tick)
    keep = _keep_of(conn, learner_id)
    rows = []
    for k in kept:
        now = current.get((k.feature, k.arm_id))
        is_cell = k.feature > TICK_FEATURE
        at = ticks.get(k.feature, k.tick) if is_cell else 0
        s, n = k.rewards, k.runs
        if now is not None:
            decay = keep ** (at - now.tick) if is_cell and at > now.tick else 1.0
            s += now.rewards * decay
            n += now.runs * decay
        rows.append(
            {
                "learner_id": learner_id,
                "feature": k.feature,
                "arm_id": k.arm_id,
                "rewards": s,
                "runs": n,
                "tick": at,
            }
        )
    rows.sort(key=lambda r: (r["feature"], r["arm_id"]))
    if rows:
        stmt = insert_(context_evidence)
        stmt = stmt.on_conflict_do_update(
            index_elements=["learner_id", "feature", "arm_id"],
            set_={
                "rewards": stmt.excluded.rewards,
                "runs": stmt.excluded.runs,
                "tick": stmt.excluded.tick,
            },
        )
        conn.execute(stmt, rows)
    conn.execute(delete(context_evidence).where(c.learner_id == learner_id, c.feature < 0))
    return True


def _keep_of(conn: Connection, learner_id: int) -> float:
    """The learner's keep factor (engine.forgetting), from its stored half-life."""
    from learning_bot.engine.forgetting import keep_factor
    from learning_bot.storage.schema import learners

    half_life = conn.execute(
        select(learners.c.half_life).where(learners.c.id == learner_id)
    ).scalar()
    return keep_factor(float(half_life or 0.0))
