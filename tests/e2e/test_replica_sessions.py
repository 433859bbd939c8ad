"""One session through two `learning-bot serve` processes on one PostgreSQL: the same arms in
the same order whichever replica answers, one after the other and at the same moment; and the
gateway's `qortex_learning_select` over `/v1` keeps a session's set too."""

from __future__ import annotations

import subprocess
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import httpx

from tests.e2e.launch import LEARNING_BOT, environment, served

BASE = "/__openclaw__/api/learning"
ARMS = [{"armId": f"tool:t:Tool{i:02d}", "tokenCost": 400} for i in range(40)]


def test_two_replicas_answer_a_session_alike(postgres_url: str, tmp_path: Path) -> None:
    env = environment(
        tmp_path,
        {
            "LEARNING_BOT_DATABASE_URL": postgres_url,
            "LEARNING_BOT_TOKEN_BUDGET": "4000",
            "LEARNING_BOT_SEED_ARM_IDS": "",
            "LEARNING_BOT_MIN_PULLS": "0",
            "LEARNING_BOT_BASELINE_RATE": "0",
        },
    )
    upgraded = subprocess.run(
        [LEARNING_BOT, "db", "upgrade"], env=env, capture_output=True, text=True, check=False
    )
    assert upgraded.returncode == 0, upgraded.stderr
    with ExitStack() as stack:
        a = stack.enter_context(served(env, stdout=subprocess.DEVNULL))
        b = stack.enter_context(served(env, stdout=subprocess.DEVNULL))
        ca = stack.enter_context(httpx.Client(base_url=a.url, timeout=30))
        cb = stack.enter_context(httpx.Client(base_url=b.url, timeout=30))
        phase = ca.post(f"{BASE}/phase", json={"phase": "active", "confirm": True})
        assert phase.status_code == 200, phase.text
        time.sleep(1.0)  # the other replica takes the phase within its cache interval (0.5 s)

        def select(client: httpx.Client, key: str) -> list[str]:
            answer = client.post(f"{BASE}/select", json={"arms": ARMS, "sessionKey": key})
            assert answer.status_code == 200, answer.text
            return list(answer.json()["selected"])

        # one after the other, starting on either replica
        for i in range(6):
            first = select(ca if i % 2 else cb, f"seq-{i}")
            assert 0 < len(first) < len(ARMS)
            for client in (ca, cb, ca, cb):
                assert select(client, f"seq-{i}") == first
        # at the same moment: the first writer wins and both answer its set
        for i in range(8):
            answers: dict[str, list[str]] = {}
            start = threading.Barrier(2)

            def ask(
                name: str,
                client: httpx.Client,
                key: str = f"both-{i}",
                start: threading.Barrier = start,
                answers: dict[str, list[str]] = answers,
            ) -> None:
                start.wait()
                answers[name] = select(client, key)

            threads = [threading.Thread(target=ask, args=(n, c)) for n, c in (("a", ca), ("b", cb))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert answers["a"] == answers["b"]
            assert select(ca, f"both-{i}") == answers["a"] == select(cb, f"both-{i}")

        # the gateway's select (OpenClaw's `qortex_learning_select` over /v1) with one
        # context.session_key: the same set on both replicas, turn after turn
        candidates = [{"id": a["armId"], "token_cost": 400} for a in ARMS]
        body = {
            "learner": "default",
            "candidates": candidates,
            "context": {"session_key": "gw-1"},
            "token_budget": 4000,
        }
        picks = []
        for client in (ca, cb, ca, cb):
            answer = client.post("/v1/learning/select", json=body)
            assert answer.status_code == 200, answer.text
            picks.append([arm["id"] for arm in answer.json()["selected_arms"]])
        assert 0 < len(picks[0]) < len(ARMS)
        assert all(p == picks[0] for p in picks)
