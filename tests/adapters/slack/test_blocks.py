"""Reply -> Block Kit: Slack's limits, the text fallback, and user text that never turns into
markup. Every message is checked with slack_sdk's block models."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from learning_bot.adapters.slack.blocks import (
    MAX_BLOCKS,
    escape_mrkdwn,
    fallback_text,
    mrkdwn_safe,
    render_reply,
)
from learning_bot.bot.replies import (
    Action,
    Actions,
    Column,
    CompactList,
    CompactStatus,
    Fields,
    Heading,
    Reply,
    ReplyKind,
    Table,
    Text,
    Visibility,
    error_reply,
)

from .conftest import texts, validate_message

COLUMNS = (Column("Arm"), Column("Mean", "right"), Column("Pulls", "right"))
DASHBOARD = "https://learning.example.com/dashboard?team=T1&x=1"


def message(reply: Reply, **kw: Any) -> dict[str, Any]:
    rendered = render_reply(reply, **kw)
    out = {
        "text": rendered.text,
        "blocks": rendered.block_list,
        "response_type": rendered.response_type,
    }
    validate_message(out)
    return out


def table(rows: int, title: str | None = "Arms") -> Table:
    return Table(COLUMNS, tuple((f"tool:t:T{i}", "0.500", str(i)) for i in range(rows)), title)


def mrkdwn_texts(msg: dict[str, Any]) -> list[str]:
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if value.get("type") == "mrkdwn":
                found.append(value["text"])
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(msg["blocks"])
    return found


def test_every_kind_renders() -> None:
    ok = Reply(ReplyKind.OK, (Text("Done."), Text("quietly", muted=True)), "Done.")
    info = Reply(
        ReplyKind.INFO,
        (Heading("Status", "ACTIVE"), Fields((("Traces", "12"),)), table(3)),
        "status",
        Visibility.PUBLIC,
    )
    confirm = Reply(
        ReplyKind.CONFIRM,
        (
            Text("Reset everything?"),
            Actions(
                (
                    Action("Confirm", "confirm", "tok", "danger", "Really?"),
                    Action("Cancel", "cancel", "tok"),
                )
            ),
        ),
        "Reset everything?",
    )
    error = error_reply("unknown arm 'Nope'", "Try /learning status.")
    assert message(ok)["response_type"] == "ephemeral"
    assert message(info)["response_type"] == "in_channel"
    assert message(info)["blocks"][0]["text"]["text"] == "Status  [ACTIVE]"
    rendered = message(confirm)
    assert [e["action_id"] for e in rendered["blocks"][-1]["elements"]] == [
        "learning_confirm",
        "learning_cancel",
    ]
    assert "Confirm or Cancel button" in rendered["text"]
    assert "Reply `" not in rendered["text"]
    wrong = message(error)
    assert wrong["text"] == "unknown arm 'Nope'"
    assert [b["type"] for b in wrong["blocks"]] == ["section", "context"]


def test_public_errors_stay_private() -> None:
    reply = Reply(ReplyKind.ERROR, (Text("nope"),), "nope", Visibility.PUBLIC)
    assert message(reply)["response_type"] == "ephemeral"


def test_a_table_block_holds_at_most_100_rows() -> None:
    msg = message(Reply(ReplyKind.INFO, (table(250),), "big"), dashboard_url=DASHBOARD)
    [block] = [b for b in msg["blocks"] if b["type"] == "table"]
    assert len(block["rows"]) == 100
    assert block["rows"][-1][0]["text"] == "tool:t:T98"
    hint = texts(msg)
    assert "...and 151 more rows." in hint
    assert "/learning status top N" in hint
    assert "<https://learning.example.com/dashboard?team=T1&amp;x=1|dashboard>" in hint


def test_monospace_tables_fit_a_section() -> None:
    msg = message(
        Reply(ReplyKind.INFO, (table(500),), "big"), dashboard_url=DASHBOARD, table_blocks=False
    )
    code = next(t for t in mrkdwn_texts(msg) if t.startswith("```"))
    assert len(code) <= 3000
    shown = code.count("tool:t:T")
    assert 30 < shown < 500
    assert f"...and {500 - shown} more rows." in texts(msg)


def test_two_tables_read_alike_and_fit_a_phone() -> None:
    wide = (
        Column("Arm"),
        Column("Mean", "right"),
        Column("95% interval", "right"),
        Column("Pulls", "right"),
        Column("Confidence"),
        Column("Last updated"),
    )
    row = ("tool:fs:Read", "0.812", "0.700-0.900", "40", "high", "2026-11-23 10:00 UTC")
    reply = Reply(
        ReplyKind.INFO,
        (Table(wide, (row,) * 3, "Top"), Table(wide, (row,) * 3, "Bottom")),
        "two",
    )
    msg = message(reply)
    assert [b["type"] for b in msg["blocks"]].count("table") == 0, "one style for both"
    codes = [t for t in mrkdwn_texts(msg) if t.startswith("```")]
    assert len(codes) == 2
    for code in codes:
        assert all(len(line) <= 60 for line in code.splitlines())
        assert "Mean" in code and "Pulls" in code
    assert "Not shown here: Last updated (on the dashboard)." in texts(msg)
    one = message(Reply(ReplyKind.INFO, (table(3, "Top"),), "one"))
    assert [b["type"] for b in one["blocks"]].count("table") == 1, "a lone table stays a table"


def _status(compact: CompactStatus | None = None, dashboard_url: str | None = None) -> Reply:
    return Reply(
        ReplyKind.INFO,
        (
            Heading("Learning status — default", "ACTIVE"),
            Fields(tuple((f"F{i}", str(i)) for i in range(10))),
            table(5, "Top 5 arms by mean"),
            table(5, "Bottom 5 arms"),
        ),
        "status",
        dashboard_url=dashboard_url,
        compact=compact,
    )


def test_compact_status_leads_with_the_numbers_and_links_the_dashboard() -> None:
    compact = CompactStatus(
        (
            ("Phase", "ACTIVE"),
            ("Traces", "1,234"),
            ("Prompt savings", "41.0%"),
            ("Estimated recall", "93%"),
        ),
        (
            CompactList("Best arms", (("Read", "0.91"), ("<!here>*x*", "0.88"))),
            CompactList("Candidates for exclusion", (("Write", "0.12"),)),
        ),
        "Full tables: /learning status top 10, or the dashboard.",
    )
    msg = message(_status(compact=compact, dashboard_url=DASHBOARD))
    kinds = [b["type"] for b in msg["blocks"]]
    assert kinds[0] == "header" and "table" not in kinds
    assert msg["blocks"][1]["text"]["text"] == (
        "*Phase* ACTIVE · *Traces* 1,234\n*Prompt savings* 41.0% · *Estimated recall* 93%"
    )
    shown = texts(msg)
    assert "Read · 0.91" in shown and "Write · 0.12" in shown
    assert not any("<!here>" in t for t in mrkdwn_texts(msg)), "labels stay plain text"
    assert "Full tables: /learning status top 10, or the dashboard." in shown
    assert "F3" not in shown, "the full layout's fields are left out"
    last = msg["blocks"][-1]
    assert last["type"] == "actions"
    assert last["elements"][0]["url"] == DASHBOARD
    assert last["elements"][0]["text"]["text"] == "Dashboard"


def test_full_status_numbers_in_a_few_lines_and_no_link_without_an_address() -> None:
    msg = message(_status())
    kinds = [b["type"] for b in msg["blocks"]]
    assert "actions" not in kinds
    numbers = msg["blocks"][1]
    assert "fields" not in numbers
    assert numbers["text"]["text"].count("\n") == 4, "ten numbers in five lines"
    refused = message(_status(dashboard_url="javascript:alert(1)"))
    assert "actions" not in [b["type"] for b in refused["blocks"]]


def test_at_most_50_blocks_and_the_buttons_survive() -> None:
    blocks = (
        *(Text(f"line {i}") for i in range(80)),
        Actions((Action("Confirm", "confirm", "tok", "danger"), Action("Cancel", "cancel", "tok"))),
    )
    msg = message(Reply(ReplyKind.CONFIRM, blocks, "many"))
    assert len(msg["blocks"]) == MAX_BLOCKS
    assert msg["blocks"][-1]["type"] == "actions"
    assert "...and 32 more blocks." in texts(msg)


def test_more_than_10_fields_take_several_sections() -> None:
    items = tuple((f"Key {i}", str(i)) for i in range(23))
    msg = message(Reply(ReplyKind.INFO, (Fields(items),), "fields"))
    assert [len(b["fields"]) for b in msg["blocks"]] == [10, 10, 3]


def test_long_text_and_headings_are_cut() -> None:
    long = "word " * 2000
    msg = message(Reply(ReplyKind.INFO, (Heading("H" * 400), Text(long)), "long"))
    header, body = msg["blocks"]
    assert len(header["text"]["text"]) <= 150
    assert len(body["text"]["text"]) <= 3000
    assert re.search(r"\.\.\.and [\d,]+ more characters$", body["text"]["text"])
    assert len(msg["text"]) <= 3000


def test_field_values_with_markup_characters_are_plain_text() -> None:
    items = (("Label", "*bold* <!here>"), ("Arm", "tool:fs:Read"))
    msg = message(Reply(ReplyKind.INFO, (Fields(items),), "f"))
    fields = msg["blocks"][0]["fields"]
    assert {f["type"] for f in fields} == {"plain_text"}
    assert all(f["emoji"] is False for f in fields)
    plain = message(Reply(ReplyKind.INFO, (Fields((("Traces", "1,000"),)),), "f"))
    assert plain["blocks"][0]["fields"][0] == {
        "type": "mrkdwn",
        "text": "*Traces*\n1,000",
        "verbatim": True,
    }


def test_escaping_helpers() -> None:
    assert escape_mrkdwn("<!channel> & <@U1>") == "&lt;!channel&gt; &amp; &lt;@U1&gt;"
    assert "*bold*" not in fallback_text("*bold*")
    assert not mrkdwn_safe("tool:fs:Read")  # :fs: could be a custom emoji
    assert not mrkdwn_safe("_it_")
    assert mrkdwn_safe("2026-11-22 08:24 UTC – 2026-11-22 09:00 UTC")


MARKUP = st.lists(
    st.sampled_from([*"ab <>&*_~`@#!|:\n", "<!channel>", "<@U123>", "```", ":fs:"]),
    min_size=1,
    max_size=30,
).map("".join)


@settings(max_examples=150, deadline=None)
@given(words=st.lists(MARKUP, min_size=5, max_size=5), public=st.booleans())
def test_user_text_never_becomes_markup(words: list[str], public: bool) -> None:
    head, body, key, value, cell = words
    reply = Reply(
        ReplyKind.CONFIRM,
        (
            Heading(head, badge="ACTIVE"),
            Text(body),
            Text(body, muted=True),
            Fields(((key, value),)),
            Table(COLUMNS, ((cell, "0.5", "1"),), title=cell),
            Table(COLUMNS, ((cell, "0.5", "1"),), title="Second"),
            Actions((Action(cell or "x", "confirm", "tok", "danger", body),)),
        ),
        body,
        Visibility.PUBLIC if public else Visibility.PRIVATE,
    )
    for tables in (True, False):
        msg = message(reply, table_blocks=tables)
        for text in mrkdwn_texts(msg):
            outside_code = re.sub(r"```\n.*?\n```", "", text, flags=re.S)
            # the bold the renderer puts around a safe word is its own markup, not the user's
            # ("*a* a" holds "a*", yet shows the label a in bold and the value a)
            for word in words:
                if mrkdwn_safe(word.strip()):
                    outside_code = outside_code.replace(f"*{word.strip()}*", "\x00")
            for word in words:
                risky = word.strip()
                if len(risky) > 1 and not mrkdwn_safe(risky):
                    assert risky not in outside_code, (risky, text)
            assert "<" not in text and ">" not in text  # no mention, channel or link
            assert not re.search(r"&(?!amp;|lt;|gt;)", text)
        assert "<" not in msg["text"] and ">" not in msg["text"]
