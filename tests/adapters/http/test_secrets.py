"""No secret ever reaches the logs: a full server run with debug logging, wrong tokens, errors
and a restart, then the whole output is searched for the configured secrets."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from tests.e2e.launch import served
from tests.processes import inherited

EXE = str(Path(sys.executable).with_name("learning-bot"))
SECRETS = {
    "LEARNING_BOT_API_TOKEN": "api-secret-0123456789abcdef-XYZ",
    "SLACK_SIGNING_SECRET": "slack-signing-secret-0123456789abcdef",
    "SLACK_CLIENT_SECRET": "slack-client-secret-0123456789abcdef",
}


def test_a_full_run_logs_no_secret(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    env = inherited(
        {
            **SECRETS,
            "LEARNING_BOT_DATABASE_URL": f"sqlite:///{tmp_path}/s.sqlite",
            "LEARNING_BOT_LOG_LEVEL": "debug",
            "LEARNING_BOT_SPOOL_DIR": str(tmp_path / "spool"),
        }
    )
    with open(log, "wb") as out, served(env, stdout=out, stderr=out) as server:
        base = server.base
        good = {"Authorization": f"Bearer {SECRETS['LEARNING_BOT_API_TOKEN']}"}
        wrong = {"Authorization": "Bearer " + SECRETS["LEARNING_BOT_API_TOKEN"][:-1] + "Q"}
        report = {
            "traceId": "s1",
            "arms": [{"armId": "tool:fs:Read", "tokenCost": 10}],
            "toolCalls": [{"name": "Read"}],
        }
        assert httpx.post(base + "/observe", json=report, headers=good).status_code == 200
        assert httpx.post(base + "/observe", json=report, headers=wrong).status_code == 401
        assert httpx.post(base + "/observe", content=b"{bad", headers=good).status_code == 400
        assert httpx.post(base + "/reset", json={}, headers=good).status_code == 200
        httpx.get(base + "/nope")
    for args in (["db", "verify"], ["status"], ["reset", "--confirm"]):
        result = subprocess.run([EXE, *args], env=env, capture_output=True, text=True)
        with open(log, "a") as out:
            out.write(result.stdout + result.stderr)
    text = log.read_text(errors="replace")
    assert "serving the learning API" in text
    for name, value in SECRETS.items():
        assert value not in text, f"{name} appears in the logs"
        assert value[:16] not in text, f"a prefix of {name} appears in the logs"
