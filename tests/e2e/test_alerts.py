"""Alerts end to end: a real `learning-bot serve` with the fake Slack and signed slash
commands, two replicas on one database (PostgreSQL when the tests have one): subscribe,
yesterday's digest with its chart uploaded, a poisoning run (written to
the same SQLite file) that trips the starvation and accuracy alerts once each, a restart in
the middle of the firing that neither repeats nor loses them, their resolution (the card
updated in place, a follow-up in its thread), a channel the bot was removed from paused after
one failure, and unsubscribe."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from learning_bot.engine import LearningConfig, Phase
from learning_bot.engine.service import LearningService
from learning_bot.storage import SqlStore
from tests import processes
from tests.adapters.slack.fake_slack import FakeSlack
from tests.storage.helpers import report

from .launch import environment, served
from .probes import (
    ANSWER_SECONDS,
    SLACK_BOT_TOKEN,
    SLACK_EVENTS_PATH,
    SLACK_SECRET,
    _slack_answer,
    slack_signature,
    slack_texts,
    slash_command,
)

WEB = "tool:web:WebSearch"
CHANNEL = "C-e2e"
GONE = "C-gone"
DIGEST = "C-digest"


async def _command(base: str, fake: FakeSlack, text: str, channel: str = CHANNEL) -> str:
    form, key = slash_command(fake, text)
    form["channel_id"] = channel
    body = urlencode(form)
    timestamp = str(processes.now_ms() // 1000)
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": timestamp,
        "X-Slack-Signature": slack_signature(SLACK_SECRET, timestamp, body),
    }
    async with httpx.AsyncClient(base_url=base, timeout=ANSWER_SECONDS) as http:
        response = await http.post(SLACK_EVENTS_PATH, content=body, headers=headers)
    assert response.status_code == 200, response.text
    ack = response.json()
    if "Working on it" in slack_texts(ack):  # the answer follows on response_url
        return slack_texts((await fake.next_post(key, timeout=ANSWER_SECONDS)).body)
    return slack_texts(await _slack_answer(fake, ack, key))


def _runs(
    database_url: str, start: int, count: int, *, poisoned: bool, yesterday: bool = False
) -> None:
    """Runs written beside the servers, dated by the servers' clock (tests/processes.py)."""
    day = 86_400_000
    now = processes.now_ms()
    at = (now // day - 1) * day + 43_200_000 if yesterday else now
    store = SqlStore(database_url)
    try:
        config = LearningConfig.for_policy("seed", phase=Phase.ACTIVE)
        service = LearningService(
            store, config, learner="default", cache_ttl=0, wall_clock=processes.now_ms
        )
        for i in range(start, start + count):
            if poisoned:
                service.observe(report(f"t{i}", calls=("Grep",), excluded={WEB}, timestamp=at + i))
            else:
                service.observe(report(f"t{i}", calls=("Read", "WebSearch"), timestamp=at + i))
    finally:
        store.close()


def _posts(fake: FakeSlack, channel: str) -> list[dict[str, Any]]:
    return [c.params for c in fake.api("chat.postMessage") if c.params.get("channel") == channel]


@pytest.fixture
def replica_database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """PostgreSQL (a fresh schema) when the tests have a server, else a SQLite file."""
    if os.environ.get("LEARNING_BOT_TEST_DATABASE_URL"):
        return str(request.getfixturevalue("postgres_url"))
    return f"sqlite:///{tmp_path / 'replicas.sqlite'}"


async def test_alerts_fire_once_survive_a_restart_and_resolve_in_their_thread(
    tmp_path: Path, replica_database: str
) -> None:
    fake = FakeSlack(channel_errors={GONE: "not_in_channel"})
    await fake.start()
    env = environment(
        tmp_path,
        {
            "SLACK_BOT_TOKEN": SLACK_BOT_TOKEN,
            "SLACK_SIGNING_SECRET": SLACK_SECRET,
            "SLACK_API_URL": fake.api_url,
            "LEARNING_BOT_ADMINS": "U-e2e",
            "LEARNING_BOT_ALERT_INTERVAL": "0.2",
            "LEARNING_BOT_DIGEST_HOUR": "0",
            "LEARNING_BOT_DATABASE_URL": replica_database,
        },
    )
    database_url = env["LEARNING_BOT_DATABASE_URL"]
    _runs(database_url, 0, 60, poisoned=False, yesterday=True)
    try:
        async with contextlib.AsyncExitStack() as stack:
            # two replicas on one database: each message must still be sent once
            server, _ = await asyncio.gather(
                asyncio.to_thread(stack.enter_context, served(env)),
                asyncio.to_thread(stack.enter_context, served(env)),
            )
            said = await _command(server.url, fake, "subscribe alerts")
            assert "now gets alerts" in said, said
            said = await _command(server.url, fake, "subscribe alerts", channel=GONE)
            assert "now gets alerts" in said, said
            said = await _command(server.url, fake, "subscribe digest daily", channel=DIGEST)
            assert "daily digest" in said, said
            # yesterday's digest (60 runs) is due: a card, and its chart in the card's thread
            await fake.wait_until(lambda: len(fake.api("files.completeUploadExternal")) == 1)
            [digest] = _posts(fake, DIGEST)
            assert "Daily digest" in slack_texts(digest)
            assert "60 (60 selected)" in slack_texts(digest)
            [upload] = fake.api("files.completeUploadExternal")
            assert upload.params["channel_id"] == DIGEST
            assert all(data.startswith(b"\x89PNG") for data in fake.uploads.values())

            await asyncio.to_thread(_runs, database_url, 60, 55, poisoned=True)
            await fake.wait_until(lambda: len(_posts(fake, CHANNEL)) >= 2, ANSWER_SECONDS)
            listed = await _command(server.url, fake, "subscriptions", channel=GONE)
            assert "paused" in listed and "not_in_channel" in listed, listed
            await stack.aclose()  # stopped in the middle of the firing

        async with contextlib.AsyncExitStack() as stack:
            server = await asyncio.to_thread(stack.enter_context, served(env))
            await asyncio.sleep(1.0)  # several evaluations after the restart
            firing = _posts(fake, CHANNEL)
            titles = sorted(slack_texts(p).split("\n")[0] for p in firing)
            assert len(firing) == 2, titles
            assert any("Starved arm" in t for t in titles) and any("collapsed" in t for t in titles)
            assert len(_posts(fake, GONE)) == 1  # tried once, then paused
            assert len(_posts(fake, DIGEST)) == 1  # the day's digest, once

            await asyncio.to_thread(_runs, database_url, 115, 60, poisoned=False)
            await fake.wait_until(lambda: len(_posts(fake, CHANNEL)) >= 4, ANSWER_SECONDS)
            updates = fake.api("chat.update")
            assert len(updates) == 2 and all("RESOLVED" in slack_texts(u.params) for u in updates)
            # each follow-up is in the thread of the card that was updated
            threads = sorted(str(p.get("thread_ts")) for p in _posts(fake, CHANNEL)[2:])
            assert threads == sorted(str(u.params["ts"]) for u in updates)
            said = await _command(server.url, fake, "unsubscribe all")
            assert "no longer gets" in said, said
    finally:
        await fake.stop()
