"""The terminal surface: `learning-bot status|reward|reset|phase|help` and the console, as
invocations of the command bus (local, or a running server's over HTTP), answered on stdout.

Names are imported on first use, so that a light module of the package (`style`) can be
imported without the command bus."""

from __future__ import annotations

from learning_bot.engine.lazy import lazy_getattr

TYPE_CHECKING = False
if TYPE_CHECKING:
    from learning_bot.adapters.terminal.commands import (
        EXIT_ERROR,
        EXIT_OK,
        EXIT_USAGE,
        CliError,
        Send,
        local_actor,
        local_sender,
        remote_sender,
        run_chat_command,
    )
    from learning_bot.adapters.terminal.console import run_console

_LAZY = {
    "EXIT_ERROR": "learning_bot.adapters.terminal.commands",
    "EXIT_OK": "learning_bot.adapters.terminal.commands",
    "EXIT_USAGE": "learning_bot.adapters.terminal.commands",
    "CliError": "learning_bot.adapters.terminal.commands",
    "Send": "learning_bot.adapters.terminal.commands",
    "local_actor": "learning_bot.adapters.terminal.commands",
    "local_sender": "learning_bot.adapters.terminal.commands",
    "remote_sender": "learning_bot.adapters.terminal.commands",
    "run_chat_command": "learning_bot.adapters.terminal.commands",
    "run_console": "learning_bot.adapters.terminal.console",
}

__all__ = [
    "EXIT_ERROR",
    "EXIT_OK",
    "EXIT_USAGE",
    "CliError",
    "Send",
    "local_actor",
    "local_sender",
    "remote_sender",
    "run_chat_command",
    "run_console",
]


__getattr__ = lazy_getattr(__name__, globals(), _LAZY)
