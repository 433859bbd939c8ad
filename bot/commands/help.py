"""`/learning help [command]`: every command's grammar, or one command explained."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from learning_bot.bot.commands import registry
from learning_bot.bot.commands.base import (
    CommandSpec,
    Context,
    Form,
    Option,
    Terminal,
    UsageError,
    anyone,
    shown,
    unexpected,
)
from learning_bot.bot.commands.usage import help_reply
from learning_bot.bot.invocation import Command
from learning_bot.bot.replies import Reply


@dataclass(frozen=True, slots=True)
class HelpCommand(Command):
    topic: str | None = None


def parse(rest: list[str]) -> HelpCommand:
    if len(rest) > 1:
        raise unexpected(rest[1], "help")
    topic = rest[0].lower() if rest else None
    if topic is not None and registry.named(topic) is None:
        raise UsageError(
            f"no help for {shown(rest[0])!r}; commands: {', '.join(registry.command_names())}",
            "help",
        )
    return HelpCommand(topic)


def run(ctx: Context, command: HelpCommand) -> Reply:
    return help_reply(command.topic, ctx.surface)


def _from_options(values: Mapping[str, Any]) -> HelpCommand:
    return HelpCommand(values["command"])


SPEC = CommandSpec(
    name="help",
    type=HelpCommand,
    run=run,
    order=1000,
    grammar=("help [command]",),
    help="{cmd} help [command] — this help.",
    parse=parse,
    access=anyone,
    from_json=lambda d: HelpCommand(d["topic"]),
    terminal=Terminal(
        "help — the commands, or one command explained",
        "[{commands}]: the command to explain",
        reads_only=True,
    ),
    form=Form(
        "What each /learning command does",
        (Option("command", str, "Explain one command", choices=registry.command_names),),
        build=_from_options,
    ),
)
