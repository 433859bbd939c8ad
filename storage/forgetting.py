"""Forgetting in SQL: engine.forgetting's rule as the one SQL expression every posterior write
uses, and the statement that applies one reward to one arm with it."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, Row, TextClause, select, text

from learning_bot.engine.arms import parse_arm_id
from learning_bot.engine.errors import NotFound
from learning_bot.engine.forgetting import forgetting_prior, keep_factor
from learning_bot.engine.posterior import prior_parameters
from learning_bot.storage.schema import learners


def forget_sql(side: str, keep: str, type_prior: str, gain: str, row: str = "") -> str:
    """engine.forgetting.forget(value, forgetting_prior(...), keep, gain) in SQL, on the
    posterior row being updated, in the same order of operations:

        value * keep + forgetting_prior * (1.0 - keep) + gain

    `side` is "alpha" or "beta"; `keep`, `type_prior` (the arm type's prior on that side) and
    `gain` are SQL for their values (placeholders or expressions); `row` is the row's alias and
    a dot, or nothing. forgetting_prior reads the row's base: its own base while that holds no
    evidence (prior_pulls = 0), Beta(1, 1) once the arm was reset (reset_trace_pk > 0), else
    the type's prior. The SQLite observe statement (storage.hotpath), the reward statement
    below and PostgreSQL's `learning_bot_record_runs` (migration 0009, which holds a copy of
    this text as written then; a test keeps the two equal) all write it."""
    prior = (
        f"(CASE WHEN {row}prior_pulls = 0 THEN {row}prior_{side} "
        f"WHEN {row}reset_trace_pk > 0 THEN 1.0 ELSE {type_prior} END)"
    )
    return f"{row}{side} * {keep} + {prior} * (1.0 - {keep}) + {gain}"


@lru_cache(maxsize=1)
def _reward_statement() -> TextClause:
    return text(
        "UPDATE posteriors SET "
        f"alpha = {forget_sql('alpha', ':keep', ':prior_alpha', ':alpha_gain')}, "
        f"beta = {forget_sql('beta', ':keep', ':prior_beta', ':beta_gain')}, "
        "pulls = pulls + 1, rewards = rewards + :reward, last_updated = :at "
        "WHERE learner_id = :learner AND arm_id = :arm "
        "RETURNING epoch, pulls, alpha, beta, last_updated"
    )


def add_reward(
    conn: Connection,
    learner_id: int,
    arm_id: str,
    reward: float,
    *,
    keep: float,
    at: int,
) -> Row[Any] | None:
    """Add one reward to an arm's posterior, forgetting with `keep` (1: the plain alpha += r,
    beta += 1 - r, to the bit, whatever the prior): one more pull, the reward recorded.
    Returns the row's epoch, pulls, alpha, beta and last_updated afterwards; None when the
    learner has no such arm."""
    type_prior = prior_parameters(parse_arm_id(arm_id).type) if keep != 1.0 else (1.0, 1.0)
    params = {
        "keep": keep,
        "prior_alpha": type_prior[0],
        "prior_beta": type_prior[1],
        "alpha_gain": reward,
        "beta_gain": 1.0 - reward,
        "reward": reward,
        "at": at,
        "learner": learner_id,
        "arm": arm_id,
    }
    return conn.execute(_reward_statement(), params).first()


def forgets_toward(row: Any) -> tuple[float, float]:
    """engine.forgetting.forgetting_prior for a posterior row read from the table (its arm id,
    base and reset), with its arm type's prior: what its evidence decays toward."""
    return forgetting_prior(
        prior_parameters(parse_arm_id(row.arm_id).type),
        float(row.prior_alpha),
        float(row.prior_beta),
        int(row.prior_pulls),
        int(row.reset_trace_pk),
    )


def locked_half_life(conn: Connection, learner_id: int) -> float:
    """The learner's half-life, its row locked for the rest of this transaction."""
    half_life = conn.execute(
        select(learners.c.half_life).where(learners.c.id == learner_id).with_for_update()
    ).scalar()
    if half_life is None:
        raise NotFound(f"no learner with id {learner_id}")
    return float(half_life)


def locked_keep(conn: Connection, learner_id: int) -> float:
    """The learner's forgetting factor, read (and its row locked) in this transaction."""
    return keep_factor(locked_half_life(conn, learner_id))
