"""A `learning-bot serve` process SIGKILLed mid-command (its reward waiting on a lock the test
holds) leaves nothing stuck: the same command with the same Idempotency-Key, retried on another
replica, is answered "being handled" while the claim's lease runs, then runs exactly once."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import httpx
import sqlalchemy as sa

from tests.e2e.launch import LEARNING_BOT, environment, served

BASE = "/__openclaw__/api/learning"
ARMS = [{"armId": "tool:fs:Read", "tokenCost": 100}, {"armId": "tool:exec:Bash", "tokenCost": 100}]
REWARD = {"text": "reward tool:fs:Read good killed-mid-command"}
KEY = {"Idempotency-Key": "slack-trigger-42"}


def _read_arm(client: httpx.Client) -> tuple[float, int]:
    rows = client.get(f"{BASE}/posteriors").json()
    rows = rows.get("posteriors", rows) if isinstance(rows, dict) else rows
    found = [r for r in rows if r.get("armId", r.get("arm_id")) == "tool:fs:Read"]
    assert len(found) == 1, rows
    arm = found[0]
    return float(arm["alpha"]), int(arm["pulls"])


def test_a_command_killed_mid_write_runs_once_on_retry(postgres_url: str, tmp_path: Path) -> None:
    env = environment(
        tmp_path, {"LEARNING_BOT_DATABASE_URL": postgres_url, "LEARNING_BOT_COMMAND_LEASE": "2"}
    )
    upgraded = subprocess.run(
        [LEARNING_BOT, "db", "upgrade"], env=env, capture_output=True, text=True, check=False
    )
    assert upgraded.returncode == 0, upgraded.stderr
    engine = sa.create_engine(postgres_url, poolclass=sa.pool.NullPool)
    with ExitStack() as stack:
        a = stack.enter_context(served(env, stdout=subprocess.DEVNULL))
        b = stack.enter_context(served(env, stdout=subprocess.DEVNULL))
        ca = stack.enter_context(httpx.Client(base_url=a.url, timeout=30))
        cb = stack.enter_context(httpx.Client(base_url=b.url, timeout=30))
        phase = ca.post(f"{BASE}/phase", json={"phase": "active", "confirm": True})
        assert phase.status_code == 200, phase.text
        run = {"traceId": "t1", "arms": ARMS, "toolCalls": [{"name": "Read"}]}
        assert ca.post(f"{BASE}/observe", json=run).status_code == 200
        before = _read_arm(ca)

        lock = engine.connect()
        lock.exec_driver_sql("LOCK TABLE posteriors IN ACCESS EXCLUSIVE MODE")
        answered: list[object] = []

        def send() -> None:
            try:
                answered.append(ca.post(f"{BASE}/command", json=REWARD, headers=KEY))
            except httpx.HTTPError as exc:
                answered.append(exc)

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        deadline = time.monotonic() + 120
        with engine.connect() as look:  # the claim is committed before the write waits
            while not look.exec_driver_sql("SELECT count(*) FROM command_results").scalar():
                assert time.monotonic() < deadline, "the command never claimed its key"
                time.sleep(0.05)
        time.sleep(0.3)
        a.proc.send_signal(signal.SIGKILL)
        a.proc.wait(timeout=60)
        lock.rollback()
        lock.close()
        sender.join(timeout=120)
        assert answered and isinstance(answered[0], httpx.HTTPError)  # it died unanswered

        waiting = cb.post(f"{BASE}/command", json=REWARD, headers=KEY)
        assert waiting.status_code == 200
        assert "already being handled" in waiting.text  # within the lease
        time.sleep(2.2)
        first = cb.post(f"{BASE}/command", json=REWARD, headers=KEY)
        assert first.status_code == 200 and first.json()["kind"] == "ok", first.text
        again = cb.post(f"{BASE}/command", json=REWARD, headers=KEY)
        assert again.json() == first.json()
        alpha, pulls = _read_arm(cb)
        assert pulls == before[1] + 1 and alpha > before[0], (before, alpha, pulls)
        with engine.connect() as look:
            rewards = look.exec_driver_sql(
                "SELECT count(*) FROM audit_log WHERE kind = 'command' "
                "AND result LIKE 'ok:%%' AND detail LIKE '%%RewardCommand%%'"
            ).scalar()
        assert rewards == 1
    engine.dispose()
