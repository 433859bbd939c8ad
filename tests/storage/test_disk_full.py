"""A full disk: writes fail with a clear error, nothing already committed is lost or corrupted,
and the runs that could not be written are accounted for (spooled, or refused loudly)."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import LearningConfig, Phase, Unavailable
from engine.service import LearningService
from storage import SqlStore
from storage.spool import Spool, SpoolingStore

from .helpers import workload_arms, workload_report


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB filesystem (tmpfs); skipped where mounting is not allowed."""
    mount = tmp_path / f"tiny-{uuid.uuid4().hex[:6]}"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
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
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_is_a_clear_error_and_nothing_is_corrupted(
    tiny_disk: Path, tmp_path: Path
) -> None:
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
            if refused >= 5:
                break
            continue
        recorded += result.recorded
        spooled += result.spooled
    assert spooled > 0, "the disk never filled up"
    assert refused >= 1 and "spool is full" in errors[-1]
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
