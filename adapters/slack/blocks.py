"""Reply -> Block Kit: header, fields, tables and confirm/cancel buttons within Slack's limits,
with a plain-text fallback.

Every string in a Reply may have come from a user or an arm, and Slack's mrkdwn has no escape
for `*`, `_`, `~` or backticks. So text goes out as `plain_text` (with `emoji: false`, so
`tool:fs:Read` never turns into a custom emoji), table cells as `raw_text`, and mrkdwn is used
only for our own labels, for field values made of harmless characters, and inside code blocks
(which mrkdwn does not format), always with `&`, `<` and `>` escaped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from learning_bot.bot.handlers import usage_grammar
from learning_bot.bot.render_text import render_table, render_text, two_to_a_line
from learning_bot.bot.replies import (
    Action,
    Actions,
    Block,
    CompactStatus,
    Fields,
    Heading,
    Reply,
    ReplyKind,
    Table,
    Text,
    Visibility,
)
from learning_bot.engine.text import strip_controls

MAX_BLOCKS = 50
MAX_SECTION_CHARS = 3000
MAX_FIELDS = 10
MAX_FIELD_CHARS = 2000
MAX_HEADER_CHARS = 150
MAX_CONTEXT_CHARS = 2000
MAX_TABLE_ROWS = 100
"""Rows of a `table` block, the header row included."""
MAX_TABLE_COLUMNS = 20
MAX_CELL_CHARS = 300
MAX_BUTTON_CHARS = 75
MAX_CONFIRM_TEXT_CHARS = 300
MAX_FALLBACK_CHARS = 3000
MONOSPACE_CELL_CHARS = 48

MONOSPACE_WIDTH = 60
"""Characters a code block line holds on a phone before Slack wraps it."""
MAX_URL_CHARS = 3000

CONFIRM_ACTION_ID = "learning_confirm"
CANCEL_ACTION_ID = "learning_cancel"
DASHBOARD_ACTION_ID = "learning_dashboard"
"""The dashboard link button: Slack still posts its click, which the app only acknowledges."""
ACTION_IDS = {"confirm": CONFIRM_ACTION_ID, "cancel": CANCEL_ACTION_ID}

ResponseType = Literal["ephemeral", "in_channel"]

_ZWSP = "\u200b"
_SAFE_MRKDWN = re.compile(r"[^&<>*_~`|@#\\]*")
_EMOJI_CODE = re.compile(r":[A-Za-z0-9_+'-]+:")
_FORMATTING = re.compile(r"([*_~`])")
_TRIPLE_BACKTICKS = re.compile(r"`(?=`)")


@dataclass(frozen=True, slots=True)
class SlackMessage:
    """What Slack gets: blocks, the `text` fallback (notifications, screen readers, clients
    without Block Kit) and whether the channel sees it."""

    text: str
    blocks: tuple[dict[str, Any], ...]
    response_type: ResponseType = "ephemeral"

    @property
    def block_list(self) -> list[dict[str, Any]]:
        return list(self.blocks)


# -- escaping ------------------------------------------------------------------------------


def clean(text: str) -> str:
    """Control and format characters become spaces (newlines and tabs are kept)."""
    return strip_controls(text, keep="\n\t")


def escape_mrkdwn(text: str) -> str:
    """Slack's three control characters as entities: no mention, channel or link can form."""
    return clean(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def fallback_text(text: str) -> str:
    """Text for the message's top-level `text`, which Slack reads as mrkdwn: entities for
    `& < >`, and a zero-width space after each formatting character so no pair of them can
    open and close bold, italics, strike-through or code."""
    return _FORMATTING.sub(rf"\1{_ZWSP}", escape_mrkdwn(text))


def mrkdwn_safe(text: str) -> bool:
    """True when `text` reads the same in mrkdwn as in plain text: no formatting or control
    characters, no mention or channel sigils, no :emoji: codes."""
    return bool(_SAFE_MRKDWN.fullmatch(text)) and not _EMOJI_CODE.search(text)


def cut(text: str, limit: int, unit: str = "characters") -> str:
    """`text` within `limit` characters; longer text ends with "...and N more <unit>"."""
    if len(text) <= limit:
        return text
    for _ in range(3):  # the suffix's own length depends on N; settles in a step or two
        suffix_len = len(f"\n...and {len(text):,} more {unit}")
        keep = max(0, limit - suffix_len)
        head = text[:keep]
        space = max(head.rfind(" "), head.rfind("\n"))
        if space >= keep * 0.8:
            head = head[:space]
        suffix = f"\n...and {len(text) - len(head):,} more {unit}"
        if len(head) + len(suffix) <= limit:
            return head.rstrip() + suffix
    return text[: max(0, limit - 3)] + "..."


def plain(text: str, limit: int = MAX_SECTION_CHARS) -> dict[str, Any]:
    """A plain_text object: shown exactly as written, no emoji codes expanded."""
    return {"type": "plain_text", "text": cut(clean(text), limit) or " ", "emoji": False}


def mrkdwn(text: str) -> dict[str, Any]:
    """A mrkdwn object for text we composed ourselves; verbatim, so nothing is auto-linked."""
    return {"type": "mrkdwn", "text": text, "verbatim": True}


# -- blocks --------------------------------------------------------------------------------


def section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": plain(text)}


def context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [plain(text, MAX_CONTEXT_CHARS)]}


def header(text: str) -> dict[str, Any]:
    return {"type": "header", "text": plain(text, MAX_HEADER_CHARS)}


def _title(text: str) -> dict[str, Any]:
    shown = clean(text)
    if mrkdwn_safe(shown) and len(shown) < MAX_SECTION_CHARS - 2:
        return {"type": "section", "text": mrkdwn(f"*{shown}*")}
    return section(shown)


def _hint(dashboard_url: str | None) -> dict[str, Any]:
    words = "Narrow it with `/learning status top N`"
    if dashboard_url and not re.search(r"[\s<>|]", dashboard_url):
        words += f", or see everything on the <{dashboard_url.replace('&', '&amp;')}|dashboard>"
    elif dashboard_url:
        words += f", or see everything on the dashboard: {escape_mrkdwn(dashboard_url)}"
    return mrkdwn(words + ".")


def _more(count: int, what: str, dashboard_url: str | None) -> dict[str, Any]:
    return {
        "type": "context",
        "elements": [mrkdwn(f"...and {count:,} more {what}."), _hint(dashboard_url)],
    }


def _fields(items: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    out = []
    for start in range(0, len(items), MAX_FIELDS):
        chunk = [(clean(k), clean(v)) for k, v in items[start : start + MAX_FIELDS]]
        if all(mrkdwn_safe(k) and mrkdwn_safe(v) for k, v in chunk):
            fields = [mrkdwn(cut(f"*{k}*\n{v}", MAX_FIELD_CHARS)) for k, v in chunk]
        else:
            fields = [plain(f"{k}\n{v}", MAX_FIELD_CHARS) for k, v in chunk]
        out.append({"type": "section", "fields": fields})
    return out


def _cell(value: str) -> dict[str, Any]:
    text = cut(clean(value).replace("\n", " ").strip(), MAX_CELL_CHARS)
    return {"type": "raw_text", "text": text or "-"}


def table_block(table: Table, dashboard_url: str | None) -> list[dict[str, Any]]:
    """Slack's `table` block: raw_text cells, the column names as the first row."""
    columns = table.columns[:MAX_TABLE_COLUMNS]
    width = len(columns)
    keep = table.rows[: MAX_TABLE_ROWS - 1]
    rows = [[_cell(c.name) for c in columns]]
    rows.extend([_cell(v) for v in (*row, *([""] * width))[:width]] for row in keep)
    out: list[dict[str, Any]] = []
    if table.title:
        out.append(_title(table.title))
    out.append(
        {
            "type": "table",
            "rows": rows,
            "column_settings": [
                {"align": c.align, "is_wrapped": c.align == "left"} for c in columns
            ],
        }
    )
    if len(table.rows) > len(keep):
        out.append(_more(len(table.rows) - len(keep), "rows", dashboard_url))
    return out


def _code(lines: Iterable[str]) -> str:
    body = "\n".join(_TRIPLE_BACKTICKS.sub("`" + _ZWSP, escape_mrkdwn(line)) for line in lines)
    return f"```\n{body}\n```"


def _narrow(table: Table) -> tuple[Table, list[str]]:
    """The table with columns dropped from the right (two stay) until its lines fit
    MONOSPACE_WIDTH; returns it and the names of the columns left out."""
    width = len(table.columns)
    while width > 2:
        lines = render_table(
            Table(table.columns[:width], tuple(r[:width] for r in table.rows)),
            max_cell=MONOSPACE_CELL_CHARS,
        )
        if max(len(line) for line in lines) <= MONOSPACE_WIDTH:
            break
        width -= 1
    kept = Table(table.columns[:width], tuple(r[:width] for r in table.rows), table.title)
    return kept, [c.name for c in table.columns[width:]]


def monospace_table(table: Table, dashboard_url: str | None) -> list[dict[str, Any]]:
    """A table as aligned text in a code block narrow enough for a phone (columns that do
    not fit are named below it), as many rows as fit in one section."""
    narrowed, dropped = _narrow(table)
    lines = render_table(
        Table(narrowed.columns, narrowed.rows, None), max_cell=MONOSPACE_CELL_CHARS
    )  # header, rule, rows
    head, rows = lines[:2], lines[2:]
    shown = len(rows)
    while shown > 0 and len(_code([*head, *rows[:shown]])) > MAX_SECTION_CHARS:
        shown -= 1
    out: list[dict[str, Any]] = []
    if table.title:
        out.append(_title(table.title))
    out.append({"type": "section", "text": mrkdwn(_code([*head, *rows[:shown]]))})
    if shown < len(rows):
        out.append(_more(len(rows) - shown, "rows", dashboard_url))
    if dropped:
        out.append(context(f"Not shown here: {', '.join(dropped)} (on the dashboard)."))
    return out


def _pairs(items: Sequence[Sequence[str]]) -> dict[str, Any]:
    """Numbers two to a line, `*Phase* ACTIVE · *Traces* 1,234`: a few lines where fields
    would stack into twice as many on a phone."""
    shown = [(clean(str(k)), clean(str(v))) for k, v in items]
    if all(mrkdwn_safe(k) and mrkdwn_safe(v) for k, v in shown):
        parts = [f"*{k}* {v}" for k, v in shown]
        lines = two_to_a_line(parts)
        return {"type": "section", "text": mrkdwn(cut("\n".join(lines), MAX_SECTION_CHARS))}
    return section("\n".join(two_to_a_line([f"{k}: {v}" for k, v in shown])))


def dashboard_button(url: str) -> dict[str, Any] | None:
    """A link button to the dashboard, or None for an address Slack would refuse."""
    if len(url) > MAX_URL_CHARS or not url.startswith(("https://", "http://")):
        return None
    if re.search(r"\s", url):
        return None
    return {
        "type": "button",
        "action_id": DASHBOARD_ACTION_ID,
        "text": plain("Dashboard", MAX_BUTTON_CHARS),
        "url": url,
    }


def _heading(block: Heading) -> dict[str, Any]:
    """A heading with its badge beside it: `Learning status — default  [ACTIVE]`."""
    return header(block.text + (f"  [{block.badge}]" if block.badge else ""))


def compact_status(reply: Reply, compact: CompactStatus) -> list[dict[str, Any]]:
    """A status for a phone: the title, the headline numbers, short "label · mean" lists and
    where the full tables are. The reply's other blocks (the full tables) are left out."""
    out: list[dict[str, Any]] = []
    for block in reply.blocks:
        if isinstance(block, Heading):
            out.append(_heading(block))
            break
    if compact.headline:
        out.append(_pairs(compact.headline))
    for entry in compact.lists:
        rows = [f"{label} · {mean}" for label, mean in entry.items]
        if rows:
            out.append(_title(entry.title))
            out.append(section("\n".join(rows)))
    if compact.more:
        out.append(context(compact.more))
    return out


def button(action: Action) -> dict[str, Any]:
    element: dict[str, Any] = {
        "type": "button",
        "action_id": ACTION_IDS[action.command],
        "text": plain(action.label, MAX_BUTTON_CHARS),
        "value": action.token,
    }
    if action.style in ("primary", "danger"):
        element["style"] = action.style
    if action.confirm_text:
        element["confirm"] = {
            "title": plain("Are you sure?", 100),
            "text": plain(action.confirm_text, MAX_CONFIRM_TEXT_CHARS),
            "confirm": plain(f"Yes, {action.label.lower()}", 30),
            "deny": plain("Go back", 30),
            "style": "danger" if action.style == "danger" else "primary",
        }
    return element


def _fit(blocks: list[dict[str, Any]], dashboard_url: str | None) -> list[dict[str, Any]]:
    """At most MAX_BLOCKS blocks; the buttons are never the ones left out."""
    if len(blocks) <= MAX_BLOCKS:
        return blocks
    actions = [b for b in blocks if b["type"] == "actions"]
    others = [b for b in blocks if b["type"] != "actions"]
    room = MAX_BLOCKS - len(actions) - 1
    return [*others[:room], _more(len(others) - room, "blocks", dashboard_url), *actions]


# -- replies -------------------------------------------------------------------------------


def _error_blocks(reply: Reply) -> tuple[str, list[dict[str, Any]]]:
    """One line that names what was wrong, and at most one muted line of help."""
    line = clean(reply.summary).strip().splitlines()[0] if reply.summary.strip() else "Error"
    blocks = [section(f"\u26a0\ufe0f {line}")]
    grammar = usage_grammar(reply)
    hint: str | None = None
    if grammar is not None:
        hint = "Usage: " + grammar
    elif reply.usage:
        hint = "/learning help lists the commands."
    else:
        muted = [b.text for b in reply.blocks if isinstance(b, Text) and b.muted]
        if muted:
            hint = muted[0].strip().splitlines()[0]
    if hint:
        blocks.append(context(hint))
    return line, blocks


def render_blocks(
    blocks: Sequence[Block], dashboard_url: str | None = None, table_blocks: bool = True
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    tables = sum(1 for b in blocks if isinstance(b, Table) and b.rows)
    # Slack allows one table block per message: with more tables, all are code blocks, so
    # they read alike.
    table_used = not table_blocks or tables > 1
    for block in blocks:
        if isinstance(block, Heading):
            out.append(_heading(block))
        elif isinstance(block, Text):
            if block.text.strip():
                out.append(context(block.text) if block.muted else section(block.text))
        elif isinstance(block, Fields) and tables:
            out.append(_pairs(block.items))  # numbers above the tables, in a few lines
        elif isinstance(block, Fields):
            out.extend(_fields(block.items))
        elif isinstance(block, Table):
            if not block.rows:
                if block.title:
                    out.append(_title(block.title))
                out.append(context("No rows."))
            elif not table_used:
                out.extend(table_block(block, dashboard_url))
                table_used = True  # Slack allows one table block per message
            else:
                out.extend(monospace_table(block, dashboard_url))
        elif isinstance(block, Actions) and block.actions:
            out.append({"type": "actions", "elements": [button(a) for a in block.actions]})
    return _fit(out, dashboard_url)


def _plain_fallback(reply: Reply) -> str:
    """The reply as plain text, with the buttons described as buttons."""
    blocks = tuple(b for b in reply.blocks if not isinstance(b, Actions))
    text = render_text(replace(reply, blocks=blocks)) or reply.summary
    if reply.actions:
        labels = " or ".join(a.label for a in reply.actions)
        text += f"\n(Use the {labels} button.)"
    return text


def render_reply(
    reply: Reply, *, dashboard_url: str | None = None, table_blocks: bool = True
) -> SlackMessage:
    """The Slack message for a Reply. Errors are one private line; `public` replies go to the
    channel, everything else only to the person who asked."""
    if reply.kind is ReplyKind.ERROR:
        line, blocks = _error_blocks(reply)
        return SlackMessage(cut(fallback_text(line), MAX_FALLBACK_CHARS), tuple(blocks))
    if reply.compact is not None:
        rendered = compact_status(reply, reply.compact)
    else:
        rendered = render_blocks(reply.blocks, dashboard_url, table_blocks)
    link = reply.dashboard_url
    link_button = dashboard_button(link) if link is not None else None
    if link_button is not None:
        rendered = [*rendered[: MAX_BLOCKS - 1], {"type": "actions", "elements": [link_button]}]
    if not rendered:
        rendered = [section(reply.summary or "Done.")]
    text = cut(fallback_text(_plain_fallback(reply)), MAX_FALLBACK_CHARS)
    visibility: ResponseType = (
        "in_channel" if reply.visibility is Visibility.PUBLIC else "ephemeral"
    )
    return SlackMessage(text, tuple(rendered), visibility)


def working_message() -> SlackMessage:
    """The immediate acknowledgement of a command whose answer follows via response_url."""
    return SlackMessage("Working on it...", (context("Working on it..."),))
