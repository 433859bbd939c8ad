"""A reply (as bot.replies.Reply.to_dict writes it) as the terminal surface prints it:
adapters.terminal.render and bot.render_text, with adapters.terminal.style's colours."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from adapters.terminal.style import CODES, RESET

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_PERCENT = r"-?\d+(?:\.\d+)?%"
_ABOUT_SAVINGS = r"(?i)\bsav(?:ed|ings?)\b"
"""Compiled on first use (re keeps them): a status without colour needs neither."""
_CONTROL_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def plain(text: str) -> str:
    """bot.render_text.plain: control characters (engine.text) become spaces, line breaks
    stay. Printable text has none (str.isprintable is false for every category here), so it
    is returned without importing unicodedata: a status has a dash or two in it."""
    if text.isprintable():
        return text
    import unicodedata

    return "".join(
        " " if ch != "\n" and unicodedata.category(ch) in _CONTROL_CATEGORIES else ch for ch in text
    )


def _width(text: str) -> int:
    if text.isascii():
        return len(text)
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in text)


def _pad(text: str, width: int, align: str) -> str:
    gap = max(0, width - _width(text))
    return " " * gap + text if align == "right" else text + " " * gap


def render_table(table: Mapping[str, Any], max_cell: int = 48) -> list[str]:
    """bot.render_text.render_table."""

    def cell(value: object) -> str:
        shown = plain(str(value)).replace("\n", " ")
        return shown if len(shown) <= max_cell else shown[: max_cell - 3] + "..."

    columns = [(str(c["name"]), c["align"]) for c in table["columns"]]
    header = [cell(name) for name, _ in columns]
    rows = [[cell(v) for v in row] for row in table["rows"]]
    widths = [max([_width(header[i])] + [_width(r[i]) for r in rows]) for i in range(len(header))]
    lines = []
    title = table.get("title")
    if title:
        lines.append(plain(title))
    lines.append(
        "  ".join(
            _pad(h, w, align) for h, w, (_, align) in zip(header, widths, columns, strict=True)
        ).rstrip()
    )
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append(
            "  ".join(
                _pad(v, w, align) for v, w, (_, align) in zip(row, widths, columns, strict=True)
            ).rstrip()
        )
    return lines


def _items(block: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [(str(k), str(v)) for k, v in block["items"]]


def render_text(blocks: Sequence[Mapping[str, Any]]) -> str:
    """bot.render_text.render_text."""
    out: list[str] = []
    for block in blocks:
        kind = block["type"]
        if kind == "heading":
            badge = f" [{plain(block['badge'])}]" if block.get("badge") else ""
            out.append(f"{plain(block['text'])}{badge}")
        elif kind == "text":
            out.append(plain(block["text"]))
        elif kind == "fields":
            items = _items(block)
            width = max((len(k) for k, _ in items), default=0)
            out.extend(f"{plain(k):<{width}}  {plain(v)}" for k, v in items)
        elif kind == "table":
            out.append("")
            out.extend(render_table(block))
        else:
            choices = " or ".join(f"`{a['command']}`" for a in block["actions"])
            out.append(f"Reply {choices}.")
    return "\n".join(out).strip("\n")


def _paint(text: str, codes: str) -> str:
    return f"\033[{codes}m{text}{RESET}" if text else text


def _savings(text: str) -> str:
    """Colour the first percentage of a line about savings by its sign."""
    match = re.search(_PERCENT, text)
    if match is None:
        return text
    value = float(match.group()[:-1])
    shown = match.group()
    if value:
        shown = _paint(shown, CODES["green" if value > 0 else "red"])
    return text[: match.start()] + shown + text[match.end() :]


def render(reply: Mapping[str, Any], colour: bool) -> str:
    """adapters.terminal.render.render (with colour when `colour`)."""
    blocks = reply["blocks"]
    if not colour:
        return render_text(blocks)
    bold, dim = CODES["bold"], CODES["dim"]
    out: list[str] = []
    for block in blocks:
        kind = block["type"]
        if kind == "heading":
            badge = ""
            if block.get("badge"):
                word = plain(block["badge"])
                key = f"badge_{word.strip().lower()}"
                badge = " " + (_paint(f" {word} ", CODES[key]) if key in CODES else f"[{word}]")
            out.append(_paint(plain(block["text"]), bold) + badge)
        elif kind == "text":
            text = plain(block["text"])
            if re.search(_ABOUT_SAVINGS, text):
                text = _savings(text)
            out.append(_paint(text, dim) if block.get("muted") else text)
        elif kind == "fields":
            items = _items(block)
            width = max((len(k) for k, _ in items), default=0)
            for key, value in items:
                shown = plain(value)
                if re.search(_ABOUT_SAVINGS, key):
                    shown = _savings(shown)
                out.append(f"{_paint(f'{plain(key):<{width}}', dim)}  {shown}")
        elif kind == "table":
            lines = render_table(block)
            if out:
                out.append("")
            if block.get("title"):
                out.append(_paint(lines.pop(0), bold))
            out.append(_paint(lines[0], bold))
            out.append(_paint(lines[1], dim))
            out.extend(lines[2:])
        else:
            out.append(render_text([block]))
    return "\n".join(out).strip("\n")
