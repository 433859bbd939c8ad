"""Plain monospace rendering of a Reply: the terminal, the console, and every fallback text."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from learning_bot.bot.replies import Actions, Fields, Heading, Reply, Table, Text
from learning_bot.engine.text import strip_controls


def plain(text: str) -> str:
    """Control characters cannot reach a terminal (no escape sequences from arm ids); line
    breaks are kept."""
    return strip_controls(text, keep="\n")


def _width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in text)


def _pad(text: str, width: int, align: str) -> str:
    gap = max(0, width - _width(text))
    return " " * gap + text if align == "right" else text + " " * gap


def render_table(table: Table, max_cell: int = 48) -> list[str]:
    def cell(value: str) -> str:
        value = plain(value).replace("\n", " ")
        return value if len(value) <= max_cell else value[: max_cell - 3] + "..."

    header = [cell(c.name) for c in table.columns]
    rows = [[cell(v) for v in row] for row in table.rows]
    widths = [max([_width(header[i])] + [_width(r[i]) for r in rows]) for i in range(len(header))]
    lines = []
    if table.title:
        lines.append(plain(table.title))
    lines.append(
        "  ".join(
            _pad(h, w, c.align) for h, w, c in zip(header, widths, table.columns, strict=True)
        ).rstrip()
    )
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append(
            "  ".join(
                _pad(v, w, c.align) for v, w, c in zip(row, widths, table.columns, strict=True)
            ).rstrip()
        )
    return lines


def two_to_a_line(parts: Sequence[str]) -> list[str]:
    """Short items two to a line, `a · b`: a status's headline numbers where a list of
    key/value fields would stack into twice as many lines on a phone."""
    return [" · ".join(parts[i : i + 2]) for i in range(0, len(parts), 2)]


def render_text(reply: Reply) -> str:
    out: list[str] = []
    for block in reply.blocks:
        if isinstance(block, Heading):
            badge = f" [{plain(block.badge)}]" if block.badge else ""
            out.append(f"{plain(block.text)}{badge}")
        elif isinstance(block, Text):
            out.append(plain(block.text))
        elif isinstance(block, Fields):
            width = max((len(k) for k, _ in block.items), default=0)
            out.extend(f"{plain(k):<{width}}  {plain(v)}" for k, v in block.items)
        elif isinstance(block, Table):
            out.append("")
            out.extend(render_table(block))
        elif isinstance(block, Actions):
            choices = " or ".join(f"`{a.command}`" for a in block.actions)
            out.append(f"Reply {choices}.")
    return "\n".join(out).strip("\n")
