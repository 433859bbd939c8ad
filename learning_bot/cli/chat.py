"""The chat commands on the command line (those the command registry gives a terminal form):
the terminal surface's words, sent to the local bus or to a running server's (--url)."""

from __future__ import annotations

import argparse
import contextlib
import functools
import shlex
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from learning_bot.adapters.terminal.commands import EXIT_USAGE, CliError
from learning_bot.bot.commands.base import CommandSpec
from learning_bot.bot.commands.registry import named, specs
from learning_bot.cli.parser import Command, add_json_option, close_match

if TYPE_CHECKING:
    from learning_bot.app import App
    from learning_bot.bot.replies import Reply
    from learning_bot.settings import Settings


def terminal_commands() -> list[CommandSpec[Any]]:
    """The registered commands the command line offers (those with a terminal form)."""
    return [spec for spec in specs() if spec.terminal is not None]


def commands() -> list[Command]:
    """A command of the command line for each registered command with a terminal form."""
    found = terminal_commands()
    names = "|".join(spec.name for spec in found)
    return [
        Command(
            name=spec.name,
            help=spec.terminal.summary.split(" — ", 1)[1],
            description=spec.terminal.summary,
            arguments=functools.partial(_arguments, spec, names),
            run=_chat,
            no_url=None,
        )
        for spec in found
        if spec.terminal is not None
    ]


def _arguments(spec: CommandSpec[Any], names: str, parser: argparse.ArgumentParser) -> None:
    """A chat command's words and options; `names`: every chat command's, for `help`."""
    terminal = spec.terminal
    assert terminal is not None
    parser.add_argument(
        "words", nargs="*", metavar="WORD", help=terminal.words.replace("{commands}", names)
    )
    add_json_option(parser, f"the {spec.name} data")
    if terminal.confirm:
        parser.add_argument("--confirm", action="store_true", help="do it without asking")
    if terminal.conversation:
        parser.add_argument(
            "--conversation",
            default="",
            metavar="ID",
            help="without an arm, reward the latest run of this conversation",
        )


def _read_only(args: argparse.Namespace) -> bool:
    """Commands that only read: they can skip SQLAlchemy (see learning_bot.app.build_read_app).
    Not `phase`: it projects going active from the learner's runs, which that view cannot read."""
    spec = named(args.command)
    return spec is not None and spec.terminal is not None and spec.terminal.reads_only


def _text(words: Sequence[str]) -> str:
    return " ".join(shlex.quote(w) for w in words)


def _chat(args: argparse.Namespace, settings: Settings) -> int:
    from learning_bot.adapters.terminal.commands import (
        local_sender,
        remote_sender,
        run_chat_command,
    )

    confirm = bool(getattr(args, "confirm", False))
    conversation = getattr(args, "conversation", "")
    as_json = bool(getattr(args, "json", False))
    text = _text([args.command, *args.words, *(["confirm"] if confirm else [])])
    if args.command == "help" and as_json:
        # The help is the same everywhere and reads nothing: answered here, with the
        # command line's own commands beside the chat commands.
        commands = cli_commands(args.root_parser)
        return run_chat_command(lambda c: _help_reply(c, commands), text, as_json=True)
    if args.url:
        return run_chat_command(
            remote_sender(args.url, args.learner, conversation),
            text,
            confirm=confirm,
            as_json=as_json,
        )
    if _read_only(args):
        from learning_bot.app import build_read_app

        lite = build_read_app(settings)
        if lite is not None:
            try:
                return run_chat_command(local_sender(lite.bus), text, as_json=as_json)
            finally:
                lite.close()
    with learner_app(settings, args) as app:
        return run_chat_command(
            local_sender(app.bus, conversation),
            text,
            confirm=confirm,
            as_json=as_json,
            preview=local_sender(app.bus, conversation, interactive=False),
        )


def _help_reply(command: object, commands: list[dict[str, str]]) -> Reply:
    """The help reply for `help [topic]`, its data with `cliCommands` (`commands`): every
    `learning-bot` command and what it does, as `learning-bot --help` lists them."""
    from dataclasses import replace

    from learning_bot.bot.commands import HelpCommand, parse_command
    from learning_bot.bot.commands.usage import help_reply

    parsed = parse_command(command) if isinstance(command, str) else command
    topic = parsed.topic if isinstance(parsed, HelpCommand) else None
    reply = help_reply(topic, "terminal")
    if topic is not None:
        return reply
    return replace(reply, data={**reply.data, "cliCommands": commands})


def cli_commands(parser: argparse.ArgumentParser) -> list[dict[str, str]]:
    """[{name, summary}] of every `learning-bot` command, in `--help`'s order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return [
                {"name": choice.dest, "summary": choice.help or ""}
                for choice in action._choices_actions
            ]
    return []


@contextlib.contextmanager
def learner_app(settings: Settings, args: argparse.Namespace) -> Iterator[App]:
    """The app for one command on the learner --learner names (check_learner), closed when
    the command ends."""
    from learning_bot.app import build_app

    app = build_app(settings, one_shot=True)
    try:
        check_learner(app, args)
        yield app
    finally:
        app.close()


def check_learner(app: App, args: argparse.Namespace) -> None:
    """A --learner that names no learner in a database that has some is a typo, not a new
    learner: say so, with the closest name."""
    if not args.learner:
        return
    names = app.store.learner_names()  # type: ignore[attr-defined]
    if not names or args.learner in names:
        return
    close = close_match(args.learner, names)
    raise CliError(
        f"unknown learner {args.learner!r}",
        EXIT_USAGE,
        hint=f"did you mean --learner {close}?" if close else f"learners: {', '.join(names)}",
    )
