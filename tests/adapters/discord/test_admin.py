"""Who is an admin on Discord: Manage Server (or Administrator), an allow-listed role or user,
or LEARNING_BOT_ADMINS; everyone else may look and reward, not reset or switch phase."""

from __future__ import annotations

from dataclasses import replace

import pytest

from learning_bot.app import App
from learning_bot.engine import Phase

from .conftest import (
    ADMIN,
    LISTED,
    LISTED_HERE,
    MEMBER,
    ROLE_ADMIN,
    SETTINGS,
    Harness,
    logged_in,
    make_app,
    observe,
    posteriors,
)
from .fake_discord import PERMISSIONS_MEMBER, FakeDiscord, User
from .test_commands import embed_of, error_text

ADMINISTRATOR = User(1_400_000_000_000_000_010, "Ann", permissions=PERMISSIONS_MEMBER | 1 << 3)


def seed(app: App) -> None:
    observe(app, "run-0", ["Read"])


@pytest.mark.parametrize(
    "user",
    [ADMIN, ADMINISTRATOR, ROLE_ADMIN, LISTED, LISTED_HERE],
    ids=["manage-server", "administrator", "admin-role", "discord:id listed", "id listed"],
)
async def test_admins_get_the_confirmation_prompt(h: Harness, user: User) -> None:
    seed(h.app)
    response = h.reply(await h.command("reset", user=user, arms="all"))
    assert response["data"]["components"], f"{user.name} should be asked to confirm"


async def test_a_non_admin_cannot_reset_or_switch_phase(hdb: Harness) -> None:
    h = hdb
    seed(h.app)
    before = posteriors(h.app)
    text = error_text(h.reply(await h.command("reset", user=MEMBER, arms="all")))
    assert text.startswith("Only admins can reset posteriors.")
    text = error_text(h.reply(await h.command("phase", user=MEMBER, phase="passive")))
    assert text.startswith("Only admins can change the phase.")
    assert posteriors(h.app) == before
    assert h.app.service().phase() is Phase.ACTIVE
    assert not any(m["components"] for m in h.fake.messages.values()), "no buttons were sent"


async def test_a_non_admin_may_look_and_reward(h: Harness) -> None:
    seed(h.app)
    assert embed_of(h.reply(await h.command("status", user=MEMBER)))["title"]
    await h.command("reward", user=MEMBER, arm="Read")
    assert posteriors(h.app)["tool:fs:Read"][2] == 2


async def test_user_allow_list(fake: FakeDiscord, sqlite_app: App) -> None:
    client = await logged_in(
        fake, sqlite_app, replace(SETTINGS, admin_user_ids=frozenset({MEMBER.id}))
    )
    try:
        h = Harness(fake, client, sqlite_app)
        seed(sqlite_app)
        assert h.reply(await h.command("reset", user=MEMBER, arms="all"))["data"]["components"]
    finally:
        await client.close()


async def test_reward_for_admins_only(fake: FakeDiscord, sqlite_url: str) -> None:
    app = make_app(sqlite_url, reward_admins_only=True)
    client = await logged_in(fake, app, SETTINGS)
    try:
        h = Harness(fake, client, app)
        seed(app)
        text = error_text(h.reply(await h.command("reward", user=MEMBER, arm="Read")))
        assert text.startswith("Only admins can give rewards")
        await h.command("reward", user=ROLE_ADMIN, arm="Read")
        assert posteriors(app)["tool:fs:Read"][2] == 2
    finally:
        await client.close()
        app.close()
