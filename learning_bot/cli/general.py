"""The general command line: the parser, built from the commands' declarations (each command
module's `Command`, with the `run` and `no_url` its sub-parser hands on, and one for every
registry entry of learning_bot.surfaces that brings a subcommand); the settings; the chosen
command's handler; and whatever it raises turned into one line on stderr and an exit code.

learning_bot.cli.main, the entry point, sends every command here."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from learning_bot.adapters.terminal.commands import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser(argv).parse_args(argv)
        return _run(args)
    except BaseException as exc:
        return failed(exc)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("learning-bot")
    except PackageNotFoundError:
        return "unknown"


class _Version(argparse.Action):
    """--version, looked up in the installed metadata only when asked for."""

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(f"learning-bot {_version()}")
        parser.exit()


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The global options, then every command in the order `--help` lists them.

    Given the words of a command line (`argv`), a command they do not name gets its name and
    help only: its own arguments could not be read, and a one-shot `learning-bot status`
    does not build the other commands' (`help` and `completion` describe every command, so
    they get them all)."""
    from learning_bot.cli import (
        chat,
        completion,
        console,
        dashboard,
        db,
        export,
        learner,
        mcp,
        replay,
        serve,
        simulate,
    )
    from learning_bot.cli.host import surface_commands
    from learning_bot.cli.parser import CommandLineParser, add_command

    named = None if argv is None or _DESCRIBE_ALL & set(argv) else frozenset(argv)
    parser = CommandLineParser(
        prog="learning-bot",
        description="The learning layer for LLM agent prompts, and its chat-ops front end.",
        epilog=(
            "Start with `learning-bot simulate`, then `learning-bot status`. "
            "`learning-bot <command> --help` explains a command."
        ),
    )
    parser.words = tuple(argv or ())
    parser.add_argument(
        "--version", action=_Version, nargs=0, help="show program's version number and exit"
    )
    parser.add_argument(
        "--database-url",
        metavar="URL",
        help="SQLAlchemy URL (else LEARNING_BOT_DATABASE_URL, "
        "else a SQLite file in your data directory)",
    )
    parser.add_argument(
        "--learner", metavar="NAME", help="learner name (default: LEARNING_BOT_LEARNER or default)"
    )
    parser.add_argument("--config", metavar="FILE", help="a JSON or TOML config file")
    parser.add_argument(
        "--url",
        help="talk to a running server (e.g. http://127.0.0.1:8787) instead of the database: "
        "status, reward, reset, phase, help, console and dashboard",
    )
    sub = parser.add_subparsers(
        dest="command", required=True, parser_class=CommandLineParser, metavar="<command>"
    )
    for command in (
        *chat.commands(),
        export.COMMAND,
        console.COMMAND,
        simulate.COMMAND,
        replay.COMMAND,
        learner.COMMAND,
        db.COMMAND,
        serve.COMMAND,
        *surface_commands(),
        mcp.COMMAND,
        dashboard.COMMAND,
        completion.COMMAND,
    ):
        add_command(sub, command, arguments=named is None or command.name in named)
    _accept_after(sub, [a for a in parser._actions if a.dest in _GLOBAL], named)
    # what `help --json` and `completion` describe (the commands cannot import this module)
    parser.set_defaults(root_parser=parser)
    return parser


_GLOBAL = ("database_url", "learner", "config", "url")
"""The options that come before the command, and are taken after it as well."""

_DESCRIBE_ALL = frozenset({"help", "completion"})
"""The commands that describe every command's arguments (`help --json`, shell completion)."""


def _accept_after(
    sub: argparse._SubParsersAction[Any],
    options: list[argparse.Action],
    named: frozenset[str] | None = None,
) -> None:
    """Let every command (and a surface's own subcommands, e.g. Discord's `sync` and `run`)
    take the global options after its name too: `learning-bot status --database-url=...` reads
    as `learning-bot --database-url=... status`, and OpenClaw's gateway spawns `<python> -m
    learning_bot mcp --database-url=...`. Given there, an option overrides the one given before
    the command; not given, it leaves that one (its default here is to set nothing). With
    `named`, only the commands named there (the others are never parsed)."""
    for name, child in sub.choices.items():
        if named is not None and name not in named:
            continue
        for option in options:
            child.add_argument(
                *option.option_strings,
                dest=option.dest,
                metavar=option.metavar,
                default=argparse.SUPPRESS,
                help=option.help,
            )
        for action in child._actions:
            if isinstance(action, argparse._SubParsersAction):
                _accept_after(action, options)


def _run(args: argparse.Namespace) -> int:
    """The command's handler (its `run` default), after the settings and a --url it refuses
    (its `no_url` default says why; None: it takes --url)."""
    from learning_bot.settings import load_settings

    settings = load_settings(
        database_url=args.database_url, learner=args.learner, config_path=args.config
    )
    if args.url and args.no_url is not None:
        raise CliError(
            f"--url does not apply to `{args.command}`: {args.no_url}",
            EXIT_USAGE,
            hint="drop --url, or give --database-url to point at the server's database",
        )
    code: int = args.run(args, settings)
    return code


def _error(message: str, hint: str | None = None) -> None:
    """`learning-bot: <what is wrong>` on one line, then at most one hint line (a "did you
    mean" folded into the message becomes the hint)."""
    from learning_bot.adapters.terminal.style import Style

    head, sep, close = message.partition("; did you mean ")
    if sep and hint is None:
        message, hint = head, f"did you mean {close}"
    style = Style.for_stream(sys.stderr)
    print(f"learning-bot: {style.error(message)}", file=sys.stderr)
    if hint:
        print(style.dim(hint), file=sys.stderr)


def failed(exc: BaseException) -> int:
    """The exit code of a command that raised `exc`, after its one-line message on stderr;
    anything but an error (SystemExit from --help) goes on up, and with LEARNING_BOT_DEBUG
    set, so does an unexpected error."""
    from learning_bot.bot.errors import error_kind
    from learning_bot.engine.errors import LearningError

    if isinstance(exc, CliError):
        _error(str(exc), exc.hint)
        return exc.code
    if isinstance(exc, LearningError):
        _error(str(exc))
        return error_kind(exc).exit_code
    if isinstance(exc, KeyboardInterrupt):
        print("learning-bot: interrupted", file=sys.stderr)
        return 130
    if isinstance(exc, BrokenPipeError):
        return EXIT_OK
    if not isinstance(exc, Exception) or os.environ.get("LEARNING_BOT_DEBUG"):
        raise exc
    print(
        f"learning-bot: unexpected error: {type(exc).__name__}: {exc}",
        file=sys.stderr,
    )
    print("set LEARNING_BOT_DEBUG=1 for the details", file=sys.stderr)
    return EXIT_ERROR
