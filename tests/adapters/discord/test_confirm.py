"""Confirm/cancel buttons: only the asker may press them, admin rights are checked on every
click, a confirmation is spent exactly once (also across clients sharing a database), and the
prompt ends showing the outcome and who did it."""

from __future__ import annotations

import asyncio
import copy
from dataclasses import replace
from typing import Any

from learning_bot.adapters.discord.views import EXPIRED_TEXT
from learning_bot.app import App
from learning_bot.engine import Phase

from .conftest import (
    ADMIN,
    ADMIN_ROLE,
    MEMBER,
    ROLE_ADMIN,
    SETTINGS,
    Harness,
    logged_in,
    make_app,
    observe,
    posteriors,
)
from .fake_discord import EPHEMERAL, FakeDiscord, User
from .test_commands import embed_of, error_text, is_ephemeral


def seed(app: App) -> None:
    for i in range(4):
        observe(app, f"run-{i}", ["Read", "WebSearch"])


def buttons(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for row in message["components"] for c in row["components"]]


def resets(app: App) -> int:
    last = app.service().last_reset()
    return 0 if last is None else last.reset_id


async def test_reset_asks_then_the_asker_confirms(hdb: Harness) -> None:
    h = hdb
    seed(h.app)
    prompt = await h.command("reset", arms="all")
    response = h.reply(prompt)
    assert response["type"] == 4 and is_ephemeral(response)
    assert "Reset all 12 arms of learner 'default'" in embed_of(response)["description"]
    labels = [(b["label"], b["style"], b["disabled"]) for b in buttons(response["data"])]
    assert labels == [("Confirm", 4, False), ("Cancel", 2, False)]
    assert posteriors(h.app)["tool:fs:Read"][2] == 4, "nothing changes before confirming"

    click = await h.click(h.prompt_id(prompt), "confirm")
    update = h.reply(click)
    assert update["type"] == 7, "the prompt itself is edited"
    description = embed_of(update)["description"]
    assert "Reset every arm (12 arm(s), reset #1)" in description
    assert "Confirmed by Ada." in description
    assert all(b["disabled"] for b in buttons(update["data"]))
    assert all(p == (1.0, 1.0, 0) for p in posteriors(h.app).values())
    stored = h.fake.message(h.prompt_id(prompt))
    assert all(b["disabled"] for b in buttons(stored))


async def test_another_user_is_refused_and_nothing_is_spent(hdb: Harness) -> None:
    h = hdb
    seed(h.app)
    prompt = await h.command("reset", arms="Read WebSearch")
    shown = copy.deepcopy(h.fake.message(h.prompt_id(prompt)))
    other = await h.click(h.prompt_id(prompt), "confirm", user=ROLE_ADMIN)
    refusal = h.reply(other)
    assert refusal["type"] == 4 and is_ephemeral(refusal)
    assert refusal["data"]["content"].startswith("Only Ada, who asked, can confirm or cancel")
    assert resets(h.app) == 0
    assert h.fake.message(h.prompt_id(prompt)) == shown, "the prompt is unchanged"

    await h.click(h.prompt_id(prompt), "confirm")
    after = posteriors(h.app)
    assert after["tool:fs:Read"] == (1.0, 1.0, 0) and after["tool:web:WebSearch"] == (1.0, 1.0, 0)
    assert after["tool:fs:Write"][2] == 4


async def test_a_second_click_does_nothing_twice(hdb: Harness) -> None:
    h = hdb
    seed(h.app)
    prompt = await h.command("reset", arms="all")
    await h.click(h.prompt_id(prompt), "confirm")
    assert resets(h.app) == 1
    observe(h.app, "after-reset", ["Read"])
    learnt = posteriors(h.app)

    again = await h.click(h.prompt_id(prompt), "confirm")
    response = h.reply(again)
    assert response["type"] == 4 and is_ephemeral(response)
    assert "Already done: Reset every arm" in embed_of(response)["description"]
    assert resets(h.app) == 1
    assert posteriors(h.app) == learnt

    cancel = await h.click(h.prompt_id(prompt), "cancel")
    assert "Already done" in embed_of(h.reply(cancel))["description"]
    assert posteriors(h.app) == learnt


async def test_cancel(h: Harness) -> None:
    seed(h.app)
    before = posteriors(h.app)
    prompt = await h.command("reset", arms="all")
    click = await h.click(h.prompt_id(prompt), "cancel")
    update = h.reply(click)
    assert update["type"] == 7
    assert embed_of(update)["description"] == "Cancelled by Ada; nothing changed."
    assert all(b["disabled"] for b in buttons(update["data"]))
    assert posteriors(h.app) == before
    confirm = await h.click(h.prompt_id(prompt), "confirm")
    assert "Already done" in embed_of(h.reply(confirm))["description"]
    assert posteriors(h.app) == before


async def test_admin_rights_are_checked_again_on_the_click(h: Harness) -> None:
    seed(h.app)
    prompt = await h.command("reset", arms="all", user=ROLE_ADMIN)
    assert h.reply(prompt)["data"]["components"], "an admin role may reset"
    demoted = replace(ROLE_ADMIN, roles=())
    click = await h.click(h.prompt_id(prompt), "confirm", user=demoted)
    text = error_text(h.reply(click))
    assert "Only admins can reset posteriors" in text
    assert resets(h.app) == 0

    await h.click(h.prompt_id(prompt), "confirm", user=ROLE_ADMIN)
    assert resets(h.app) == 1


async def test_phase_change_is_confirmed(h: Harness) -> None:
    prompt = await h.command("phase", phase="passive")
    assert (
        "Switch learner 'default' from active to passive?"
        in (embed_of(h.reply(prompt))["description"])
    )
    assert h.app.service().phase() is Phase.ACTIVE
    await h.click(h.prompt_id(prompt), "confirm")
    assert h.app.service().phase() is Phase.PASSIVE


async def test_reset_undo(h: Harness) -> None:
    seed(h.app)
    before = posteriors(h.app)
    await h.click(h.prompt_id(await h.command("reset", arms="all")), "confirm")
    assert posteriors(h.app) != before
    undo = await h.command("reset", arms="undo")
    assert "Undo reset #1 by" in embed_of(h.reply(undo))["description"]
    await h.click(h.prompt_id(undo), "confirm")
    assert posteriors(h.app) == before


async def test_buttons_time_out_and_say_so(fake: FakeDiscord, sqlite_app: App) -> None:
    client = await logged_in(fake, sqlite_app, replace(SETTINGS, confirm_timeout=0.2))
    h = Harness(fake, client, sqlite_app)
    try:
        seed(h.app)
        prompt = await h.command("reset", arms="all")
        for _ in range(100):
            if h.fake.message(h.prompt_id(prompt))["content"] == EXPIRED_TEXT:
                break
            await asyncio.sleep(0.05)
        message = h.fake.message(h.prompt_id(prompt))
        assert message["content"] == EXPIRED_TEXT
        assert all(b["disabled"] for b in buttons(message))
        late = await h.click(h.prompt_id(prompt), "confirm")
        assert "This confirmation expired" in h.reply(late)["data"]["content"]
        assert resets(h.app) == 0
    finally:
        await client.close()


async def test_a_prompt_from_another_replica_is_confirmed_once(
    fake: FakeDiscord, database_url: str
) -> None:
    """Two clients (say, before and after a restart, or two shards' processes) on one
    database: the one without a live view still answers the click, through the bus, and the
    confirmation is spent once whichever client gets each click."""
    first_app, second_app = make_app(database_url), make_app(database_url)
    first = await logged_in(fake, first_app, SETTINGS)
    second = await logged_in(fake, second_app, SETTINGS)
    h = Harness(fake, first, first_app)
    try:
        seed(first_app)
        prompt = await h.command("reset", arms="all")
        elsewhere = await h.click(h.prompt_id(prompt), "confirm", client=second)
        update = h.reply(elsewhere)
        assert update["type"] == 7
        assert "Confirmed by Ada." in embed_of(update)["description"]
        assert all(b["disabled"] for b in buttons(update["data"]))
        assert resets(first_app) == 1

        observe(first_app, "later", ["Read"])
        learnt = posteriors(first_app)
        here = await h.click(h.prompt_id(prompt), "confirm", client=first)
        assert "Already done" in embed_of(h.reply(here))["description"]
        assert resets(first_app) == 1 and posteriors(first_app) == learnt
    finally:
        await first.close()
        await second.close()
        first_app.close()
        second_app.close()


async def test_only_the_asker_even_on_another_replica(fake: FakeDiscord, sqlite_url: str) -> None:
    first_app, second_app = make_app(sqlite_url), make_app(sqlite_url)
    first = await logged_in(fake, first_app, SETTINGS)
    second = await logged_in(fake, second_app, SETTINGS)
    h = Harness(fake, first, first_app)
    try:
        seed(first_app)
        prompt = await h.command("reset", arms="all")
        other_admin = User(1_400_000_000_000_000_099, "Otto", roles=(ADMIN_ROLE,))
        click = await h.click(h.prompt_id(prompt), "confirm", user=other_admin, client=second)
        text = error_text(h.reply(click))
        assert "Only the person who asked can confirm or cancel this." in text
        assert resets(first_app) == 0
    finally:
        await first.close()
        await second.close()
        first_app.close()
        second_app.close()


async def test_member_cannot_use_someone_elses_prompt_to_cancel(h: Harness) -> None:
    seed(h.app)
    prompt = await h.command("reset", arms="all")
    click = await h.click(h.prompt_id(prompt), "cancel", user=MEMBER)
    response = h.reply(click)
    assert int(response["data"]["flags"]) & EPHEMERAL
    assert "Only Ada" in response["data"]["content"]
    confirm = await h.click(h.prompt_id(prompt), "confirm", user=ADMIN)
    assert h.reply(confirm)["type"] == 7
    assert resets(h.app) == 1
