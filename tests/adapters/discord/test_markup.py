"""No user text comes alive as Discord markup: every `<` of an arm id, label or reason is
escaped in every reply kind (embeds, their fields, errors, confirmation prompts and what a
click answers), so channel and slash-command mentions, custom emoji and timestamps show as
typed. Code blocks render nothing, so what they hold is left as it is."""

from __future__ import annotations

import re
from typing import Any

from learning_bot.engine import Arm

from .conftest import CHANNEL, Harness, observe

HOSTILE = (
    Arm(f"tool:chan:<#{CHANNEL}>", 100),
    Arm("tool:slash:</learning:1300000000000000099>", 100),
    Arm("tool:emoji:<:blob:1300000000000000077>", 100),
    Arm("tool:animated:<a:blob:1300000000000000078>", 100),
    Arm("tool:time:<t:1700000000:R>", 100),
    Arm("tool:fs:Read", 100),
)
LIVE = re.compile(r"(?<!\\)(?:\\\\)*<")
"""A `<` that no odd run of backslashes escapes."""


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for k, v in value.items() if k not in ("custom_id", "url") for t in _texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    return []


def live_markup(response: dict[str, Any]) -> list[str]:
    """The texts of an answer (outside code blocks) holding a `<` Discord would parse."""
    found = []
    data = response["data"]
    for part in (data.get("content"), *(data.get("embeds") or [])):
        for text in _texts(part):
            outside = re.sub(r"```.*?```", "", text, flags=re.S)
            if LIVE.search(outside):
                found.append(text)
    return found


def _seed(h: Harness) -> None:
    for i in range(8):
        used = ["Read"] if i % 2 else [HOSTILE[0].id.split(":", 2)[2]]
        observe(h.app, f"run-{i}", used, arms=HOSTILE)


async def test_no_reply_kind_leaves_user_markup_live(h: Harness) -> None:
    _seed(h)
    answers: list[tuple[str, dict[str, Any]]] = []

    async def ask(sub: str, **options: Any) -> dict[str, Any]:
        payload = await h.command(sub, **options)
        answers.append((f"{sub} {options}", h.reply(payload)))
        return payload

    await ask("status")
    await ask("status", top=10, public=True)
    for arm in HOSTILE[:5]:
        await ask("status", arm=arm.id)
        await ask("reward", arm=arm.id, value="0", reason=f"see {arm.id} and <@&1>")
    await ask("status", arm="<#1300000000000000012>")  # unknown: an error quoting it
    await ask("status", arm="blob")  # ambiguous: an error listing the candidates
    await ask("reward", arm="tool:none:<t:1:R>")
    prompt = await ask("reset", arms=" ".join(a.id for a in HOSTILE[:5]))
    click = await h.click(h.prompt_id(prompt), "confirm")
    answers.append(("confirm", h.reply(click)))
    await ask("reset", arms="undo")
    await ask("help")

    kinds = {r["data"].get("content") is None for _, r in answers}
    assert kinds == {True, False}, "both embeds and plain-text errors were checked"
    shown = "\n".join(t for _, r in answers for t in _texts(r["data"]))
    for arm in HOSTILE[:5]:
        body = arm.id.split(":", 2)[2]
        assert body.replace("<", "\\<") in shown or body in shown, f"{arm.id} never shown"
    for asked, response in answers:
        assert live_markup(response) == [], asked


def test_the_check_finds_live_markup() -> None:
    """The checker itself: live, escaped, doubly escaped and code-block cases."""
    assert live_markup({"data": {"content": "a <#1> b"}})
    assert not live_markup({"data": {"content": "a \\<#1> b"}})
    assert live_markup({"data": {"content": "a \\\\<#1> b"}})
    assert not live_markup({"data": {"embeds": [{"description": "```\n<#1>\n```"}]}})
