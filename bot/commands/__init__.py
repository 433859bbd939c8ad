"""The `/learning` commands: one module each (its grammar, help, access, parser and
handler: bot.commands.base.CommandSpec), found by bot.commands.registry. The names below
are the ones the surfaces import."""

from __future__ import annotations

from typing import Any

from learning_bot.bot.commands.arm_names import ArmNamesQuery
from learning_bot.bot.commands.base import MAX_INPUT_CHARS, UsageError, clean_input, setting_value
from learning_bot.bot.commands.cancel import CancelCommand
from learning_bot.bot.commands.config import ConfigCommand
from learning_bot.bot.commands.confirm import ConfirmCommand
from learning_bot.bot.commands.help import HelpCommand
from learning_bot.bot.commands.phase import PhaseCommand
from learning_bot.bot.commands.registry import (
    asks_confirmation,
    command_from_json,
    command_names,
    command_to_json,
    grammar_lines,
    is_mutating,
    parse_command,
)
from learning_bot.bot.commands.reset import ResetCommand
from learning_bot.bot.commands.reward import RewardCommand
from learning_bot.bot.commands.status import MAX_TOP, StatusCommand
from learning_bot.bot.commands.subscribe import SubscribeCommand
from learning_bot.bot.commands.subscriptions import SubscriptionsCommand
from learning_bot.bot.commands.unsubscribe import UnsubscribeCommand
from learning_bot.bot.invocation import Command


def __getattr__(name: str) -> Any:
    """COMMAND_NAMES and GRAMMAR, built from the registry on first use."""
    if name == "COMMAND_NAMES":
        return command_names()
    if name == "GRAMMAR":
        return grammar_lines()
    raise AttributeError(name)


__all__ = [
    "MAX_INPUT_CHARS",
    "MAX_TOP",
    "ArmNamesQuery",
    "CancelCommand",
    "Command",
    "ConfigCommand",
    "ConfirmCommand",
    "HelpCommand",
    "PhaseCommand",
    "ResetCommand",
    "RewardCommand",
    "StatusCommand",
    "SubscribeCommand",
    "SubscriptionsCommand",
    "UnsubscribeCommand",
    "UsageError",
    "asks_confirmation",
    "clean_input",
    "command_from_json",
    "command_names",
    "command_to_json",
    "is_mutating",
    "parse_command",
    "setting_value",
]
