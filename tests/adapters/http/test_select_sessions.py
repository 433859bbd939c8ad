"""`POST select` with a session key over HTTP: the same arms in the same order for the session,
whether it is named by `sessionKey` or `context.session_key`; bad keys answer 400."""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.launch import environment, served

BASE = "/__openclaw__/api/learning"
ARMS = [{"armId": f"tool:t:Tool{i:02d}", "tokenCost": 400} for i in range(30)]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("sessions")
    env = environment(
        root,
        {
            "LEARNING_BOT_TOKEN_BUDGET": "3000",
            "LEARNING_BOT_SEED_ARM_IDS": "",
            "LEARNING_BOT_MIN_PULLS": "0",
            "LEARNING_BOT_BASELINE_RATE": "0",
            "LEARNING_BOT_POLICY": "seed",
        },
    )
    with served(env) as running, httpx.Client(base_url=running.url, timeout=30) as client:
        client.post(f"{BASE}/phase", json={"phase": "active", "confirm": True})
        yield client


def select(client: httpx.Client, **body: object) -> list[str]:
    answer = client.post(f"{BASE}/select", json={"arms": ARMS, **body})
    assert answer.status_code == 200, answer.text
    return list(answer.json()["selected"])


def test_a_session_gets_one_set_in_one_order(server: httpx.Client) -> None:
    first = select(server, sessionKey="conv-1")
    assert 0 < len(first) < len(ARMS)
    for _ in range(4):
        assert select(server, sessionKey="conv-1") == first
        assert select(server, context={"session_key": "conv-1"}) == first
    per_request = {tuple(select(server)) for _ in range(6)}
    assert len(per_request) > 1


@pytest.mark.parametrize("key", ["x" * 300, 5, "a\u0000b"])
def test_bad_session_keys_are_refused(server: httpx.Client, key: object) -> None:
    answer = server.post(f"{BASE}/select", json={"arms": ARMS, "sessionKey": key})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert "session_key" in error or "sessionKey" in error  # the field, as the body names it
