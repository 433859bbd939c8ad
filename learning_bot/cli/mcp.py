"""`learning-bot mcp`: the MCP tools over stdio (OpenClaw's learning backend)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from learning_bot.adapters.terminal.commands import EXIT_OK
from learning_bot.cli.parser import Command

if TYPE_CHECKING:
    from learning_bot.settings import Settings


def _run(args: argparse.Namespace, settings: Settings) -> int:
    return _mcp_stdio(settings)


COMMAND = Command(
    name="mcp",
    help="serve the MCP tools over stdio (OpenClaw's learning backend; "
    "also: python -m learning_bot mcp --database-url=...)",
    run=_run,
    no_url="it works locally",
)


def _mcp_stdio(settings: Settings) -> int:
    """MCP over stdin/stdout until stdin closes or SIGTERM; stdout carries only JSON-RPC."""
    import anyio

    from learning_bot.adapters.mcp.server import build_server
    from learning_bot.adapters.mcp.surface import serve_stdio
    from learning_bot.app import build_app
    from learning_bot.surfaces import mcp_tools

    app = build_app(settings, serving=True)
    try:
        anyio.run(serve_stdio, build_server(mcp_tools(app)), app.close)
    finally:
        app.close()
    return EXIT_OK
