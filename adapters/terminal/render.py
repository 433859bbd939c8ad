"""A reply as the terminal shows it: the plain text every surface falls back to
(bot.render_text), with colour when the terminal wants it (headers, the phase badge, the
sign of the savings, muted notes)."""

from __future__ import annotations

import re

from learning_bot.adapters.terminal.style import Style
from learning_bot.bot.render_text import plain, render_table, render_text
from learning_bot.bot.replies import Fields, Heading, Reply, Table, Text

_PERCENT = re.compile(r"-?\d+(?:\.\d+)?%")
_ABOUT_SAVINGS = re.compile(r"\bsav(?:ed|ings?)\b", re.IGNORECASE)


def _savings(text: str, style: Style) -> str:
    """Colour the first percentage of a line about savings by its sign."""
    match = _PERCENT.search(text)
    if match is None:
        return text
    value = float(match.group()[:-1])
    return text[: match.start()] + style.signed(match.group(), value) + text[match.end() :]


def render(reply: Reply, style: Style) -> str:
    if not style.enabled:
        return render_text(reply)
    out: list[str] = []
    for block in reply.blocks:
        if isinstance(block, Heading):
            badge = f" {style.badge(plain(block.badge))}" if block.badge else ""
            out.append(style.bold(plain(block.text)) + badge)
        elif isinstance(block, Text):
            text = plain(block.text)
            if _ABOUT_SAVINGS.search(text):
                text = _savings(text, style)
            out.append(style.dim(text) if block.muted else text)
        elif isinstance(block, Fields):
            width = max((len(k) for k, _ in block.items), default=0)
            for key, value in block.items:
                shown = plain(value)
                if _ABOUT_SAVINGS.search(key):
                    shown = _savings(shown, style)
                out.append(f"{style.dim(f'{plain(key):<{width}}')}  {shown}")
        elif isinstance(block, Table):
            lines = render_table(block)
            if out:
                out.append("")
            if block.title:
                out.append(style.bold(lines.pop(0)))
            out.append(style.bold(lines[0]))
            out.append(style.dim(lines[1]))
            out.extend(lines[2:])
        else:
            out.append(render_text(Reply(reply.kind, (block,), reply.summary)))
    return "\n".join(out).strip("\n")
