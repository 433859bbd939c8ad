"""A full disk: writes fail with a clear error, nothing already committed is lost or corrupted,
and the runs that could not be written are accounted for (spooled, or refused loudly)."""

from __future__ import annotations

import errno
import logging
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from learning_bot.engine import LearningConfig, Phase, Unavailable
from learning_bot.engine.service import LearningService
from learning_bot.storage import SqlStore
from learning_bot.storage.spool import Spool
from learning_bot.storage.spooling_store import SpoolingStore
from tests.processes import inherited

from .helpers import workload_arms, workload_report


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB filesystem (tmpfs); skipped where mounting is not allowed."""
    mount = tmp_path / f"tiny-{uuid.uuid4().hex[:6]}"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
        env=inherited(),
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        if os.environ.get("LEARNING_BOT_REQUIRE_TESTS") and os.geteuid() == 0:
            pytest.fail(f"could not mount a small tmpfs: {done.stderr.strip()}")
        pytest.skip("mounting a small filesystem needs root")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], env=inherited(), check=False)


def outage_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The warning and error lines the learning layer wrote (the access log is apart)."""
    return [
        record.getMessage()
        for record in caplog.records
        if record.name.startswith("learning_bot")
        and record.name != "learning_bot.access"
        and record.levelno >= logging.WARNING
    ]


def test_a_full_disk_is_a_clear_error_and_nothing_is_corrupted(
    tiny_disk: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    db = f"sqlite:///{tiny_disk}/full.sqlite"
    sql = SqlStore(db)
    spool = Spool(tmp_path / "spool", max_bytes=64 * 1024)  # the spool lives elsewhere
    store = SpoolingStore(sql, spool, retry_seconds=3600)
    svc = LearningService(sql, LearningConfig(phase=Phase.ACTIVE), cache_ttl=0, writer=store)
    arms = workload_arms(20)
    recorded = spooled = refused = 0
    errors: list[str] = []
    for i in range(3000):
        try:
            result = svc.observe(workload_report(f"r{i}", arms, [i % 20]))
        except Unavailable as exc:
            refused += 1
            errors.append(str(exc))
            if refused >= 15:
                break
            continue
        recorded += result.recorded
        spooled += result.spooled
    assert spooled > 0, "the disk never filled up"
    assert refused == 15 and "spool is full" in errors[-1]
    # Logged by state change: the outage and the full spool once each, not once a request.
    lines = outage_lines(caplog)
    assert len(lines) <= 6, lines
    assert sum("spool refuses runs" in line for line in lines) == 1, lines
    store.close()
    # The database still opens, verifies and holds every run it acknowledged as recorded.
    again = SqlStore(db)
    check = LearningService(again, LearningConfig(phase=Phase.ACTIVE), cache_ttl=0)
    report = check.verify()
    assert report.ok, report.problems
    assert check.traces(limit=1)[1] == recorded
    with again.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"
    again.close()


class Clock:
    """Seconds that pass only when the test says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def fill(path: Path) -> None:
    """Take every free byte of the filesystem `path` is on."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 16, 1 << 12, 1 << 9, 1):
            while True:
                try:
                    os.write(fd, b"\0" * size)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC, exc
                    break
    finally:
        os.close(fd)


def test_an_outage_on_a_full_disk_is_logged_by_its_changes(
    tiny_disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Database and spool on one full disk, as a server with both beside each other has them:
    15 refused observes over two and a half minutes log the outage and the full spool when
    they start and once a minute while they last, and storage coming back once, with the
    totals; nothing per request."""
    caplog.set_level(logging.INFO)
    clock = Clock()
    sql = SqlStore(f"sqlite:///{tiny_disk}/full.sqlite")
    spool = Spool(tiny_disk / "spool", clock=clock)
    store = SpoolingStore(sql, spool, retry_seconds=3600, clock=clock)
    svc = LearningService(sql, LearningConfig(phase=Phase.ACTIVE), cache_ttl=0, writer=store)
    arms = workload_arms(20)
    svc.observe(workload_report("before", arms, [0]))
    fill(tiny_disk / "filler")
    caplog.clear()
    refused = 0
    for i in range(200):
        try:
            svc.observe(workload_report(f"r{i}", arms, [i % 20]))
        except Unavailable:
            refused += 1
            clock.now += 10
            if refused == 15:
                break
    assert refused == 15
    lines = outage_lines(caplog)
    assert len(lines) <= 6, lines
    assert lines[0].startswith("storage is unavailable (database or disk is full)"), lines
    assert lines[1].startswith("the spool refuses runs ("), lines
    assert any(" for 1 min 0 s now " in line for line in lines), lines
    assert all("spooling 1 run" not in line for line in lines)

    (tiny_disk / "filler").unlink()
    caplog.clear()
    assert svc.observe(workload_report("after", arms, [1])).recorded
    back = [r.getMessage() for r in caplog.records if r.name == "learning_bot.spool"]
    assert back == ["storage is back after 2 min 30 s: 15 run(s) refused"], back
    assert svc.traces(limit=1)[1] == 2
    store.close()
