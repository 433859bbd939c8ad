"""The chat commands on the command line (status, reward, reset, phase, config, help): the terminal
surface's words, sent to the local bus or to a running server's (--url)."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING

from learning_bot.adapters.terminal.commands import EXIT_USAGE, CliError
from learning_bot.cli.parser import Commands, close_match

if TYPE_CHECKING:
    from learning_bot.app import App
    from learning_bot.bot.replies import Reply
    from learning_bot.settings import Settings


WORDS_HELP = {
    "status": (
        "status — phase, settings, traces, token savings, the best arms and the candidates "
        "for exclusion",
        "[top N] [public] | arm <id-or-label>: 'top N' lists N arms (1-25) in each table; "
        "'arm Read' shows one arm by id or label; 'public' matters only in chat",
    ),
    "reward": (
        "reward — manual (lagged) feedback for an arm, or for the arms of a conversation's "
        "latest run",
        "[<arm>] [1|0|good|bad] [reason...]: the arm by id (tool:fs:Read) or label (Read); "
        "without an arm, --conversation names the run; then the value (default good) and an "
        "optional reason",
    ),
    "reset": (
        "reset — put arms back to Beta(1,1) with 0 pulls (nothing is deleted; `reset undo` "
        "restores them)",
        "[all | <arm ids or labels...>] | undo: which arms (default all), or undo the last reset",
    ),
    "phase": (
        "phase — show the phase, or set it: passive records only, active selects arms",
        "[passive|active]: the phase to switch to; without it, the current phase is shown",
    ),
    "config": (
        "config — show the learner's stored settings, or change one (admins; audited; every "
        "replica takes it at its next select)",
        "[<key> <value> [learner]]: e.g. config halfLife 50, config policy seed; values are "
        "read as JSON, else as text (the same as `learner set`)",
    ),
    "help": (
        "help — the commands, or one command explained",
        "[status|reward|reset|phase|config|help]: the command to explain",
    ),
}


def register(sub: Commands) -> None:
    for name, (summary, words) in WORDS_HELP.items():
        p = sub.add_parser(name, help=summary.split(" — ", 1)[1], description=summary)
        p.add_argument("words", nargs="*", metavar="WORD", help=words)
        p.add_argument(
            "--json",
            action="store_true",
            help=f"print the {name} data as JSON, for scripts (schema: docs/cli-json.md)",
        )
        if name in ("reset", "phase"):
            p.add_argument("--confirm", action="store_true", help="do it without asking")
        if name == "reward":
            p.add_argument(
                "--conversation",
                default="",
                metavar="ID",
                help="without an arm, reward the latest run of this conversation",
            )
        p.set_defaults(run=_chat, no_url=None)


def _read_only(args: argparse.Namespace) -> bool:
    """Commands that only read: they can skip SQLAlchemy (see learning_bot.app.build_read_app).
    Not `phase`: it projects going active from the learner's runs, which that view cannot read."""
    return args.command in ("status", "help")


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
    from learning_bot.app import build_app

    app = build_app(settings, one_shot=True)
    try:
        check_learner(app, args)
        return run_chat_command(
            local_sender(app.bus, conversation),
            text,
            confirm=confirm,
            as_json=as_json,
            preview=local_sender(app.bus, conversation, interactive=False),
        )
    finally:
        app.close()


def _help_reply(command: object, commands: list[dict[str, str]]) -> Reply:
    """The help reply for `help [topic]`, its data with `cliCommands` (`commands`): every
    `learning-bot` command and what it does, as `learning-bot --help` lists them."""
    from dataclasses import replace

    from learning_bot.bot.commands import HelpCommand, parse_command
    from learning_bot.bot.handlers import help_reply

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
