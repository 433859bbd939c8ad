"""The Slack and Discord alert senders against the fake Slack and the fake Discord: a card is
posted, updated in place and followed up in its thread; a channel the bot cannot post to is
ChannelGone; a label that tries to ping (`<!channel>`, `@everyone`) pings nobody."""

from __future__ import annotations

import pytest

from learning_bot.adapters.discord.alerts import DiscordAlertSender
from learning_bot.adapters.slack.alerts import SlackAlertSender
from learning_bot.bot.alerting import ChannelGone, alert_card, resolved_note
from learning_bot.engine.alerts import FIRING, RESOLVED, Signals, findings
from learning_bot.engine.starvation import StarvedArm
from tests.adapters.discord.fake_discord import BOT_TOKEN, FakeDiscord
from tests.adapters.slack.fake_slack import FakeSlack
from tests.e2e.probes import slack_texts

HOSTILE = StarvedArm("tool:web:<!channel>", "@everyone <!channel> <@U1>", 0, 100, 40, 0.8)


def _finding() -> object:
    [finding] = findings(Signals("default", starved=[HOSTILE]), {})
    return finding


async def test_slack_card_posted_updated_in_place_and_followed_up_in_its_thread() -> None:
    fake = FakeSlack(channel_errors={"C-gone": "not_in_channel"})
    await fake.start()
    try:
        sender = SlackAlertSender("xoxb-test", fake.api_url)
        finding = _finding()
        ts = await sender.post("C1", alert_card(finding, FIRING, "https://l.example/dash"))  # type: ignore[arg-type]
        await sender.update("C1", ts, alert_card(finding, RESOLVED))  # type: ignore[arg-type]
        await sender.post("C1", resolved_note(finding), thread=ts)  # type: ignore[arg-type]
        with pytest.raises(ChannelGone, match="not_in_channel"):
            await sender.post("C-gone", alert_card(finding, FIRING))  # type: ignore[arg-type]
        await sender.upload("C1", "digest.png", b"\x89PNG-chart", "Daily digest", ts)
    finally:
        await fake.stop()
    assert list(fake.uploads.values()) == [b"\x89PNG-chart"]
    [complete] = fake.api("files.completeUploadExternal")
    assert complete.params["channel_id"] == "C1" and complete.params["thread_ts"] == ts
    first, follow_up = fake.api("chat.postMessage")[:2]
    [update] = fake.api("chat.update")
    assert update.params["ts"] == ts and follow_up.params["thread_ts"] == ts
    assert "RESOLVED" in slack_texts(update.params)
    for call in (first, update, follow_up):
        for text in _mrkdwn(call.params):  # plain_text never pings; mrkdwn must be escaped
            assert "<!channel>" not in text and "<@U1>" not in text, text
    assert "&lt;!channel&gt;" in slack_texts(first.params)


def _mrkdwn(params: dict) -> list[str]:  # type: ignore[type-arg]
    """The message's top-level text and every mrkdwn text object of its blocks."""
    import json

    out = [str(params.get("text") or "")]
    blocks = params.get("blocks") or []
    if isinstance(blocks, str):
        blocks = json.loads(blocks)

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if node.get("type") == "mrkdwn":
                out.append(str(node.get("text")))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(blocks)
    return out


async def test_discord_card_posted_edited_and_replied_to_without_mentions() -> None:
    fake = FakeDiscord()
    api = await fake.start()
    fake.forbidden_channels.add("99")
    sender = DiscordAlertSender(BOT_TOKEN, api)
    try:
        finding = _finding()
        ref = await sender.post("42", alert_card(finding, FIRING))  # type: ignore[arg-type]
        await sender.update("42", ref, alert_card(finding, RESOLVED))  # type: ignore[arg-type]
        await sender.post("42", resolved_note(finding), thread=ref)  # type: ignore[arg-type]
        with pytest.raises(ChannelGone):
            await sender.post("99", alert_card(finding, FIRING))  # type: ignore[arg-type]
        await sender.upload("42", "digest.png", b"\x89PNG-chart", "Daily digest", ref)
    finally:
        await sender.close()
        await fake.close()
    assert fake.violations == []
    (_, card), (_, reply), (_, upload) = fake.channel_messages
    assert fake.uploads == [("digest.png", b"\x89PNG-chart")]
    assert upload["message_reference"]["message_id"] == ref
    assert card["allowed_mentions"] == {"parse": []}
    assert reply["message_reference"]["message_id"] == ref
    assert "RESOLVED" in str(fake.message(int(ref))["embeds"])
    assert "@everyone" not in str(card["embeds"]).replace("@\u200beveryone", "")


async def test_slack_installed_in_several_workspaces_posts_with_each_ones_token(
    tmp_path: object,
) -> None:
    """Slack through OAuth: each subscription's channel is posted to with the bot token of
    its workspace's installation; a workspace the app left pauses (ChannelGone)."""
    import sqlalchemy as sa
    from slack_sdk.oauth.installation_store.models.installation import Installation
    from slack_sdk.oauth.installation_store.sqlalchemy import SQLAlchemyInstallationStore

    from learning_bot.adapters.slack.oauth import installed_bot_tokens

    engine = sa.create_engine(f"sqlite:///{tmp_path}/oauth.sqlite")
    store = SQLAlchemyInstallationStore(client_id="cid", engine=engine)
    store.metadata.create_all(engine)
    for team, token in (("T1", "xoxb-one"), ("T2", "xoxb-two")):
        store.save(
            Installation(
                app_id="A1",
                team_id=team,
                user_id="U1",
                bot_token=token,
                bot_id=f"B{team}",
                bot_user_id=f"UB{team}",
            )
        )
    fake = FakeSlack()
    await fake.start()
    try:
        sender = SlackAlertSender(
            None, fake.api_url, bot_token_for=installed_bot_tokens("cid", engine)
        )
        finding = _finding()
        one = await sender.for_scope("T1")
        await one.post("C1", alert_card(finding, FIRING))  # type: ignore[arg-type]
        two = await sender.for_scope("T2")
        ts = await two.post("C2", alert_card(finding, FIRING))  # type: ignore[arg-type]
        await two.update("C2", ts, alert_card(finding, RESOLVED))  # type: ignore[arg-type]
        assert await sender.for_scope("T1") is one  # one client per workspace
        with pytest.raises(ChannelGone, match="not installed in the Slack workspace T3"):
            await sender.for_scope("T3")
    finally:
        await fake.stop()
        engine.dispose()
    posts = fake.api("chat.postMessage")
    assert [(c.params["channel"], c.token) for c in posts] == [
        ("C1", "xoxb-one"),
        ("C2", "xoxb-two"),
    ]
    assert [c.token for c in fake.api("chat.update")] == ["xoxb-two"]
