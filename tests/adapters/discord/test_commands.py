"""Each /learning subcommand end to end: gateway payload -> discord.py's parser, command tree
and our checks -> the bus and a real database -> the response the fake Discord recorded."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from learning_bot.adapters.discord.interactions import ADMIN_HINT
from learning_bot.engine import Arm

from .conftest import (
    ADMIN,
    ARMS,
    CHANNEL,
    ELSEWHERE,
    HERE,
    IN_THREAD,
    MEMBER,
    THREAD,
    Harness,
    observe,
    posteriors,
)
from .fake_discord import EPHEMERAL, FakeDiscord, command_interaction


def embed_of(response: dict[str, Any]) -> dict[str, Any]:
    embeds = response["data"]["embeds"]
    assert len(embeds) == 1
    embed: dict[str, Any] = embeds[0]
    return embed


def is_ephemeral(response: dict[str, Any]) -> bool:
    return bool(int(response["data"].get("flags") or 0) & EPHEMERAL)


def error_text(response: dict[str, Any]) -> str:
    assert response["type"] == 4
    assert is_ephemeral(response), "errors are only shown to the user who asked"
    assert not response["data"].get("components")
    content: str = response["data"]["content"]
    return content


def seed(h: Harness, runs: int = 6) -> None:
    for i in range(runs):
        observe(h.app, f"run-{i}", ["Read", "WebSearch"] if i % 2 else ["Write"])


# -- status ----------------------------------------------------------------------------------


async def test_status_is_a_compact_ephemeral_embed_for_phones(h: Harness) -> None:
    seed(h)
    response = h.reply(await h.command("status"))
    assert response["type"] == 4
    assert is_ephemeral(response)
    embed = embed_of(response)
    assert embed["title"] == "Learning status — default [ACTIVE]"
    assert "fields" not in embed, "fields render below the description: nothing goes there"
    description = embed["description"]
    first = description.splitlines()[0]
    assert first == "**Phase** ACTIVE · **Traces** 6", "the headline numbers lead"
    assert "```" not in description, "no code tables to wrap on a phone"
    best = description.split("**Best arms**\n", 1)[1].split("\n\n")[0].splitlines()
    assert 1 <= len(best) <= 3 and all(" · 0." in line or " · 1." in line for line in best)
    assert "**Candidates for exclusion**" in description
    assert "Full tables: /learning status top 10, or the dashboard." in description
    assert response["data"]["allowed_mentions"] == {"parse": []}


async def test_status_top_and_public(h: Harness) -> None:
    seed(h)
    response = h.reply(await h.command("status", top=2, public=True))
    assert not is_ephemeral(response), "public posts to the channel"
    embed = embed_of(response)
    description = embed["description"]
    assert "fields" not in embed
    head, _, rest = description.partition("```")
    assert "**Traces** 6" in head and f"**Arms** {len(ARMS)}" in head, "numbers above tables"
    table = rest.split("```")[0].strip().splitlines()
    assert len(table) == 2 + 2, "header, rule and the top 2 arms"


async def test_status_of_one_arm_by_label(h: Harness) -> None:
    seed(h)
    response = h.reply(await h.command("status", arm="WebSearch"))
    embed = embed_of(response)
    assert embed["title"] == "tool:web:WebSearch"
    fields = {f["name"]: f["value"] for f in embed["fields"]}
    assert fields["Pulls"] == "6"


async def test_unknown_arm_is_a_clear_ephemeral_error(h: Harness) -> None:
    seed(h)
    text = error_text(h.reply(await h.command("status", arm="WebSerch", public=True)))
    assert "unknown arm 'WebSerch'" in text and "did you mean tool:web:WebSearch" in text
    text = error_text(h.reply(await h.command("reward", arm="tool:nope:Nothing")))
    assert "unknown arm" in text


async def test_empty_status(h: Harness) -> None:
    embed = embed_of(h.reply(await h.command("status")))
    assert "No traces recorded yet" in embed["description"]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"top": 0}, "top must be a whole number from 1 to 25"),
        ({"top": 26}, "top must be a whole number from 1 to 25"),
        ({"top": "ten"}, "top must be a whole number from 1 to 25"),
        ({"public": "yes"}, "public must be true or false"),
        ({"arm": "x" * 513}, "arm is 513 characters long; at most 512"),
    ],
)
async def test_status_options_are_validated(
    h: Harness, options: dict[str, Any], expected: str
) -> None:
    """discord.py passes whatever the payload holds: ranges and types are checked by us."""
    text = error_text(h.reply(await h.command("status", **options)))
    assert expected in text


# -- reward ----------------------------------------------------------------------------------


async def test_reward_an_arm_by_label(h: Harness) -> None:
    seed(h)
    before = posteriors(h.app)["tool:fs:Write"]
    payload = await h.command("reward", user=MEMBER, arm="Write", value="good", reason="nice")
    response = h.reply(payload)
    assert response["type"] == 4 and is_ephemeral(response)
    embed = embed_of(response)
    assert "Recorded a good reward (1) for tool:fs:Write." in embed["description"]
    assert "Reason: nice" in embed["description"]
    alpha, beta, pulls = posteriors(h.app)["tool:fs:Write"]
    assert (alpha, beta, pulls) == (before[0] + 1, before[1], before[2] + 1)


async def test_bad_reward(h: Harness) -> None:
    seed(h)
    before = posteriors(h.app)["tool:fs:Read"]
    await h.command("reward", arm="tool:fs:Read", value="bad")
    after = posteriors(h.app)["tool:fs:Read"]
    assert after == (before[0], before[1] + 1, before[2] + 1)


async def test_reward_without_arm_credits_the_latest_run_in_this_thread(h: Harness) -> None:
    seed(h)
    observe(h.app, "in-thread", ["WebFetch"], conversation=str(THREAD))
    before = posteriors(h.app)
    payload = await h.command("reward", place=IN_THREAD)
    embed = embed_of(h.reply(payload))
    assert "the latest run here used" in embed["description"]
    after = posteriors(h.app)
    changed = {a for a in after if after[a] != before[a]}
    assert changed == {"tool:web:WebFetch"}


async def test_reward_without_arm_and_without_runs_here(h: Harness) -> None:
    text = error_text(h.reply(await h.command("reward")))
    assert "no run has been recorded in this conversation yet" in text


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"arm": "Read", "value": "great"}, "value must be one of good, bad"),
        ({"arm": "Read", "value": 1}, "value must be one of good, bad"),
        ({"arm": "Read", "reason": "r" * 501}, "reason is 501 characters long; at most 500"),
        ({"arm": 12}, "arm must be text"),
    ],
)
async def test_reward_options_are_validated(
    h: Harness, options: dict[str, Any], expected: str
) -> None:
    seed(h)
    before = posteriors(h.app)
    text = error_text(h.reply(await h.command("reward", **options)))
    assert expected in text
    assert posteriors(h.app) == before


async def test_each_guild_has_its_own_learner(h: Harness) -> None:
    seed(h)
    observe(h.app, "other-1", ["Read"], conversation="x", learner="other")
    before_default = posteriors(h.app)
    await h.command("reward", arm="Read", place=ELSEWHERE)
    assert posteriors(h.app) == before_default
    assert posteriors(h.app, "other")["tool:fs:Read"][2] == 2
    embed = embed_of(h.reply(await h.command("status", place=ELSEWHERE)))
    assert embed["title"] == "Learning status — other [ACTIVE]"


# -- autocomplete ----------------------------------------------------------------------------


async def test_autocomplete_offers_matching_arm_ids(h: Harness) -> None:
    seed(h)
    choices = await h.autocomplete("reward", "arm", "web")
    values = [c["value"] for c in choices]
    assert set(values) == {"tool:web:WebSearch", "tool:web:WebFetch"}
    choices = await h.autocomplete("reward", "arm", "Read")
    assert choices[0]["value"] == "tool:fs:Read", "an exact label match comes first"
    choices = await h.autocomplete("status", "arm", "")
    assert len(choices) == len(ARMS)
    assert all(1 <= len(c["name"]) <= 100 for c in choices)


async def test_autocomplete_returns_at_most_25_of_1000_arms(h: Harness) -> None:
    arms = tuple(Arm(f"tool:bulk:Tool{i:04d}", 10) for i in range(1000))
    observe(h.app, "bulk", ["Tool0007"], arms=arms)
    choices = await h.autocomplete("reward", "arm", "tool")
    assert len(choices) == 25
    choices = await h.autocomplete("reward", "arm", "Tool0007")
    assert choices[0]["value"] == "tool:bulk:Tool0007"
    assert h.fake.violations == []


async def test_autocomplete_for_reset_completes_the_last_word(h: Harness) -> None:
    seed(h)
    choices = await h.autocomplete("reset", "arms", "")
    assert [c["value"] for c in choices[:2]] == ["all", "undo"]
    choices = await h.autocomplete("reset", "arms", "tool:fs:Read Wri")
    assert [c["value"] for c in choices] == ["tool:fs:Read tool:fs:Write"]


async def test_typed_values_autocomplete_never_offered_are_still_checked(h: Harness) -> None:
    """Choosing from autocomplete is optional in Discord: the bus resolves what arrives."""
    seed(h)
    assert "unknown arm" in error_text(h.reply(await h.command("reward", arm="Reed")))


# -- phase, help, reset prompt ------------------------------------------------------------


async def test_phase_shows_the_phase_to_everyone(h: Harness) -> None:
    embed = embed_of(h.reply(await h.command("phase", user=MEMBER)))
    assert embed["description"].startswith("Phase: ACTIVE")


async def test_phase_choice_is_validated(h: Harness) -> None:
    text = error_text(h.reply(await h.command("phase", phase="turbo")))
    assert "phase must be one of passive, active" in text


async def test_help(h: Harness) -> None:
    embed = embed_of(h.reply(await h.command("help")))
    assert embed["title"] == "/learning — the learning layer's chat commands"
    assert "/learning reward" in embed["description"]
    embed = embed_of(h.reply(await h.command("help", command="reset")))
    assert "Beta(1,1)" in embed["description"]
    assert "command must be one of" in error_text(h.reply(await h.command("help", command="dance")))


@pytest.mark.parametrize(
    ("arms", "expected"),
    [
        ("all confirm", "arms takes all, undo, or arm ids"),
        ("Read confirm", "arms takes all, undo, or arm ids"),
        (" ".join(f"a{i}" for i in range(51)), "at most 50 per reset"),
        ('"tool:fs:Read', "unbalanced quote"),
    ],
)
async def test_reset_arms_are_validated(h: Harness, arms: str, expected: str) -> None:
    seed(h)
    text = error_text(h.reply(await h.command("reset", arms=arms)))
    assert expected in text


async def test_reset_of_unknown_arm_is_refused_before_any_prompt(h: Harness) -> None:
    seed(h)
    text = error_text(h.reply(await h.command("reset", arms="Read Nonexistent")))
    assert "unknown arm 'Nonexistent'" in text


# -- where /learning works, and failures -----------------------------------------------------


async def test_direct_messages_are_refused(h: Harness) -> None:
    payload = command_interaction("status", user=MEMBER, place=None)
    await h.deliver(payload)
    response = h.reply(payload)
    assert is_ephemeral(response)
    assert "Use /learning in a server channel" in response["data"]["content"]


async def test_unexpected_failures_answer_in_one_line_and_are_logged(
    h: Harness, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tree.on_error: never "The application did not respond", never a traceback."""

    def broken(invocation: object) -> object:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(h.client.interactions.bus, "dispatch", broken)
    with caplog.at_level(logging.ERROR, logger="learning_bot.discord"):
        payload = await h.command("status")
    text = error_text(h.reply(payload))
    assert text == "Something went wrong on our side; the error was logged."
    assert "disk on fire" not in text
    failures = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(failures) == 1 and failures[0].exc_info is not None
    assert "disk on fire" in str(failures[0].exc_info[1])
    assert str(payload["id"]) in failures[0].getMessage()


async def test_a_subcommand_this_version_does_not_know_asks_for_a_sync(h: Harness) -> None:
    """Commands registered by another version reach discord.py's lookup and fail there."""
    payload = command_interaction("dance", user=MEMBER, place=HERE)
    await h.deliver(payload)
    text = error_text(h.reply(payload))
    assert text == "This command is out of date; an admin needs to run: learning-bot discord sync"


async def test_non_admin_refusal_mentions_discord_admins(h: Harness) -> None:
    seed(h)
    text = error_text(h.reply(await h.command("reset", user=MEMBER, arms="all")))
    assert "Only admins can reset posteriors" in text
    assert ADMIN_HINT.split(",")[0] in text
    assert ADMIN.name not in text
    assert str(CHANNEL) not in text


async def test_status_carries_a_dashboard_link_button_when_the_address_is_known(
    fake: FakeDiscord, sqlite_url: str
) -> None:
    from .conftest import _harness, make_app

    url = "https://learning.example.com/__openclaw__/api/learning/dashboard"
    app = make_app(sqlite_url, dashboard_url=url)
    try:
        async for h in _harness(fake, app):
            seed(h)
            response = h.reply(await h.command("status"))
            links = [
                c
                for row in response["data"].get("components", [])
                for c in row["components"]
                if c.get("url")
            ]
            assert [(c["label"], c["url"], c["style"]) for c in links] == [("Dashboard", url, 5)]
    finally:
        app.close()
