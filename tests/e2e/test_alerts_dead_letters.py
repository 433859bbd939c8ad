"""The dead-letter alert end to end: a real `learning-bot serve` with the fake Slack, its
database refusing every new trace (a trigger: an error that is not an outage). A run posted to
its observe endpoint is spooled, refused again on replay and dead-lettered in the server's own
spool; the subscribed channel gets one card saying so, and a second dead letter in the same
episode adds no message."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine
from sqlalchemy.pool import NullPool

from learning_bot.storage.spool import dead_letters
from tests.adapters.slack.fake_slack import FakeSlack

from .launch import environment, served
from .probes import ANSWER_SECONDS, SLACK_BOT_TOKEN, SLACK_SECRET, eventually, slack_texts
from .test_alerts import CHANNEL, _command, _posts

ARMS = [{"armId": f"tool:t:T{i}", "tokenCost": 50} for i in range(4)]


def _refuse_traces(database_url: str) -> None:
    """From now on the database refuses every new trace."""
    engine = create_engine(database_url, poolclass=NullPool)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TRIGGER refuse BEFORE INSERT ON traces "
            "BEGIN SELECT RAISE(ABORT, 'traces refused by trigger'); END"
        )
    engine.dispose()


async def _observe(http: httpx.AsyncClient, trace_id: str) -> dict[str, Any]:
    body = {"traceId": trace_id, "arms": ARMS, "toolCalls": [{"name": "T1"}]}
    response = await http.post("/observe", json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def test_a_run_the_database_refuses_is_dead_lettered_and_alerts_once(
    tmp_path: Path,
) -> None:
    spool = tmp_path / "spool"  # the server's own spool
    fake = FakeSlack()
    await fake.start()
    env = environment(
        tmp_path,
        {
            "SLACK_BOT_TOKEN": SLACK_BOT_TOKEN,
            "SLACK_SIGNING_SECRET": SLACK_SECRET,
            "SLACK_API_URL": fake.api_url,
            "LEARNING_BOT_ADMINS": "U-e2e",
            "LEARNING_BOT_ALERT_INTERVAL": "0.2",
            "LEARNING_BOT_SPOOL_DIR": str(spool),
        },
    )
    database_url = env["LEARNING_BOT_DATABASE_URL"]
    try:
        async with contextlib.AsyncExitStack() as stack:
            server = await asyncio.to_thread(stack.enter_context, served(env))
            http = await stack.enter_async_context(
                httpx.AsyncClient(base_url=server.base, timeout=ANSWER_SECONDS)
            )
            assert (await _observe(http, "stored"))["recorded"] is True
            said = await _command(server.url, fake, "subscribe alerts")
            assert "now gets alerts" in said, said

            await asyncio.to_thread(_refuse_traces, database_url)
            assert (await _observe(http, "refused-1"))["spooled"] is True
            await eventually("a dead letter", lambda: len(dead_letters(spool)) == 1)
            await eventually("the dead-letter card", lambda: _posts(fake, CHANNEL))

            assert (await _observe(http, "refused-2"))["spooled"] is True
            await eventually("a second dead letter", lambda: len(dead_letters(spool)) == 2)
            started = time.monotonic()
            while time.monotonic() - started < 1.0:  # several evaluations later
                await asyncio.sleep(0.1)
            [card] = _posts(fake, CHANNEL)
            text = slack_texts(card)
            assert "Runs were dead-lettered" in text and "FIRING" in text, text
            assert "traces refused by trigger" in dead_letters(spool)[0]["reason"]
    finally:
        await fake.stop()
