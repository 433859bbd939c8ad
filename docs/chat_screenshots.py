"""Regenerate the chat pictures in docs/screenshots/: `/learning status` and `/learning phase
active` (the projection of going active, above its Confirm and Cancel buttons) as Slack and
Discord show them: status-slack.png, status-discord.png, phase-slack.png, phase-discord.png.

`learning-bot simulate` fills a temporary database (the active phase for the status,
`--phase passive` for the projection); the product's command bus answers each command as it
answers it in chat, and each surface's renderer turns the reply into what that surface sends
(Block Kit blocks; a Discord embed with its buttons). docs/alert_screenshots.py lays that out
in the two clients' styles and photographs it in Chromium, as it does the alert cards."""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from alert_screenshots import (  # noqa: E402
    DASHBOARD,
    discord_message_html,
    photograph_pages,
    slack_message_html,
)
from screenshots import OUT, isolated_env, learning_bot  # noqa: E402

from learning_bot.adapters.discord.render import render_reply as discord_render  # noqa: E402
from learning_bot.adapters.discord.views import ActionButton  # noqa: E402
from learning_bot.adapters.slack.blocks import render_reply as slack_render  # noqa: E402
from learning_bot.adapters.slack.settings import SlackSettings  # noqa: E402
from learning_bot.app import App, build_app  # noqa: E402
from learning_bot.bot.invocation import Actor, Invocation  # noqa: E402
from learning_bot.bot.replies import Reply, ReplyKind  # noqa: E402
from learning_bot.settings import load_settings  # noqa: E402

COMMANDS = {"status": ("active", "status"), "phase": ("passive", "phase active")}
"""Picture -> (the phase simulated, the command typed after /learning)."""


def simulated(exe: str, tmp: str, phase: str) -> App:
    """The product over a database `learning-bot simulate --phase <phase>` filled."""
    env = isolated_env(tmp, f"chat-{phase}")
    subprocess.run(
        [exe, "simulate", "--phase", phase, "--seed", "0"],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    settings = load_settings({**env, "LEARNING_BOT_DASHBOARD_URL": DASHBOARD})
    return build_app(settings, spool=False, one_shot=True)


def ask(app: App, surface: str, text: str) -> Reply:
    """`/learning <text>` typed by a workspace admin on `surface`, answered by the bus."""
    invocation = Invocation(
        surface,
        Actor(f"{surface}-admin", "Alex", is_admin=True),
        text,
        scope="workspace",
        conversation="channel",
        idempotency_key=f"{surface}:{text}",
    )
    reply = app.bus.dispatch(invocation)
    if reply.kind is ReplyKind.ERROR:
        sys.exit(f"chat screenshots: /learning {text} on {surface} failed: {reply.summary}")
    return reply


def slack_page(reply: Reply) -> str:
    """What the Slack surface sends (adapters.slack.app renders with its settings)."""
    message = slack_render(reply, dashboard_url=DASHBOARD, table_blocks=SlackSettings.table_blocks)
    return slack_message_html(message.blocks)


def discord_page(reply: Reply) -> str:
    """What the Discord surface sends: the embed, and the Confirm/Cancel buttons of a
    confirmation or the Dashboard link button (adapters.discord.interactions)."""
    message = discord_render(reply, more_hint=f"every row: {DASHBOARD}")

    async def components() -> list[dict[str, Any]]:
        if reply.kind is ReplyKind.CONFIRM and reply.actions:
            return [ActionButton(action).to_component_dict() for action in reply.actions]
        view = message.link_view()  # a discord.ui.View needs a running event loop
        rows = [] if view is None else view.to_components()
        return [c for row in rows for c in row["components"]]

    payload: dict[str, Any] = {"embeds": [embed.to_dict() for embed in message.embeds]}
    if message.content:
        payload["content"] = message.content
    buttons = asyncio.run(components())
    if buttons:
        payload["components"] = [{"type": 1, "components": buttons}]
    return discord_message_html(payload)


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
        sys.exit("chat screenshots: Chromium is not installed (apt-get install chromium)")
    exe = learning_bot()
    pages: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="learning-bot-chat-") as tmp:
        for name, (phase, text) in COMMANDS.items():
            app = simulated(exe, tmp, phase)
            try:
                pages[f"{name}-slack.png"] = slack_page(ask(app, "slack", text))
                pages[f"{name}-discord.png"] = discord_page(ask(app, "discord", text))
            finally:
                app.close()
    args.out.mkdir(parents=True, exist_ok=True)
    photograph_pages(pages, args.out, args.chromium)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
