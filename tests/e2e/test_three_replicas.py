"""Three `learning-bot serve` processes on one PostgreSQL: a phase change or a settings change
made on one replica is honoured by the very next select on the other two (50 trials, none
stale); a command retried with the same Idempotency-Key on another replica runs once; a
replica killed and started again serves the same state."""

from __future__ import annotations

import signal
import subprocess
from contextlib import ExitStack
from pathlib import Path

import httpx

from tests.e2e.launch import LEARNING_BOT, environment, served

BASE = "/__openclaw__/api/learning"
ARMS = [{"armId": f"tool:t:Tool{i:02d}", "tokenCost": 400} for i in range(12)]
TRIALS = 50


def test_three_replicas_agree(postgres_url: str, tmp_path: Path) -> None:
    env = environment(
        tmp_path,
        {
            "LEARNING_BOT_DATABASE_URL": postgres_url,
            "LEARNING_BOT_TOKEN_BUDGET": "2000",
            "LEARNING_BOT_SEED_ARM_IDS": "",
            "LEARNING_BOT_MIN_PULLS": "0",
            "LEARNING_BOT_BASELINE_RATE": "0",
            "LEARNING_BOT_RATE_LIMIT": "0",  # 100 admin changes in a few seconds
            # the staleness bound: every select checks the learner's version in its own
            # round trip (the default, 0.5 s, bounds how old a replica's answer can be)
            "LEARNING_BOT_CACHE_TTL": "0",
        },
    )
    upgraded = subprocess.run(
        [LEARNING_BOT, "db", "upgrade"], env=env, capture_output=True, text=True, check=False
    )
    assert upgraded.returncode == 0, upgraded.stderr
    with ExitStack() as stack:
        replicas = [stack.enter_context(served(env, stdout=subprocess.DEVNULL)) for _ in range(3)]
        clients = [stack.enter_context(httpx.Client(base_url=r.url, timeout=30)) for r in replicas]

        def select(client: httpx.Client) -> dict[str, object]:
            answer = client.post(f"{BASE}/select", json={"arms": ARMS})
            assert answer.status_code == 200, answer.text
            return dict(answer.json())

        for client in clients:  # every replica has the learner loaded and cached
            select(client)
        stale = 0
        for trial in range(TRIALS):
            writer = clients[trial % 3]
            phase = "active" if trial % 2 == 0 else "passive"
            budget = 1200 + 400 * (trial % 5)
            assert writer.post(f"{BASE}/phase", json={"phase": phase, "confirm": True}).is_success
            changed = writer.post(f"{BASE}/settings", json={"settings": {"tokenBudget": budget}})
            assert changed.status_code == 200, changed.text
            for reader in clients:
                if reader is writer:
                    continue
                answer = select(reader)
                everything = len(answer["selected"]) == len(ARMS)  # type: ignore[arg-type]
                if answer["tokenBudget"] != budget or everything != (phase == "passive"):
                    stale += 1
        assert stale == 0, f"{stale} stale selections in {2 * TRIALS}"

        # the same command on another replica, with the same key: run once, same reply
        assert clients[0].post(f"{BASE}/phase", json={"phase": "active", "confirm": True})
        run = {"traceId": "t1", "arms": ARMS, "toolCalls": [{"name": "Tool00"}]}
        assert clients[0].post(f"{BASE}/observe", json=run).status_code == 200
        key = {"Idempotency-Key": "three-replicas-1"}
        command = {"text": "reward tool:t:Tool00 good"}
        first = clients[0].post(f"{BASE}/command", json=command, headers=key)
        assert first.status_code == 200 and first.json()["kind"] == "ok", first.text
        for client in clients[1:]:
            assert client.post(f"{BASE}/command", json=command, headers=key).json() == first.json()

        def pulls_on(client: httpx.Client) -> int:
            rows = client.get(f"{BASE}/posteriors").json()
            return int(next(a["pulls"] for a in rows if a["armId"] == "tool:t:Tool00"))

        # a reset on one replica, then its undo on another: the next read elsewhere has each
        assert clients[1].post(f"{BASE}/reset", json={}).status_code == 200
        assert [pulls_on(c) for c in (clients[0], clients[2])] == [0, 0]
        assert clients[2].post(f"{BASE}/reset/undo", json={}).status_code == 200
        assert [pulls_on(c) for c in (clients[0], clients[1])] == [2, 2]

        # kill one replica, start another on the same database: it serves the same state
        replicas[2].proc.send_signal(signal.SIGKILL)
        replicas[2].proc.wait(timeout=60)
        again = stack.enter_context(served(env, stdout=subprocess.DEVNULL))
        with httpx.Client(base_url=again.url, timeout=30) as client:
            assert client.get(f"{BASE}/config").json()["tokenBudget"] == budget
            assert client.post(f"{BASE}/command", json=command, headers=key).json() == first.json()
            pulls = {a["armId"]: a["pulls"] for a in client.get(f"{BASE}/posteriors").json()}
        assert pulls["tool:t:Tool00"] == 2  # the run, and the one reward once


def test_an_observe_on_a_replica_with_a_stale_cache_is_recorded_under_the_new_phase(
    postgres_url: str, tmp_path: Path
) -> None:
    """Two replicas caching the learner for 30 s: runs observed on one right after the other
    changed the phase are recorded under the new phase (the write checks it in its own
    statement), not under the phase the observing replica still holds."""
    import sqlalchemy as sa

    env = environment(
        tmp_path,
        {
            "LEARNING_BOT_DATABASE_URL": postgres_url,
            "LEARNING_BOT_RATE_LIMIT": "0",
            "LEARNING_BOT_CACHE_TTL": "30",
        },
    )
    upgraded = subprocess.run(
        [LEARNING_BOT, "db", "upgrade"], env=env, capture_output=True, text=True, check=False
    )
    assert upgraded.returncode == 0, upgraded.stderr

    def run(trace_id: str) -> dict[str, object]:
        return {"traceId": trace_id, "arms": ARMS, "toolCalls": [{"name": "Tool00"}]}

    with ExitStack() as stack:
        a, b = (stack.enter_context(served(env, stdout=subprocess.DEVNULL)) for _ in range(2))
        first = stack.enter_context(httpx.Client(base_url=a.url, timeout=30))
        second = stack.enter_context(httpx.Client(base_url=b.url, timeout=30))
        for name, client in (("a", first), ("b", second)):
            # the learner (passive) and its arms in each replica's cache, read just now
            assert client.post(f"{BASE}/observe", json=run(f"warm-{name}")).status_code == 200
            assert client.post(f"{BASE}/select", json={"arms": ARMS}).status_code == 200

        assert first.post(f"{BASE}/phase", json={"phase": "active", "confirm": True}).is_success
        went_active = [second.post(f"{BASE}/observe", json=run(f"active-{i}")) for i in range(5)]
        assert first.post(f"{BASE}/phase", json={"phase": "passive", "confirm": True}).is_success
        went_passive = [second.post(f"{BASE}/observe", json=run(f"passive-{i}")) for i in range(5)]

    assert all(r.status_code == 200 for r in went_active + went_passive)
    assert all(r.json()["rewards"] and r.json()["skipped"] is None for r in went_active)
    assert all(r.json()["rewards"] == {} for r in went_passive)
    assert {r.json()["skipped"] for r in went_passive} == {"passive"}
    engine = sa.create_engine(postgres_url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            phases = dict(conn.exec_driver_sql("SELECT trace_id, phase FROM traces").all())
            pulls = conn.exec_driver_sql(
                "SELECT pulls FROM posteriors WHERE arm_id = 'tool:t:Tool00'"
            ).scalar_one()
    finally:
        engine.dispose()
    assert {t: p for t, p in phases.items() if t.startswith("active-")} == {
        f"active-{i}": "active" for i in range(5)
    }
    assert {t: p for t, p in phases.items() if t.startswith("passive-")} == {
        f"passive-{i}": "passive" for i in range(5)
    }
    assert pulls == 2 + 5  # the two warm runs bootstrapped, the five active ones; none after
