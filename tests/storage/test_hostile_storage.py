"""Storage under hostile input: a spool that cannot jam, counters that cannot overflow, a SQLite
file removed while serving, a full spool, and set-based resets (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from learning_bot.cli import main
from learning_bot.engine import Arm, LearningConfig, Phase, ReportedArm, RunReport, ToolCall
from learning_bot.engine.records import RunRecord
from learning_bot.engine.service import LearningService
from learning_bot.engine.usage import Usage
from learning_bot.storage import SqlStore
from learning_bot.storage.dead_letters import DEAD_LETTER, dead_letters
from learning_bot.storage.hotpath import COUNTER_CAP, SHARDS
from learning_bot.storage.spool import Spool, SpoolFull
from learning_bot.storage.spooling_store import SpoolingStore

from .helpers import report
from .test_spool import Outage, record_of, wait_until


def verify_passes(url: str, capsys: pytest.CaptureFixture[str]) -> str:
    code = main(["--database-url", url, "db", "verify"])
    out = capsys.readouterr().out
    assert code == 0, out
    return out


def poisoned(svc: LearningService, trace_id: str) -> RunRecord:
    """A record with a token count above 2^63 - 1, made past the codec's checks: what an
    older version could spool. The database refuses it (bigint out of range on PostgreSQL,
    an integer too large on SQLite)."""
    record = record_of(svc, report(trace_id))
    object.__setattr__(record.usage, "total", 2**63)
    return record


def test_a_run_storage_refuses_on_replay_is_dead_lettered_and_replay_goes_on(
    database_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sql = SqlStore(database_url)
    outage = Outage(sql)
    root = tmp_path / "spool"
    store = SpoolingStore(outage, Spool(root), retry_seconds=0.05)
    svc = LearningService(outage, LearningConfig(phase=Phase.ACTIVE), cache_ttl=0, writer=store)  # type: ignore[arg-type]
    outage.down = True
    assert svc.observe(report("good-1")).spooled
    store.spool.append(svc.learner_id, [poisoned(svc, "bad-int")])
    # A line no codec reads (a lone surrogate in the trace id), as an older version wrote it.
    line = json.loads(store.spool.dir.joinpath("000000000001.jsonl").read_text().splitlines()[0])
    line["traceId"] = "bad-\ud800"
    with open(store.spool.dir / "000000000001.jsonl", "a") as handle:
        handle.write(json.dumps(line) + "\n")
    assert svc.observe(report("good-2")).spooled
    caplog.set_level(logging.ERROR, "learning_bot.spool")
    outage.down = False
    store.replay_now()
    # the replay thread may still be at work when the spool reads empty: wait for its letters
    wait_until(lambda: not store.spool.pending() and len(dead_letters(root)) >= 2)
    page, total = svc.traces(limit=10)
    assert {t.trace_id for t in page} == {"good-1", "good-2"} and total == 2
    dead = dead_letters(root)
    assert len(dead) == 2
    assert all(entry["reason"] for entry in dead)
    assert store.health()["deadLetters"] == 2
    refused = [r for r in caplog.records if "refused spooled run" in r.getMessage()]
    assert len(refused) == 2
    # Later runs are stored at once, not spooled behind the refused ones.
    assert svc.observe(report("after")).recorded
    # A second replay pass over the same file does not add the entries twice.
    store.replay_now()
    assert len(dead_letters(root)) == 2
    store.close()
    svc.store.close()
    monkeypatch.setenv("LEARNING_BOT_SPOOL_DIR", str(root))
    out = verify_passes(database_url, capsys)
    assert "2 run(s) the database refused" in out and DEAD_LETTER in out


def test_counters_saturate_instead_of_overflowing(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    sql = SqlStore(database_url)
    svc = LearningService(sql, LearningConfig(phase=Phase.ACTIVE), cache_ttl=0)
    svc.observe(report("first"))
    with sql.engine.begin() as conn:
        for shard in range(SHARDS):
            conn.execute(
                text(
                    "INSERT INTO run_stats (learner_id, stats_epoch, shard, trace_count, "
                    "total_tokens, baseline_runs, baseline_tokens, baseline_duration, "
                    "selected_runs, selected_tokens, selected_duration, changes) "
                    "VALUES (:l, 0, :s, 0, :near, 0, :near, :near, 0, :near, :near, 0) "
                    "ON CONFLICT (learner_id, stats_epoch, shard) DO UPDATE SET "
                    "total_tokens = :near, baseline_tokens = :near, selected_tokens = :near, "
                    "baseline_duration = :near, selected_duration = :near"
                ),
                {"l": svc.learner_id, "s": shard, "near": COUNTER_CAP - 10},
            )
    runs = [
        RunReport(
            trace_id=f"big-{i}",
            arms=(ReportedArm(Arm("tool:fs:Read", 10), True),),
            tool_calls=(ToolCall("Read"),),
            usage=Usage(total=10**12),
            duration_ms=10**12,
            is_baseline=i % 2 == 0,
        )
        for i in range(80)
    ]
    for run in runs:
        assert svc.observe(run).recorded
    summary = svc.summary()
    assert summary.trace_count == 81
    # Every shard a run went to stopped at the cap; none went past it.
    assert SHARDS * (COUNTER_CAP - 10) < summary.total_tokens <= SHARDS * COUNTER_CAP
    with sql.engine.connect() as conn:
        top = conn.execute(text("SELECT MAX(total_tokens) FROM run_stats")).scalar_one()
    assert top == COUNTER_CAP
    assert svc.status().summary.trace_count == 81
    assert svc.traces(limit=5)[1] == 81
    assert svc.verify().ok
    sql.close()
    verify_passes(database_url, capsys)


def test_a_sqlite_file_removed_while_serving_is_unavailable_and_runs_are_spooled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "served.sqlite"
    url = f"sqlite:///{path}"
    sql = SqlStore(url)
    store = SpoolingStore(sql, Spool(tmp_path / "spool"), retry_seconds=0.05)
    svc = LearningService(sql, LearningConfig(phase=Phase.ACTIVE), cache_ttl=0, writer=store)
    assert svc.observe(report("kept")).recorded
    moved = tmp_path / "moved.sqlite"
    path.rename(moved)
    result = svc.observe(report("during"))
    assert result.spooled and not result.recorded
    with pytest.raises(Exception, match="removed while serving"):
        svc.refresh(force=True)
    assert store.spool.pending()
    # The operator puts the file back: the spooled run reaches it.
    moved.rename(path)
    wait_until(lambda: not store.spool.pending())
    assert svc.traces()[1] == 2
    store.close()
    verify_passes(url, capsys)


def test_a_replaced_sqlite_file_is_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "served.sqlite"
    sql = SqlStore(f"sqlite:///{path}")
    svc = LearningService(sql, LearningConfig(phase=Phase.ACTIVE), cache_ttl=0)
    svc.observe(report("kept"))
    copy = tmp_path / "copy.sqlite"
    copy.write_bytes(path.read_bytes())
    copy.replace(path)
    with pytest.raises(Exception, match="replaced while serving"):
        svc.observe(report("lost?"))
    sql.close()


def test_a_full_spool_logs_once_per_state_change(
    sqlite_url: str, tmp_path: Path, caplog: Any
) -> None:
    sql = SqlStore(sqlite_url)
    outage = Outage(sql)
    store = SpoolingStore(outage, Spool(tmp_path / "spool", max_bytes=3000), retry_seconds=60)
    svc = LearningService(outage, LearningConfig(phase=Phase.ACTIVE), cache_ttl=0, writer=store)  # type: ignore[arg-type]
    outage.down = True
    caplog.set_level(logging.WARNING, "learning_bot.spool")
    refused = 0
    for i in range(40):
        try:
            svc.observe(report(f"r{i}"))
        except SpoolFull as exc:
            refused += 1
            assert "\n" not in str(exc) and "spool is full" in str(exc)
    assert refused > 20
    full_lines = [r for r in caplog.records if "full" in r.getMessage()]
    assert len(full_lines) == 1
    assert store.health()["full"]
    store.close()


def test_spool_appends_stay_flat_over_20000_runs(sqlite_url: str, tmp_path: Path) -> None:
    """20,000 spooled runs in batches of 2,000: the last batch costs about what the first did
    (the figure is in RELIABILITY.md; the factor here only catches a cost that grows with
    the spool, as listing every segment on each append did)."""
    sql = SqlStore(sqlite_url)
    svc = LearningService(sql, LearningConfig(phase=Phase.ACTIVE))
    spool = Spool(tmp_path / "spool", segment_bytes=256 * 1024)
    record = record_of(svc, report("x"))
    costs = []
    for _batch in range(10):
        start = time.perf_counter()
        for _ in range(2000):
            spool.append(svc.learner_id, [record])
        costs.append((time.perf_counter() - start) / 2000)
    assert len(list(spool.dir.glob("*.jsonl"))) > 5  # rotated by size
    assert costs[-1] < costs[0] * 5 + 0.001
    assert spool.size_bytes() == sum(p.stat().st_size for p in spool.dir.glob("*.jsonl"))
    spool.close()
    sql.close()


def test_a_reset_of_1000_arms_is_one_request(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    sql = SqlStore(database_url)
    svc = LearningService(sql, LearningConfig(phase=Phase.ACTIVE), cache_ttl=0)
    arms = [Arm(f"tool:b:T{i:04d}", 10) for i in range(1000)]
    svc.observe(
        RunReport(
            trace_id="wide",
            arms=tuple(ReportedArm(a, True) for a in arms),
            tool_calls=(ToolCall("T0001"),),
        )
    )
    result = svc.reset([a.id for a in arms])
    assert len(result.arm_ids) == 1000
    assert svc.undo_reset().undone
    with pytest.raises(Exception, match="at most 1000"):
        svc.reset([a.id for a in arms] + ["tool:b:extra"])
    assert svc.verify().ok
    sql.close()
    verify_passes(database_url, capsys)


@pytest.mark.parametrize(
    "url",
    [
        # what a replica sees while the compose file's postgres container restarts
        "postgresql+psycopg://postgres@no-such-host.invalid:5432/test?connect_timeout=5",
        "postgresql+psycopg://postgres@127.0.0.1:1/test?connect_timeout=5",
    ],
    ids=["host-does-not-resolve", "connection-refused"],
)
def test_a_server_out_of_reach_is_unavailable_not_an_internal_error(url: str) -> None:
    """The driver raises these itself, without a SQLSTATE; a select whose session set cannot
    be saved must answer "storage is unavailable" (503), never 500."""
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    from learning_bot.engine.errors import Unavailable
    from learning_bot.storage.database import with_retries

    engine = create_engine(url, poolclass=NullPool)
    try:

        def run() -> None:
            with engine.connect() as conn:
                conn.execute(text("SELECT 1"))

        with pytest.raises(Unavailable, match="storage is unavailable"):
            with_retries(run)
    finally:
        engine.dispose()
