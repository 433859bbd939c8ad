"""Start-up refuses what could never work (a learner mapping to an invalid learner name, an API
token no client can send) with one line naming the setting; and `POST reset/undo` answers the
arms it restored."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest

from tests.e2e.launch import SERVE, environment, free_port

from .conftest import TOKEN, start_server, stop_server

ARMS = [{"armId": "tool:fs:Read", "tokenCost": 10}, {"armId": "tool:exec:Bash", "tokenCost": 10}]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("LEARNING_BOT_LEARNERS", "discord:1=ops,slack:T2=two words"),
        ("LEARNING_BOT_LEARNER", "semi;colon"),
        ("LEARNING_BOT_API_TOKEN", "token-with-an-umlaut-ä-0123456789"),
        ("LEARNING_BOT_API_TOKEN", "token-with-a-tab\t-0123456789abcdef"),
    ],
)
def test_serve_refuses_a_setting_that_could_never_work(
    tmp_path: Path, name: str, value: str
) -> None:
    env = environment(tmp_path, {name: value})
    argv = [part.replace("{port}", str(free_port())) for part in SERVE]
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    first, *rest = result.stderr.splitlines()
    assert name in first and first.startswith("learning-bot: "), result.stderr
    assert len(rest) <= 1 and "Traceback" not in result.stderr


def test_reset_undo_answers_the_arms_it_restored(database_url: str) -> None:
    live = start_server(database_url)
    try:
        with live.client() as c:
            assert c.post("/select", json={"arms": ARMS}).status_code == 200
            report = {"traceId": "t1", "arms": ARMS, "toolCalls": [{"name": "Read"}]}
            assert c.post("/observe", json=report).status_code == 200
            reset = c.post("/reset", json={"arm_ids": ["tool:fs:Read"]}).json()
            assert reset["arm_ids"] == ["tool:fs:Read"]
            undone = c.post("/reset/undo", json={})
            assert undone.status_code == 200, undone.text
            assert undone.json()["arm_ids"] == ["tool:fs:Read"]
            assert undone.json()["reset_count"] == 1
            c.post("/reset", json={})
            every = c.post("/reset/undo", json={}).json()
            assert sorted(every["arm_ids"]) == ["tool:exec:Bash", "tool:fs:Read"]
            assert httpx.get(f"{live.api}/posteriors").status_code == 200
    finally:
        stop_server(live)


def test_the_token_rule_keeps_the_tokens_clients_send() -> None:
    from learning_bot.adapters.http.settings import http_settings

    assert http_settings({"LEARNING_BOT_API_TOKEN": TOKEN}).api_token == TOKEN
    spaced = "a token with spaces 0123"
    assert http_settings({"LEARNING_BOT_API_TOKEN": spaced}).api_token == spaced
