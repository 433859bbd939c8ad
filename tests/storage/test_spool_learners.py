"""Spooled runs name their learner: they replay into a database restored or created again (where
learner ids differ); a database error on observe is spooled, not raised; and dead letters are
replayed once by `learning-bot db replay-dead-letters` after their cause is fixed (SQLite and
PostgreSQL)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.pool import NullPool

from learning_bot.cli import main
from learning_bot.engine import LearningConfig, Phase
from learning_bot.engine.service import LearningService
from learning_bot.storage import SqlStore
from learning_bot.storage.dead_letters import DEAD_LETTER, dead_letters
from learning_bot.storage.spool import Spool
from learning_bot.storage.spool_lines import read_named_line
from learning_bot.storage.spooling_store import SpoolingStore
from tests.conftest import postgres_base_url

from .helpers import report
from .test_spool import Outage, wait_until

ACTIVE = LearningConfig(phase=Phase.ACTIVE)


def recreate(url: str) -> None:
    """The database as after a restore from nothing: every table gone, then made again by the
    next store that opens it."""
    if url.startswith("sqlite"):
        path = Path(url.removeprefix("sqlite:///"))
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        return
    found = re.search(r"search_path%3D(\w+)", url)
    base = postgres_base_url()
    assert found is not None and base is not None
    admin = create_engine(base, poolclass=NullPool)
    with admin.begin() as conn:
        conn.exec_driver_sql(f"DROP SCHEMA {found.group(1)} CASCADE")
        conn.exec_driver_sql(f"CREATE SCHEMA {found.group(1)}")
    admin.dispose()


def test_replay_into_a_recreated_database_loses_nothing(database_url: str, tmp_path: Path) -> None:
    root = tmp_path / "spool"
    sql = SqlStore(database_url)
    sql.open_learner("older", Phase.ACTIVE)  # so that "default" does not get id 1
    outage = Outage(sql)
    spooling = SpoolingStore(outage, Spool(root), retry_seconds=60)
    svc = LearningService(outage, ACTIVE, cache_ttl=0, writer=spooling)  # type: ignore[arg-type]
    assert svc.learner_id == 2
    assert svc.observe(report("stored-before")).recorded
    outage.down = True
    spooled = [svc.observe(report(f"down-{i}", timestamp=1_000 + i)) for i in range(12)]
    assert all(r.spooled for r in spooled)
    lines = [line for p in root.glob("p*/*.jsonl") for line in p.read_text().splitlines()]
    assert {read_named_line(line)[1] for line in lines} == {"default"}
    spooling.close()

    recreate(database_url)
    fresh = SqlStore(database_url)
    replaying = SpoolingStore(fresh, Spool(root), retry_seconds=60)
    # it replays on its own as it starts, and replay_now waits for that: whichever writes them
    replaying.replay_now()
    assert not replaying.spool.pending()
    assert not dead_letters(root)
    again = LearningService(fresh, ACTIVE, cache_ttl=0)
    assert again.learner_id == 1
    page, total = again.traces(limit=100)
    assert total == 12
    assert sorted(t.trace_id for t in page) == sorted(f"down-{i}" for i in range(12))
    assert sum(v.posterior.pulls for v in again.posteriors()) == 12 * 7
    assert again.verify().ok
    replaying.close()


def _refuse_traces(url: str, on: bool) -> None:
    """A trigger that makes the database refuse every new trace (an error that is not an
    outage), or its removal."""
    engine = create_engine(url, poolclass=NullPool)
    with engine.begin() as conn:
        if url.startswith("sqlite"):
            conn.exec_driver_sql(
                "CREATE TRIGGER refuse BEFORE INSERT ON traces "
                "BEGIN SELECT RAISE(ABORT, 'traces refused by trigger'); END"
                if on
                else "DROP TRIGGER refuse"
            )
        elif on:
            conn.exec_driver_sql(
                "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN RAISE EXCEPTION 'traces refused by trigger'; END $$"
            )
            conn.exec_driver_sql(
                "CREATE TRIGGER refuse BEFORE INSERT ON traces "
                "FOR EACH ROW EXECUTE FUNCTION refuse()"
            )
        else:
            conn.exec_driver_sql("DROP TRIGGER refuse ON traces")
    engine.dispose()


def test_a_database_error_is_spooled_and_dead_letters_replay_once(
    database_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = tmp_path / "spool"
    sql = SqlStore(database_url)
    spooling = SpoolingStore(sql, Spool(root), retry_seconds=0.05)
    svc = LearningService(sql, ACTIVE, cache_ttl=0, writer=spooling)
    assert svc.observe(report("fine")).recorded
    _refuse_traces(database_url, on=True)
    refused = [svc.observe(report(f"refused-{i}")) for i in range(3)]
    assert all(r.spooled and not r.recorded for r in refused)  # kept, not a 500
    wait_until(lambda: len(dead_letters(root)) == 3 and not spooling.spool.pending())
    assert "refused by trigger" in dead_letters(root)[0]["reason"]
    assert spooling.health()["deadLetters"] == 3

    cli = ["--database-url", database_url, "db", "replay-dead-letters", "--spool-dir", str(root)]
    capsys.readouterr()
    assert main(cli) == 1  # the cause is not fixed yet: they stay
    assert "3 run(s) refused again" in capsys.readouterr().err
    assert len(dead_letters(root)) == 3

    assert main([*cli, "--json"]) == 1
    said = json.loads(capsys.readouterr().out)
    assert (said["entries"], said["keptAgain"], said["stored"]) == (3, 3, 0)
    assert "refused by trigger" in said["latestReason"]

    _refuse_traces(database_url, on=False)
    assert main([*cli, "--dry-run"]) == 0
    assert "Would replay 3 run(s)" in capsys.readouterr().out
    assert main([*cli, "--dry-run", "--json"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert said["dryRun"] and said["entries"] == 3 and sum(said["learners"].values()) == 3
    assert svc.traces()[1] == 1 and len(dead_letters(root)) == 3

    assert main(cli) == 0
    assert "3 stored, 0 already stored" in capsys.readouterr().out
    assert not (root / DEAD_LETTER).exists()
    assert spooling.health()["deadLetters"] == 0
    assert main(cli) == 0
    assert "No dead letters" in capsys.readouterr().out
    page, total = svc.traces(limit=10)
    assert total == 4 and {t.trace_id for t in page} == {
        "fine",
        *(f"refused-{i}" for i in range(3)),
    }
    assert svc.verify().ok
    spooling.close()


def test_dead_letters_of_earlier_versions_replay_by_id(sqlite_url: str, tmp_path: Path) -> None:
    """A dead letter written before lines named their learner carries its id alone."""
    root = tmp_path / "spool"
    root.mkdir()
    sql = SqlStore(sqlite_url)
    svc = LearningService(sql, ACTIVE, cache_ttl=0)
    from learning_bot.engine.observation import observation_guard, rewards_for_run
    from learning_bot.engine.records import record_from_report, record_to_json

    run = report("old-style")
    record = record_from_report(
        run,
        rewards_for_run(run, ACTIVE),
        Phase.ACTIVE,
        observation_guard(run, ACTIVE, ignore_phase=True),
    )
    line = json.dumps({"l": svc.learner_id, **record_to_json(record)})
    (root / DEAD_LETTER).write_text(json.dumps({"reason": "x", "at": 1, "run": line}) + "\n")
    assert (
        main(["--database-url", sqlite_url, "db", "replay-dead-letters", "--spool-dir", str(root)])
        == 0
    )
    assert svc.traces()[1] == 1
    sql.close()


def test_dry_run_belongs_to_replay_dead_letters(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--database-url", sqlite_url, "db", "verify", "--dry-run"]) == 2
    assert "replay-dead-letters" in capsys.readouterr().err


def test_dead_lettered_arm_outcomes_replay_once_by_their_key(
    database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A per-arm outcome (a `reward` of one arm) the database refused waits in the dead-letter
    file like a run; `db replay-dead-letters` records it, by learner name, and its key makes a
    second copy of the same entry change nothing."""
    from learning_bot.engine.store_records import PendingArmOutcome
    from learning_bot.storage.spool_lines import outcome_line

    root = tmp_path / "spool"
    root.mkdir()
    sql = SqlStore(database_url)
    svc = LearningService(sql, ACTIVE, cache_ttl=0, learner="rewarded")
    assert svc.observe(report("r1")).recorded
    before = {v.arm_id: v.posterior.pulls for v in svc.posteriors()}
    pending = PendingArmOutcome(
        "tool:fs:Read", 1.0, True, None, True, 1_000, "arm-outcome:k1", Phase.ACTIVE
    )
    line = outcome_line(svc.learner_id, pending, name="rewarded")
    entry = json.dumps({"reason": "refused by trigger", "at": 1, "run": line})
    (root / DEAD_LETTER).write_text(entry + "\n" + entry + "\n")
    cli = ["--database-url", database_url, "db", "replay-dead-letters", "--spool-dir", str(root)]
    assert main([*cli, "--dry-run"]) == 0
    assert "Would replay 2 run(s)" in capsys.readouterr().out
    assert main(cli) == 0, capsys.readouterr().err
    assert not (root / DEAD_LETTER).exists()
    svc.refresh(force=True)
    after = {v.arm_id: v.posterior.pulls for v in svc.posteriors()}
    assert after["tool:fs:Read"] == before["tool:fs:Read"] + 1  # once, not twice
    assert {k: v for k, v in after.items() if k != "tool:fs:Read"} == {
        k: v for k, v in before.items() if k != "tool:fs:Read"
    }
    assert svc.verify().ok
    sql.close()


def test_dead_lettered_evidence_is_added_by_replay_dead_letters(
    database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Per-feature evidence spooled in an outage and refused on replay waits in the dead-letter
    file too; `db replay-dead-letters` adds it to the learner's evidence, by name."""
    from learning_bot.engine.context import feature_hash
    from learning_bot.engine.store_records import PendingEvidence
    from learning_bot.storage.spool_lines import evidence_line

    root = tmp_path / "spool"
    root.mkdir()
    sql = SqlStore(database_url)
    svc = LearningService(sql, ACTIVE, cache_ttl=0, learner="taught")
    rain = feature_hash("w", "rain")
    pending = PendingEvidence(
        (((rain,), (("tool:fs:Read", 1.0), ("tool:web:WebSearch", 0.0))),) * 3,
        1.0,
        1_000,
        (("tool:web:WebSearch", 3, 1),),
        Phase.ACTIVE,
    )
    line = evidence_line(svc.learner_id, pending, name="taught")
    (root / DEAD_LETTER).write_text(json.dumps({"reason": "x", "at": 1, "run": line}) + "\n")
    cli = ["--database-url", database_url, "db", "replay-dead-letters", "--spool-dir", str(root)]
    assert main(cli) == 0, capsys.readouterr().err
    assert not (root / DEAD_LETTER).exists()
    cells, count = sql.context_evidence(svc.learner_id)
    read = {(c.feature, c.arm_id): c.rewards for c in cells if c.feature == rain and c.arm_id}
    assert read[(rain, "tool:fs:Read")] == pytest.approx(3.0)
    assert read[(rain, "tool:web:WebSearch")] == pytest.approx(0.0)
    assert count == 3
    sql.close()


@pytest.mark.parametrize("reward", [float("nan"), 5.0, -1.0])
def test_a_spooled_reward_outside_zero_to_one_is_refused_on_reading(reward: float) -> None:
    """A spool line edited or damaged on disk cannot put an impossible reward into a posterior
    or the evidence: reading it fails, so replay dead-letters it with the reason."""
    from learning_bot.engine.store_records import PendingArmOutcome, PendingEvidence
    from learning_bot.storage.spool_lines import (
        evidence_line,
        outcome_line,
        read_evidence_line,
        read_outcome_line,
    )

    ok_outcome = PendingArmOutcome("tool:fs:Read", 1.0, True, None, True, 1, "k", Phase.ACTIVE)
    ok_evidence = PendingEvidence(((((1,), (("tool:fs:Read", 1.0),)),)), 1.0, 10, (), Phase.ACTIVE)
    for line, read in (
        (outcome_line(1, ok_outcome, "x"), read_outcome_line),
        (evidence_line(1, ok_evidence, "x"), read_evidence_line),
    ):
        assert read(line)[:2] == (1, "x")
        bad = line.replace("1.0", "NaN" if reward != reward else repr(reward), 1)
        with pytest.raises(ValueError, match="reward"):
            read(bad)
