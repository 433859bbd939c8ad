"""A Reply as a Discord message: one embed (title, fields, monospace tables in the description)
or, for errors, one short ephemeral text. Everything fits Discord's limits, which discord.py
does not check (Discord answers 400): long tables are cut with "...and N more" and a hint."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

import discord

from learning_bot.bot.render_text import render_table, two_to_a_line
from learning_bot.bot.replies import (
    Actions,
    CompactStatus,
    Fields,
    Heading,
    Reply,
    ReplyKind,
    Table,
    Text,
    Visibility,
)

Interaction: TypeAlias = discord.Interaction[discord.Client]
NO_MENTIONS = discord.AllowedMentions.none()
"""Replies never ping anyone: arm ids and labels are user text."""

CONTENT_LIMIT = 2000
TITLE_LIMIT = 256
DESCRIPTION_LIMIT = 4096
FIELD_COUNT_LIMIT = 25
FIELD_NAME_LIMIT = 256
FIELD_VALUE_LIMIT = 1024
FOOTER_LIMIT = 2048
EMBED_TOTAL_LIMIT = 6000
"""Characters across every embed of one message (title, description, fields, footer)."""

COLOURS = {
    ReplyKind.OK: discord.Colour(0x2ECC71),
    ReplyKind.INFO: discord.Colour(0x5865F2),
    ReplyKind.CONFIRM: discord.Colour(0xE67E22),
    ReplyKind.ERROR: discord.Colour(0xED4245),
}
DEFAULT_MORE_HINT = "`learning-bot export` lists every row"
TABLE_WIDTH = 60
"""Characters a code block line can hold in an embed before Discord wraps it."""
FIRST_CELL = 32
_ELLIPSIS = "..."


def size(text: str) -> int:
    """Length as Discord may count it (UTF-16 code units): never less than len(text)."""
    return len(text.encode("utf-16-le")) // 2


def clip(text: str, limit: int) -> str:
    """At most `limit` characters, ending in "..." when cut."""
    if size(text) <= limit:
        return text
    out = text[: max(0, limit - len(_ELLIPSIS))]
    while out and size(out) > limit - len(_ELLIPSIS):
        out = out[:-1]
    # A cut right after a backslash would escape the ellipsis's first dot.
    return out.rstrip("\\") + _ELLIPSIS


def escape(text: str) -> str:
    """User or arm text as literal Discord markdown: no formatting, links or mentions. Every
    `<` is escaped too, so that no channel or slash-command mention, custom emoji or timestamp
    (`<#id>`, `</name:id>`, `<:name:id>`, `<t:...>`) comes alive; discord.py escapes only user,
    role and everyone mentions."""
    return discord.utils.escape_mentions(discord.utils.escape_markdown(text)).replace("<", "\\<")


def code_safe(line: str) -> str:
    """A line that cannot close the code block it sits in."""
    return line.replace("`", "ˋ")


@dataclass(frozen=True, slots=True)
class DiscordMessage:
    """What to send: `content` and/or one embed, and whether only the asker sees it."""

    content: str | None
    embeds: tuple[discord.Embed, ...]
    ephemeral: bool
    truncated: int = 0
    """How many table rows, fields or lines were left out to fit Discord's limits."""
    link: tuple[str, str] | None = None
    """A link button to show under the embed: (label, url), e.g. the dashboard."""

    def link_view(self) -> discord.ui.View | None:
        """A view holding the link button (link buttons need no interaction handling)."""
        if self.link is None:
            return None
        label, url = self.link
        view = discord.ui.View(timeout=None)
        view.add_item(discord.ui.Button(label=label, url=url, style=discord.ButtonStyle.link))
        return view


@dataclass
class _TablePart:
    title: str
    head: list[str]
    rows: list[str]
    keep: int = 0
    note: str = ""

    def render(self, hint: str) -> str:
        lines = [*self.head, *self.rows[: self.keep]]
        out = (f"**{self.title}**\n" if self.title else "") + "```\n" + "\n".join(lines) + "\n```"
        left = len(self.rows) - self.keep
        if left:
            out += "\n" + _more_line(left, hint)
        if self.note:
            out += "\n" + self.note
        return out

    def overhead(self, hint: str) -> int:
        """Characters used with no row shown, counting the "...and N more" line."""
        saved = self.keep
        self.keep = 0
        try:
            return size(self.render(hint))
        finally:
            self.keep = saved


def _middle_cut(text: str, limit: int) -> str:
    """Long arm ids keep their start and their (more telling) end."""
    if len(text) <= limit:
        return text
    tail = limit * 2 // 3
    return text[: limit - tail - 3] + "..." + text[-tail:]


def _narrow(table: Table) -> tuple[list[str], list[str]]:
    """Monospace lines of at most TABLE_WIDTH characters where possible: long first cells
    are shortened in the middle, then columns are dropped from the right (at least two stay).
    Returns the lines and the names of the columns left out."""
    rows = tuple((_middle_cut(r[0], FIRST_CELL), *r[1:]) if r else r for r in table.rows)
    columns = table.columns
    while True:
        width = len(columns)
        narrowed = Table(columns, tuple(r[:width] for r in rows))
        lines = [code_safe(line) for line in render_table(narrowed, max_cell=FIRST_CELL)]
        if width <= 2 or max(size(line) for line in lines) <= TABLE_WIDTH:
            dropped = [c.name for c in table.columns[width:]]
            return lines, dropped
        columns = columns[:-1]


def _more_line(count: int, hint: str) -> str:
    return f"*...and {count:,} more ({hint})*"


@dataclass
class _Layout:
    title: str | None = None
    parts: list[str | _TablePart] = field(default_factory=list)
    fields: list[tuple[str, str]] = field(default_factory=list)
    footer: str | None = None


def render_reply(reply: Reply, *, more_hint: str = DEFAULT_MORE_HINT) -> DiscordMessage:
    """Render a reply. Errors become one short text; everything else one embed. A status leads
    with its headline numbers in the description (embed fields render below it), compactly
    when the reply carries the compact layout; a known dashboard becomes the embed's link and a
    link button."""
    if reply.kind is ReplyKind.ERROR:
        return render_error(reply)
    compact = reply.compact
    layout = _layout(reply) if compact is None else _compact_layout(reply, compact)
    embed, left_out = _embed(layout, reply.kind, more_hint)
    if not (embed.title or embed.description or embed.fields or embed.footer.text):
        embed.description = clip(escape(reply.summary.strip()), DESCRIPTION_LIMIT) or "–"
    ephemeral = reply.visibility is not Visibility.PUBLIC
    url = _link_url(reply.dashboard_url)
    if url:
        embed.url = url
    link = ("Dashboard", url) if url else None
    return DiscordMessage(None, (embed,), ephemeral, left_out, link)


def _link_url(value: str | None) -> str | None:
    """An http(s) URL Discord accepts for a link (512 characters at most), else None."""
    if value is None or len(value) > 512 or any(c.isspace() for c in value):
        return None
    return value if value.startswith(("https://", "http://")) else None


def _headline_lines(pairs: Sequence[tuple[str, str]]) -> list[str]:
    """Headline numbers, two to a line: `**Phase** ACTIVE · **Traces** 1,234`."""
    return two_to_a_line([f"**{escape(k)}** {escape(v)}" for k, v in pairs])


def _heading_title(block: Heading) -> str:
    """A heading with its badge beside it: `Learning status — default [ACTIVE]`."""
    return block.text + (f" [{block.badge}]" if block.badge else "")


def _compact_layout(reply: Reply, compact: CompactStatus) -> _Layout:
    """A status for a phone: the title, the headline numbers, short "label · mean" lists and
    where the full tables are. The reply's other blocks (the full tables) are left out."""
    layout = _Layout()
    for block in reply.blocks:
        if isinstance(block, Heading):
            layout.title = _heading_title(block)
            break
    layout.parts.append("\n".join(_headline_lines(compact.headline)))
    for entry in compact.lists:
        rows = [f"{escape(label)} · {escape(mean)}" for label, mean in entry.items]
        layout.parts.append(f"**{escape(entry.title)}**\n" + "\n".join(rows))
    layout.parts.append(f"-# {escape(compact.more)}")
    return layout


def render_error(reply: Reply) -> DiscordMessage:
    """An error reply as plain ephemeral text: the message, then muted hints as subtext."""
    lines: list[str] = []
    for block in reply.blocks:
        if isinstance(block, Text):
            for i, line in enumerate(block.text.splitlines() or [""]):
                text = escape(line)
                if i == 0 and not lines:
                    lines.append(f"**Error:** {text}" if text else "**Error**")
                elif line.strip():
                    lines.append(f"-# {text}" if block.muted else text)
    if not lines:
        lines.append(f"**Error:** {escape(reply.summary)}")
    content, left = _fit_lines(lines, CONTENT_LIMIT)
    return DiscordMessage(content, (), True, left)


def render_notice(text: str) -> DiscordMessage:
    """A one-line ephemeral notice (refusals, failures) that no user text can format."""
    return DiscordMessage(clip(escape(" ".join(text.split())), CONTENT_LIMIT), (), True)


def _fit_lines(lines: Sequence[str], limit: int) -> tuple[str, int]:
    whole = "\n".join(lines)
    if size(whole) <= limit:
        return whole, 0
    reserve = size(f"\n-# ...and {len(lines):,} more lines")
    kept: list[str] = []
    used = 0
    for line in lines:
        line = clip(line, limit - reserve)
        cost = size(line) + (1 if kept else 0)
        if used + cost + reserve > limit:
            break
        kept.append(line)
        used += cost
    left = len(lines) - len(kept)
    kept.append(f"-# ...and {left:,} more lines")
    return "\n".join(kept), left


def _layout(reply: Reply) -> _Layout:
    layout = _Layout()
    has_table = any(isinstance(b, Table) for b in reply.blocks)
    for block in reply.blocks:
        if isinstance(block, Heading):
            title = _heading_title(block)
            if layout.title is None:
                layout.title = title
            else:
                layout.parts.append(f"**{escape(title)}**")
        elif isinstance(block, Text):
            text = escape(block.text)
            layout.parts.append(f"*{text}*" if block.muted and text.strip() else text)
        elif isinstance(block, Fields) and has_table:
            # Embed fields render after the description: with tables there, the numbers go
            # first in the description instead.
            layout.parts.append("\n".join(_headline_lines(block.items)))
        elif isinstance(block, Fields):
            layout.fields.extend(block.items)
        elif isinstance(block, Table):
            lines, dropped = _narrow(block)
            part = _TablePart(escape(block.title or ""), lines[:2], lines[2:])
            if dropped:
                part.note = f"*Not shown here: {escape(', '.join(dropped))}.*"
            layout.parts.append(part)
        elif isinstance(block, Actions):
            notes = [a.confirm_text for a in block.actions if a.confirm_text]
            if notes:
                layout.footer = " ".join(notes)
    return layout


def _embed(layout: _Layout, kind: ReplyKind, hint: str) -> tuple[discord.Embed, int]:
    left_out = 0
    title = clip(escape(layout.title), TITLE_LIMIT) if layout.title else None
    footer = clip(layout.footer, FOOTER_LIMIT) if layout.footer else None
    fixed = size(title or "") + size(footer or "")
    fields, dropped = _fields(layout.fields, EMBED_TOTAL_LIMIT - fixed - 512)
    left_out += dropped
    fixed += sum(size(n) + size(v) for n, v in fields)
    budget = min(DESCRIPTION_LIMIT, EMBED_TOTAL_LIMIT - fixed)
    description, cut = _description(layout.parts, budget, hint)
    left_out += cut
    embed = discord.Embed(title=title, description=description or None, colour=COLOURS[kind])
    for name, value in fields:
        embed.add_field(name=name, value=value, inline=True)
    if footer:
        embed.set_footer(text=footer)
    return embed, left_out


def _fields(items: Sequence[tuple[str, str]], budget: int) -> tuple[list[tuple[str, str]], int]:
    out: list[tuple[str, str]] = []
    used = 0
    for i, (name, value) in enumerate(items):
        n = clip(escape(name.strip()) or "–", FIELD_NAME_LIMIT)
        v = clip(escape(value.strip()) or "–", FIELD_VALUE_LIMIT)
        left = len(items) - i
        room_for_more = len(out) < FIELD_COUNT_LIMIT - 1 or left == 1
        if not room_for_more or used + size(n) + size(v) > budget - 40:
            out.append(("More", f"...and {left:,} more fields"))
            return out, left
        out.append((n, v))
        used += size(n) + size(v)
    return out, 0


def _description(parts: Sequence[str | _TablePart], budget: int, hint: str) -> tuple[str, int]:
    """Texts whole (clipped only if they alone overflow), tables sharing what is left."""
    sep = "\n\n"
    tables = [p for p in parts if isinstance(p, _TablePart)]
    texts = [p for p in parts if isinstance(p, str)]
    fixed = sum(t.overhead(hint) for t in tables) + size(sep) * max(0, len(parts) - 1)
    text_budget = max(0, budget - fixed)
    clipped: dict[int, str] = {}
    if sum(size(t) for t in texts) > text_budget:
        share = text_budget // max(1, len(texts))
        for t in texts:
            clipped[id(t)] = clip(t, max(len(_ELLIPSIS), share))
    text_used = sum(size(clipped.get(id(t), t)) for t in texts)
    _share_rows(tables, budget - fixed - text_used)
    rendered = [
        part.render(hint) if isinstance(part, _TablePart) else clipped.get(id(part), part)
        for part in parts
    ]
    description = sep.join(r for r in rendered if r)
    left = sum(len(t.rows) - t.keep for t in tables)
    if size(description) > budget:  # only when the texts alone cannot fit
        description = clip(description, budget)
    return description, left


def _share_rows(tables: Sequence[_TablePart], budget: int) -> None:
    """Water-filling: every table gets an equal share of the room for rows; a table that needs
    less than its share gives the rest to the others."""
    costs = [[size(r) + 1 for r in t.rows] for t in tables]
    needs = [sum(c) for c in costs]
    pending = list(range(len(tables)))
    room = max(0, budget)
    while pending:
        share = room // len(pending)
        small = [i for i in pending if needs[i] <= share]
        if not small:
            break
        for i in small:
            tables[i].keep = len(tables[i].rows)
            room -= needs[i]
            pending.remove(i)
    for i in pending:
        share = room // len(pending)
        used = keep = 0
        for cost in costs[i]:
            if used + cost > share:
                break
            used += cost
            keep += 1
        tables[i].keep = keep
