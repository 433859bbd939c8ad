"""The terminal surface: `learning-bot status|reward|reset|phase|help` and the console, as
invocations of the command bus (local, or a running server's over HTTP), answered on stdout."""

from adapters.terminal.commands import (
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
from adapters.terminal.console import run_console

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
