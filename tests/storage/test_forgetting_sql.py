"""Forgetting in SQL (storage.forgetting.forget_sql) computes engine.forgetting's rule to the
bit, on SQLite and PostgreSQL, and the copy frozen in migration 0009's server-side function
is the same expression."""

from __future__ import annotations

import importlib.util
import itertools
import re
from pathlib import Path
from types import ModuleType

import pytest
import sqlalchemy as sa

from learning_bot.engine.forgetting import forget, forgetting_prior, keep_factor
from learning_bot.storage import SqlStore
from learning_bot.storage.forgetting import forget_sql

MIGRATION = (
    Path(__file__).parents[2]
    / "storage"
    / "migrations"
    / "versions"
    / "0009_record_runs_function.py"
)

ROWS = list(
    itertools.product(
        (0.5, 1.0, 7.25),  # the value (alpha or beta) before the change
        (0.75, 3.0),  # the row's base on that side (prior_alpha or prior_beta)
        (0, 4),  # the base's pulls
        (0, 9),  # the last trace before the arm's reset (0: never reset)
        (1.0, 2.5),  # the arm type's prior on that side
        (1.0, keep_factor(3.0), keep_factor(200.0)),
        (0.0, 0.3, 1.0),  # the gain
    )
)


def migration() -> ModuleType:
    spec = importlib.util.spec_from_file_location("migration_0009", MIGRATION)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def normalised(sql: str) -> str:
    return " ".join(sql.split())


def in_function(side: str) -> str:
    """forget_sql as the function's update writes it for `side`."""
    return forget_sql(
        side,
        "(p_keep)[w.i]",
        f"(p_prior_{side})[w.i]",
        f"(p_{side}_gain)[w.i]",
        row="p.",
    )


def function_expression(body: str, side: str) -> str:
    """The expression the function's update sets `side` to, found in its body."""
    found = re.search(
        rf"(p\.{side} \* \(p_keep\)\[w\.i\] \+ .*? \+ \(p_{side}_gain\)\[w\.i\]),",
        normalised(body),
    )
    assert found is not None, f"no update of {side} in the function"
    return found.group(1)


def evaluate(conn: sa.Connection, expression: str, side: str) -> list[float]:
    """`expression` (on a row aliased p, with :keep, :prior and :gain) for every row of ROWS."""
    other = "beta" if side == "alpha" else "alpha"
    query = sa.text(
        f"SELECT {expression} FROM (SELECT :value AS {side}, 1.0 AS {other}, "
        f":base AS prior_{side}, 1.0 AS prior_{other}, :pulls AS prior_pulls, "
        ":reset AS reset_trace_pk) AS p"
    )
    names = ("value", "base", "pulls", "reset", "prior", "keep", "gain")
    return [
        float(conn.execute(query, dict(zip(names, row, strict=True))).scalar_one()) for row in ROWS
    ]


def expected(side: str) -> list[float]:
    """engine.forgetting for every row of ROWS."""
    out = []
    for value, base, pulls, reset, prior, keep, gain in ROWS:
        type_prior = (prior, 1.0) if side == "alpha" else (1.0, prior)
        bases = (base, 1.0) if side == "alpha" else (1.0, base)
        toward = forgetting_prior(type_prior, *bases, pulls, reset)
        out.append(forget(value, toward[0 if side == "alpha" else 1], keep, gain))
    return out


@pytest.mark.parametrize("side", ["alpha", "beta"])
def test_the_migration_holds_the_expression_the_builder_writes(side: str) -> None:
    assert function_expression(migration().FUNCTION, side) == normalised(in_function(side))


@pytest.mark.parametrize("side", ["alpha", "beta"])
def test_the_expression_computes_engine_forgetting_to_the_bit(database_url: str, side: str) -> None:
    engine = sa.create_engine(database_url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            got = evaluate(conn, forget_sql(side, ":keep", ":prior", ":gain", row="p."), side)
    finally:
        engine.dispose()
    assert got == expected(side)


@pytest.mark.parametrize("side", ["alpha", "beta"])
def test_the_installed_function_computes_engine_forgetting_to_the_bit(
    postgres_url: str, side: str
) -> None:
    """The body PostgreSQL holds for learning_bot_record_runs, its array reads replaced by one
    arm's values, evaluated over the grid."""
    store = SqlStore(postgres_url)
    try:
        store.learner_names()  # makes the schema
        with store.engine.connect() as conn:
            body = conn.exec_driver_sql(
                "SELECT p.prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                "WHERE n.nspname = current_schema() AND p.proname = 'learning_bot_record_runs'"
            ).scalar_one()
            expression = (
                function_expression(body, side)
                .replace("(p_keep)[w.i]", ":keep")
                .replace(f"(p_prior_{side})[w.i]", ":prior")
                .replace(f"(p_{side}_gain)[w.i]", ":gain")
            )
            got = evaluate(conn, expression, side)
    finally:
        store.close()
    assert got == expected(side)
