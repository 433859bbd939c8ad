"""Discord's message limits, which discord.py does not check: a 1,000-arm status and a
1,000-row reward table go through the fake (which answers 400 past any limit), and the
renderer keeps any reply within every limit."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from learning_bot.adapters.discord.render import (
    CONTENT_LIMIT,
    DESCRIPTION_LIMIT,
    EMBED_TOTAL_LIMIT,
    TABLE_WIDTH,
    escape,
    render_reply,
)
from learning_bot.bot.replies import (
    Action,
    Actions,
    Column,
    Fields,
    Heading,
    Reply,
    ReplyKind,
    Table,
    Text,
    Visibility,
    error_reply,
)
from learning_bot.engine import Arm

from .conftest import Harness, observe
from .fake_discord import message_errors
from .test_commands import embed_of

BIG = tuple(
    Arm(f"tool:integration-{i:04d}:a-rather-long-tool-name-number-{i:04d}", 10 + i % 50)
    for i in range(1000)
)


def total(embed: dict[str, Any]) -> int:
    return (
        len(embed.get("title") or "")
        + len(embed.get("description") or "")
        + sum(len(f["name"]) + len(f["value"]) for f in embed.get("fields") or [])
        + len((embed.get("footer") or {}).get("text") or "")
    )


def payload_of(reply: Reply) -> dict[str, Any]:
    message = render_reply(reply)
    return {"content": message.content, "embeds": [e.to_dict() for e in message.embeds]}


async def test_a_1000_arm_status_fits(h: Harness) -> None:
    for i in range(3):
        observe(h.app, f"big-{i}", [a.name for a in BIG[: 10 * (i + 1)]], arms=BIG)
    payload = await h.command("status", top=25)
    response = h.reply(payload)
    assert response["type"] == 4
    assert h.fake.violations == []
    embed = embed_of(response)
    description = embed["description"]
    assert len(description) <= DESCRIPTION_LIMIT and total(embed) <= EMBED_TOTAL_LIMIT
    assert "fields" not in embed
    assert "**Arms** 1,000" in description.split("```")[0], "the numbers come before the tables"
    tables = description.split("```")[1::2]
    assert len(tables) == 2, "both the top and the bottom table are shown"
    for table, rest in zip(tables, description.split("```")[2::2], strict=True):
        shown = len(table.strip().splitlines()) - 2
        cut = re.match(r"\s*\*\.\.\.and (\d+) more", rest)
        assert shown + (int(cut.group(1)) if cut else 0) == 25
        assert all(len(line) <= TABLE_WIDTH for line in table.splitlines())


async def test_a_reward_touching_1000_arms_fits(h: Harness) -> None:
    observe(h.app, "all-used", [a.name for a in BIG], arms=BIG)
    response = h.reply(await h.command("reward", value="bad"))
    assert h.fake.violations == []
    embed = embed_of(response)
    assert "Recorded a bad reward (0) for 1000 arm(s)" in embed["description"]
    assert "...and 9" in embed["description"]
    assert total(embed) <= EMBED_TOTAL_LIMIT


def test_every_limit_at_once() -> None:
    columns = (Column("Arm"), Column("Mean", "right"))
    rows = tuple((f"tool:x:Arm{i}", f"{i / 1000:.3f}") for i in range(1000))
    reply = Reply(
        ReplyKind.CONFIRM,
        (
            Heading("T" * 400, "BADGE"),
            Fields(tuple((f"name {i} " + "n" * 300, "v" * 2000) for i in range(40))),
            Text("x" * 5000),
            Table(columns, rows, "first"),
            Table(columns, rows[:3], "second"),
            Actions((Action("Confirm", "confirm", "tok", "danger", "c" * 3000),)),
        ),
        "summary",
    )
    payload = payload_of(reply)
    assert message_errors(payload) == []
    embed = payload["embeds"][0]
    assert len(embed["title"]) == 256 and embed["title"].endswith("...")
    assert "fields" not in embed, "with tables, the numbers lead the description instead"
    assert len(embed["description"]) <= DESCRIPTION_LIMIT
    assert total(embed) <= EMBED_TOTAL_LIMIT

    without_tables = replace(reply, blocks=reply.blocks[:3])
    payload = payload_of(without_tables)
    assert message_errors(payload) == []
    embed = payload["embeds"][0]
    assert len(embed["fields"]) <= 25
    assert embed["fields"][-1]["value"].startswith("...and ")
    assert total(embed) <= EMBED_TOTAL_LIMIT


def test_a_table_is_cut_with_a_count_and_a_hint() -> None:
    rows = tuple((f"tool:x:Arm{i:04d}", "0.500") for i in range(1000))
    reply = Reply(ReplyKind.INFO, (Table((Column("Arm"), Column("Mean")), rows, "All"),), "s")
    description = payload_of(reply)["embeds"][0]["description"]
    shown = description.split("```")[1].strip().splitlines()[2:]
    left = 1000 - len(shown)
    assert left > 0
    assert f"*...and {left:,} more (" in description.replace("\\", "")
    assert shown[0].startswith("tool:x:Arm0000") and len(description) <= DESCRIPTION_LIMIT


def test_a_small_reply_is_not_cut() -> None:
    rows = tuple((f"a{i}", "1") for i in range(5))
    reply = Reply(ReplyKind.INFO, (Table((Column("Arm"), Column("N")), rows),), "s")
    description = payload_of(reply)["embeds"][0]["description"]
    assert "more" not in description and description.count("\na") == 5


def test_long_errors_fit_in_one_message() -> None:
    reply = error_reply("e" * 3000, "\n".join(f"hint {i}" for i in range(500)))
    message = render_reply(reply)
    assert message.ephemeral and not message.embeds
    assert message.content is not None and len(message.content) <= CONTENT_LIMIT
    assert message.content.startswith("**Error:** eee")
    assert message.content.endswith("more lines")


def test_public_replies_are_public_and_errors_never_are() -> None:
    public = Reply(ReplyKind.INFO, (Text("hi"),), "hi", Visibility.PUBLIC)
    assert not render_reply(public).ephemeral
    assert render_reply(Reply(ReplyKind.INFO, (Text("hi"),), "hi")).ephemeral
    assert render_reply(error_reply("no")).ephemeral


def test_code_blocks_cannot_be_closed_by_an_arm_id() -> None:
    rows = (("tool:x:```evil", "1"),)
    reply = Reply(ReplyKind.INFO, (Table((Column("Arm"), Column("N")), rows),), "s")
    description = payload_of(reply)["embeds"][0]["description"]
    assert description.count("```") == 2


def test_escape() -> None:
    assert escape("@everyone **b** <@123456789012345678>") == (
        "@\u200beveryone \\*\\*b\\*\\* \\<@\u200b123456789012345678>"
    )


text = st.text(st.characters(exclude_categories=["Cs"]), max_size=3000)
blocks = st.lists(
    st.one_of(
        st.builds(Heading, text, st.one_of(st.none(), text)),
        st.builds(Text, text, st.booleans()),
        st.builds(Fields, st.lists(st.tuples(text, text), max_size=40).map(tuple)),
        st.builds(
            Table,
            st.just((Column("A"), Column("B", "right"))),
            st.lists(st.tuples(text, text), max_size=300).map(tuple),
            st.one_of(st.none(), text),
        ),
    ),
    max_size=8,
)


@settings(max_examples=60, deadline=None)
@given(blocks, st.sampled_from(list(ReplyKind)))
def test_any_reply_renders_within_discords_limits(parts: list[Any], kind: ReplyKind) -> None:
    payload = payload_of(Reply(kind, tuple(parts), "summary"))
    assert message_errors(payload) == []


def test_status_links_the_dashboard_when_its_address_is_known() -> None:
    from learning_bot.adapters.discord.render import render_reply
    from learning_bot.bot.replies import CompactList, CompactStatus, Heading, Reply, ReplyKind

    url = "https://learning.example.com/__openclaw__/api/learning/dashboard"
    reply = Reply(
        ReplyKind.INFO,
        (Heading("Learning status — default", "ACTIVE"),),
        "status",
        dashboard_url=url,
        compact=CompactStatus(
            (("Phase", "ACTIVE"), ("Traces", "12"), ("Prompt savings", "41.0%")),
            (CompactList("Best arms", (("Read*", "0.91"),)),),
            "Full tables: /learning status top 10, or the dashboard.",
        ),
    )
    message = render_reply(reply)
    embed = message.embeds[0]
    assert embed.url == url
    assert message.link == ("Dashboard", url)
    view = message.link_view()
    assert view is not None and [b.url for b in view.children] == [url]  # type: ignore[attr-defined]
    assert embed.description is not None
    lines = embed.description.splitlines()
    assert lines[:2] == ["**Phase** ACTIVE · **Traces** 12", "**Prompt savings** 41.0%"]
    assert "Read\\* · 0.91" in embed.description, "labels are escaped"
    without = render_reply(Reply(ReplyKind.INFO, (), "status", dashboard_url="x y"))
    assert without.link is None and without.link_view() is None
