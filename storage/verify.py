"""Verify: every posterior equals its base plus the changes recorded in its epoch, replayed
with forgetting as the writes applied them; traces are whole; counters match the traces."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, func, select, text

from learning_bot.engine.forgetting import forget, keep_factor
from learning_bot.engine.store_records import VerifyProblem, VerifyReport
from learning_bot.storage.database import reading
from learning_bot.storage.forgetting import forgets_toward
from learning_bot.storage.reads import Reads
from learning_bot.storage.schema import learners, posteriors, trace_arms, traces

_CHANGES_BY_ARM = """
SELECT arm_id, epoch, SUM(gained) AS gained, SUM(n) AS n FROM (
    SELECT p.arm_id AS arm_id, ta.epoch AS epoch, ta.reward AS gained, 1 AS n
    FROM trace_arms ta JOIN traces t ON t.id = ta.trace_pk
    JOIN posteriors p ON p.learner_id = t.learner_id AND p.arm_key = ta.arm_key
    WHERE t.learner_id = :learner AND ta.reward IS NOT NULL
    UNION ALL
    SELECT o.arm_id, o.epoch, o.reward, 1 FROM observations o WHERE o.learner_id = :learner
) AS c GROUP BY arm_id, epoch
"""

_CHANGES_IN_ORDER = """
SELECT arm_id, gained, seq FROM (
    SELECT p.arm_id AS arm_id, ta.reward AS gained, ta.seq AS seq
    FROM trace_arms ta JOIN traces t ON t.id = ta.trace_pk
    JOIN posteriors p ON p.learner_id = t.learner_id AND p.arm_key = ta.arm_key
    WHERE t.learner_id = :learner AND ta.reward IS NOT NULL AND ta.epoch = p.epoch
    UNION ALL
    SELECT o.arm_id, o.reward, o.seq FROM observations o
    JOIN posteriors p ON p.learner_id = o.learner_id AND p.arm_id = o.arm_id
    WHERE o.learner_id = :learner AND o.epoch = p.epoch
) AS c ORDER BY arm_id, seq
"""


class Verify(Reads):
    """The Store port's verify."""

    def verify(self, learner_id: int) -> VerifyReport:
        """Prove that every posterior equals its base since its last reset plus the changes
        recorded in its current epoch, that every trace is whole, and that the counters
        match the traces."""
        p = posteriors.c
        problems: list[VerifyProblem] = []
        with reading(self.engine, snapshot=True) as conn:
            sums = {
                (r.arm_id, int(r.epoch)): (float(r.gained or 0.0), int(r.n))
                for r in conn.execute(text(_CHANGES_BY_ARM), {"learner": learner_id})
            }
            rows = conn.execute(select(posteriors).where(p.learner_id == learner_id)).all()
            half_life = conn.execute(
                select(learners.c.half_life).where(learners.c.id == learner_id)
            ).scalar()
            keep = keep_factor(float(half_life or 0.0))
            replayed = _replay(conn, learner_id, rows, keep, problems) if keep != 1 else {}
            n_obs = 0
            for r in rows:
                gained, n = sums.get((r.arm_id, int(r.epoch)), (0.0, 0))
                n_obs += n
                want_alpha = r.prior_alpha + gained
                want_beta = r.prior_beta + (n - gained)
                if keep != 1.0:
                    want_alpha, want_beta = replayed.get(r.arm_id, (r.prior_alpha, r.prior_beta))
                tol = 1e-6 * (1 + n)
                if abs(r.alpha - want_alpha) > tol or abs(r.beta - want_beta) > tol:
                    problems.append(
                        VerifyProblem(
                            r.arm_id,
                            f"posterior Beta({r.alpha:.6g}, {r.beta:.6g}) but its base plus "
                            f"{n} recorded change(s) give Beta({want_alpha:.6g}, "
                            f"{want_beta:.6g})",
                        )
                    )
                want_rewards = r.prior_rewards + gained
                if abs(r.rewards - want_rewards) > tol:
                    problems.append(
                        VerifyProblem(
                            r.arm_id,
                            f"{r.rewards:.6g} rewards recorded but its base's "
                            f"{r.prior_rewards:.6g} plus {n} recorded change(s) give "
                            f"{want_rewards:.6g}",
                        )
                    )
                if r.pulls != r.prior_pulls + n:
                    problems.append(
                        VerifyProblem(
                            r.arm_id, f"{r.pulls} pulls but {r.prior_pulls} + {n} changes"
                        )
                    )
                if r.alpha <= 0 or r.beta <= 0:
                    problems.append(VerifyProblem(r.arm_id, "alpha and beta must be positive"))
            t = traces.c
            n_traces = conn.execute(
                select(func.count()).select_from(traces).where(t.learner_id == learner_id)
            ).scalar_one()
            armless = conn.execute(
                select(func.count())
                .select_from(traces)
                .where(
                    t.learner_id == learner_id,
                    ~select(trace_arms.c.trace_pk).where(trace_arms.c.trace_pk == t.id).exists(),
                )
            ).scalar_one()
            if armless:
                problems.append(VerifyProblem(None, f"{armless} trace(s) have no arm outcomes"))
            unknown = conn.execute(
                select(func.count(func.distinct(trace_arms.c.arm_key)))
                .select_from(trace_arms.join(traces, traces.c.id == trace_arms.c.trace_pk))
                .where(
                    t.learner_id == learner_id,
                    ~select(p.arm_id)
                    .where(p.learner_id == learner_id, p.arm_key == trace_arms.c.arm_key)
                    .exists(),
                )
            ).scalar_one()
            if unknown:
                problems.append(
                    VerifyProblem(None, f"{unknown} arm(s) appear in traces without a posterior")
                )
            counted = self._run_stats(conn, learner_id).all_time_traces
        if counted != n_traces:
            problems.append(
                VerifyProblem(None, f"counters say {counted} traces, the table holds {n_traces}")
            )
        return VerifyReport(len(rows), int(n_traces), n_obs, tuple(problems))


def _replay(
    conn: Connection,
    learner_id: int,
    rows: Sequence[Any],
    keep: float,
    problems: list[VerifyProblem],
) -> dict[str, tuple[float, float]]:
    """Each arm's base with its current epoch's changes applied in the order they were
    (`seq`), forgetting as the writes did: the posterior every arm must hold."""
    base = {r.arm_id: r for r in rows}
    changes: dict[str, list[tuple[float, int | None]]] = {}
    for arm_id, gained, seq in conn.execute(text(_CHANGES_IN_ORDER), {"learner": learner_id}):
        changes.setdefault(arm_id, []).append((float(gained), seq))
    out: dict[str, tuple[float, float]] = {}
    for arm_id, items in changes.items():
        r = base[arm_id]
        want = list(range(int(r.prior_pulls) + 1, int(r.prior_pulls) + len(items) + 1))
        if [s for _, s in items] != want:
            problems.append(VerifyProblem(arm_id, "its recorded changes are not numbered in order"))
        pa, pb = forgets_toward(r)
        alpha, beta = float(r.prior_alpha), float(r.prior_beta)
        for gained, _ in items:
            alpha = forget(alpha, pa, keep, gained)
            beta = forget(beta, pb, keep, 1.0 - gained)
        out[arm_id] = (alpha, beta)
    return out
