"""Regenerate the alert and digest pictures in docs/screenshots/ (alert-slack.png,
alert-discord.png, digest-slack.png, digest-discord.png, digest-chart.png).

The cards are built by the product's own code (engine.alerts findings, bot.alerting's alert
card, bot.digest's card and chart) and rendered by each surface's renderer (the Block Kit JSON
Slack receives, the embed JSON Discord receives); this script lays that JSON out in the two
clients' styles and photographs it in Chromium, as docs/screenshots.py does the dashboard.
Uses docs/screenshots.py's Chromium settings and palette reduction."""

from __future__ import annotations

import argparse
import base64
import html
import math
import os
import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from screenshots import CHROMIUM_ARGS, OUT, shrink  # noqa: E402

from learning_bot.adapters.discord.alerts import message_payload  # noqa: E402
from learning_bot.adapters.slack.blocks import render_reply as slack_render  # noqa: E402
from learning_bot.bot.alerting import alert_card  # noqa: E402
from learning_bot.bot.digest import DigestFacts, Period, TrendPoint, digest_card, digest_chart  # noqa: E402
from learning_bot.bot.replies import Reply  # noqa: E402
from learning_bot.engine.alerts import FIRING, RewardLevels, Signals, findings  # noqa: E402
from learning_bot.engine.starvation import StarvedArm  # noqa: E402

DASHBOARD = "https://learning.example.com/__openclaw__/api/learning/dashboard"


def sample_cards() -> tuple[Reply, Reply, bytes | None]:
    """The starvation alert of the OpenClaw-style poisoning, and a day's digest."""
    starved = StarvedArm("tool:web:web_search", "web_search", 0, 50, 96, 0.71)
    signals = Signals("openclaw", starved=[starved], levels=RewardLevels(0.029, 50, 0.41, 200))
    alert = alert_card(findings(signals, {})[0], FIRING, DASHBOARD)
    facts = DigestFacts(
        "openclaw",
        Period(0, 86_400_000, "2026-11-25", 0),
        1_284,
        1_191,
        9_870_000,
        31.0,
        44.0,
        0.93,
        (
            ("tool:web:web_search", 0.81, 0.22),
            ("skill:coding:review", 0.35, 0.71),
            ("file:workspace:AGENTS.md", 0.62, 0.88),
            ("tool:exec:bash", 0.90, 0.74),
        ),
        ("Starved arm: web_search", "Reward rate collapsed"),
        tuple(
            TrendPoint(
                hour * 3_600_000,
                44.0 + 3.0 * math.sin(hour / 3.0),
                0.95 - (0.12 if 14 <= hour <= 17 else 0.0) + 0.01 * math.cos(hour),
            )
            for hour in range(24)
            if hour % 2 == 0 or hour >= 12
        ),
    )
    return alert, digest_card(facts, "digest daily", DASHBOARD), digest_chart(facts)


def _slack_text(node: dict[str, Any]) -> str:
    """A text object as Slack shows it: mrkdwn's entities decoded and its *bold* drawn."""
    raw = str(node.get("text", ""))
    if node.get("type") != "mrkdwn":
        return html.escape(raw).replace("\n", "<br>")
    text = html.escape(html.unescape(raw).replace("\u200b", ""))
    text = re.sub(r"(?<!\w)\*(.+?)\*(?!\w)", r"<b>\1</b>", text)
    return text.replace("\n", "<br>")


def slack_html(reply: Reply, image: bytes | None) -> str:
    return slack_message_html(slack_render(reply).blocks, image)


def slack_message_html(blocks: Sequence[dict[str, Any]], image: bytes | None = None) -> str:
    """Block Kit blocks laid out as Slack shows them."""
    parts: list[str] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "header":
            parts.append(f"<div class=h>{_slack_text(block['text'])}</div>")
        elif kind == "section":
            if "text" in block:
                parts.append(f"<div class=s>{_slack_text(block['text'])}</div>")
            if "fields" in block:
                cells = "".join(f"<div>{_slack_text(f)}</div>" for f in block["fields"])
                parts.append(f"<div class=f>{cells}</div>")
        elif kind == "context":
            texts = " ".join(_slack_text(e) for e in block.get("elements", []))
            parts.append(f"<div class=c>{texts}</div>")
        elif kind == "table":
            rows = "".join(
                "<tr>"
                + "".join(f"<td>{html.escape(str(cell.get('text', '')))}</td>" for cell in row)
                + "</tr>"
                for row in block.get("rows", [])
            )
            parts.append(f"<table>{rows}</table>")
        elif kind == "actions":
            buttons = "".join(
                f"<span class='b {e.get('style', '')}'>{_slack_text(e['text'])}</span>"
                for e in block["elements"]
            )
            parts.append(f"<div>{buttons}</div>")
    if image is not None:
        parts.append(_image(image))
    body = "".join(parts)
    return f"""<html><head><style>
body{{font-family:Lato,Helvetica,Arial,sans-serif;font-size:15px;background:#fff;color:#1d1c1d;
margin:0;padding:16px;width:640px}}
.m{{display:flex;gap:8px}}.a{{width:36px;height:36px;border-radius:6px;background:#4a154b}}
.n{{font-weight:900}}.t{{color:#616061;font-size:12px;margin-left:6px}}
.h{{font-weight:900;font-size:18px;margin:6px 0}}.s{{margin:6px 0}}
.f{{display:grid;grid-template-columns:1fr 1fr;gap:6px 16px;margin:6px 0}}
.c{{color:#616061;font-size:13px;margin:6px 0}}
table{{border-collapse:collapse;margin:6px 0}}td{{border:1px solid #ddd;padding:3px 8px}}
.b{{border:1px solid #bbb;border-radius:4px;padding:4px 12px;font-weight:700;margin-right:8px;
display:inline-block;margin-top:6px}}.danger{{background:#e01e5a;border-color:#e01e5a;color:#fff}}
.primary{{background:#007a5a;border-color:#007a5a;color:#fff}}
img{{max-width:520px;border:1px solid #ddd;border-radius:6px;margin-top:6px}}
</style></head><body><div class=m><div class=a></div><div><span class=n>learning-bot</span>
<span class=t>APP 09:00</span>{body}</div></div></body></html>"""


def discord_html(reply: Reply, image: bytes | None) -> str:
    return discord_message_html(message_payload(reply), image)


BUTTON_STYLES = {1: "primary", 2: "secondary", 3: "success", 4: "danger", 5: "secondary"}
"""Discord's button styles by number (5: a link, drawn as secondary with an arrow)."""


def discord_message_html(payload: dict[str, Any], image: bytes | None = None) -> str:
    """A message's JSON (content, embeds, components) laid out as Discord shows it."""
    parts: list[str] = []
    if payload.get("content"):
        parts.append(f"<div class=ed>{discord_markdown(payload['content'])}</div>")
    for embed in payload["embeds"]:
        inner = ""
        if embed.get("title"):
            linked = " style='color:#00a8fc'" if embed.get("url") else ""
            inner += f"<div class=et{linked}>{discord_markdown(embed['title'])}</div>"
        if embed.get("description"):
            inner += f"<div class=ed>{discord_markdown(embed['description'])}</div>"
        fields = "".join(
            f"<div><b>{discord_markdown(f['name'])}</b><br>{discord_markdown(f['value'])}</div>"
            for f in embed.get("fields", [])
        )
        if fields:
            inner += f"<div class=ef>{fields}</div>"
        if embed.get("footer"):
            inner += f"<div class=eo>{html.escape(embed['footer'].get('text', ''))}</div>"
        colour = f"#{int(embed.get('color') or 0x5865F2):06x}"
        parts.append(f"<div class=e style='border-left-color:{colour}'>{inner}</div>")
    if image is not None:
        parts.append(_image(image))
    buttons = "".join(
        f"<span class='b {BUTTON_STYLES.get(c.get('style', 2), 'secondary')}'>"
        f"{html.escape(str(c.get('label', '')))}{' &#8599;' if c.get('style') == 5 else ''}</span>"
        for row in payload.get("components", [])
        for c in row.get("components", [])
    )
    if buttons:
        parts.append(f"<div>{buttons}</div>")
    body = "".join(parts)
    return f"""<html><head><style>
body{{font-family:'gg sans','Noto Sans',Helvetica,Arial,sans-serif;font-size:15px;
background:#313338;color:#dbdee1;margin:0;padding:16px;width:640px}}
.m{{display:flex;gap:12px}}.a{{width:40px;height:40px;border-radius:50%;background:#5865f2}}
.n{{color:#f2f3f5;font-weight:600}}.t{{background:#5865f2;color:#fff;font-size:10px;
padding:1px 4px;border-radius:3px;margin-left:4px}}
.e{{background:#2b2d31;border-left:4px solid;border-radius:4px;padding:10px 14px;
margin-top:6px;max-width:520px}}.et{{color:#f2f3f5;font-weight:600;margin-bottom:6px}}
.ed{{white-space:normal;font-size:14px}}.ef{{display:grid;grid-template-columns:1fr 1fr;
gap:8px 16px;margin-top:8px;font-size:14px}}.eo{{font-size:12px;color:#949ba4;margin-top:8px}}
img{{max-width:520px;border-radius:6px;margin-top:6px}}
pre{{background:#1e1f22;border-radius:4px;padding:6px;font-size:13px;margin:4px 0}}
.sub{{font-size:12px;color:#949ba4}}.b{{display:inline-block;border-radius:3px;padding:5px 14px;
margin:8px 8px 0 0;font-size:14px;font-weight:500;color:#fff}}.primary{{background:#5865f2}}
.secondary{{background:#4e5058}}.success{{background:#248046}}.danger{{background:#da373c}}
</style></head><body><div class=m><div class=a></div><div><span class=n>learning-bot</span>
<span class=t>APP</span>{body}</div></div></body></html>"""


def discord_markdown(text: str) -> str:
    """The little of Discord's markdown the renderer uses: code blocks, bold, italics,
    backslash escapes and `-# ` subtext lines."""
    out: list[str] = []
    for i, chunk in enumerate(text.split("```")):
        if i % 2:
            out.append(f"<pre>{html.escape(chunk.strip(chr(10)))}</pre>")
            continue
        chunk = html.escape(chunk)
        chunk = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", chunk)
        chunk = re.sub(r"(?<![\w*])\*(.+?)\*(?!\w)", r"<i>\1</i>", chunk)
        chunk = re.sub(r"(?m)^-# (.*)$", r"<span class=sub>\1</span>", chunk)
        chunk = re.sub(r"\\(.)", r"\1", chunk)
        out.append(chunk.replace("\n", "<br>"))
    return "".join(out)


def _image(data: bytes) -> str:
    return f"<img src='data:image/png;base64,{base64.b64encode(data).decode()}'>"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help="where the PNGs go")
    parser.add_argument(
        "--chromium",
        default=os.environ.get("CHROMIUM") or shutil.which("chromium"),
        help="the Chromium binary (default: chromium on PATH)",
    )
    args = parser.parse_args()
    if not args.chromium:
        sys.exit("alert screenshots: Chromium is not installed (apt-get install chromium)")
    alert, digest, chart = sample_cards()
    args.out.mkdir(parents=True, exist_ok=True)
    pages = {
        "alert-slack.png": slack_html(alert, None),
        "alert-discord.png": discord_html(alert, None),
        "digest-slack.png": slack_html(digest, chart),
        "digest-discord.png": discord_html(digest, chart),
    }
    photograph_pages(pages, args.out, args.chromium)
    return 0


def photograph_pages(pages: dict[str, str], out: Path, chromium: str) -> None:
    """Each page's HTML photographed whole into out/<name>, reduced to a palette."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        try:
            for name, page_html in pages.items():
                page = browser.new_page(viewport={"width": 680, "height": 200})
                page.set_content(page_html)
                path = out / name
                page.screenshot(path=str(path), full_page=True, animations="disabled")
                page.close()
                shrink(path)
                print(path)
        finally:
            browser.close()


if __name__ == "__main__":
    raise SystemExit(main())
