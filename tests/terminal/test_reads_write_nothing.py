"""Reads, exports, `db verify` and refused commands write nothing, whatever the configuration
of the process that runs them (docs/configuration.md: a learner's settings are its own state), and a
posterior tampered with is reported by `db verify` from the command line."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.processes import inherited

EXE = str(Path(sys.executable).with_name("learning-bot"))

OTHER_CONFIG = {"LEARNING_BOT_POLICY": "seed", "LEARNING_BOT_HALF_LIFE": "7"}
"""A configuration unlike the one the learner was made with."""

READS = (
    ("status",),
    ("status", "--json"),
    ("status", "arm", "Tool"),
    ("phase",),
    ("export",),
    ("export", "--format", "jsonl"),
    ("export", "--format", "csv", "--table", "posteriors"),
    ("db", "verify"),
    ("learner", "show", "default"),
    ("reset", "all"),  # refused: no confirmation off a terminal
    ("learner", "set", "default", "bogus=1"),  # refused: unknown setting
    ("learner", "set", "default", "halfLife=-1"),  # refused: invalid value
    ("status", "--learner", "nobody"),  # refused: no such learner
)


def run(
    url: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EXE, *args],
        capture_output=True,
        text=True,
        env=inherited({"LEARNING_BOT_DATABASE_URL": url, **(env or {})}),
        timeout=300,
    )


def make_learner(url: str) -> None:
    made = run(url, "simulate", "--traces", "60", "--arms", "8")
    assert made.returncode == 0, made.stderr
    settled = run(url, "learner", "set", "default", "halfLife=20")
    assert settled.returncode == 0, settled.stderr


def sqlite_bytes(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    digest = hashlib.sha256()
    for part in sorted(path.parent.glob(path.name + "*")):
        # the -shm file is SQLite's shared-memory index of the WAL, not data
        if part.is_file() and not part.name.endswith((".writer-lock", "-shm")):
            digest.update(part.name.encode() + b"\0" + part.read_bytes())
    return digest.hexdigest()


def postgres_rows(url: str) -> dict[str, list[tuple[object, ...]]]:
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            tables = sa.inspect(conn).get_table_names()
            return {
                t: sorted(tuple(map(repr, r)) for r in conn.exec_driver_sql(f"SELECT * FROM {t}"))
                for t in tables
            }
    finally:
        engine.dispose()


def test_reads_write_nothing_to_a_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "learning.sqlite"
    url = f"sqlite:///{path}"
    make_learner(url)
    before = sqlite_bytes(path)
    for args in READS:
        run(url, *args, env=OTHER_CONFIG)
        assert sqlite_bytes(path) == before, f"`learning-bot {' '.join(args)}` wrote"


def test_reads_write_nothing_to_postgresql(postgres_url: str) -> None:
    make_learner(postgres_url)
    before = postgres_rows(postgres_url)
    for args in READS:
        run(postgres_url, *args, env=OTHER_CONFIG)
        assert postgres_rows(postgres_url) == before, f"`learning-bot {' '.join(args)}` wrote"


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_tampered_posterior_is_reported_from_the_command_line(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = (
        f"sqlite:///{tmp_path}/t.sqlite"
        if backend == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    make_learner(url)
    assert run(url, "db", "verify", env=OTHER_CONFIG).returncode == 0
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "UPDATE posteriors SET alpha = alpha + 5 WHERE arm_id = "
            "(SELECT MIN(arm_id) FROM posteriors)"
        )
    engine.dispose()
    for env in (OTHER_CONFIG, {}):
        verified = run(url, "db", "verify", env=env)
        assert verified.returncode == 1, verified.stdout + verified.stderr
        assert "FAILED" in verified.stdout
        assert "but its base plus" in verified.stdout


def test_settings_change_only_by_the_settings_command(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.sqlite"
    make_learner(url)
    shown = run(url, "learner", "show", "default", "--json", env=OTHER_CONFIG)
    assert '"halfLife": 20.0' in shown.stdout
    assert "keeps its stored settings" in shown.stderr
    changed = run(url, "learner", "set", "default", "halfLife=7", "policy=seed", "--json")
    assert changed.returncode == 0, changed.stderr
    assert '"halfLife": 7.0' in changed.stdout
    assert '"policy": "seed"' in changed.stdout
    quiet = run(url, "learner", "show", "default", env=OTHER_CONFIG)
    assert "keeps its stored settings" not in quiet.stderr
