"""/learning subscribe, unsubscribe and subscriptions through discord.py's own command tree:
the options as Discord sends them, admins only, stored for the channel the command came from."""

from __future__ import annotations

from typing import Any

from tests.e2e.probes import discord_texts

from .conftest import ADMIN, HERE, MEMBER, Harness
from .test_commands import error_text


async def test_an_admin_subscribes_this_channel_and_a_member_cannot(h: Harness) -> None:
    assert h.app.alerts is not None
    said = _text(h.reply(await h.command("subscribe", kind="digest daily")))
    assert "now gets a daily digest" in said, said
    refused = error_text(h.reply(await h.command("subscribe", user=MEMBER)))
    assert refused.startswith("Only admins can change this channel's subscriptions")
    bad = error_text(h.reply(await h.command("subscribe", kind="hourly")))
    assert "kind must be one of" in bad
    [sub] = h.app.alerts.subscriptions()
    assert (sub.surface, sub.channel, sub.kind, sub.created_by) == (
        "discord",
        str(HERE.channel_id),
        "digest daily",
        str(ADMIN.id),
    )
    listed = _text(h.reply(await h.command("subscriptions", user=MEMBER)))
    assert "digest daily" in listed, listed
    gone = _text(h.reply(await h.command("unsubscribe", kind="all")))
    assert "no longer gets any subscription" in gone, gone
    assert h.app.alerts.subscriptions() == []


def _text(response: dict[str, Any]) -> str:
    return discord_texts(response["data"])
