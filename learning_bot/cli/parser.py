"""The `learning-bot` argument parser's class, which says what is wrong in one line with one
hint, and the `Command` each command module declares, which `add_command` adds to it."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn, TypeAlias

from learning_bot.adapters.terminal.commands import EXIT_USAGE, CliError

if TYPE_CHECKING:
    from learning_bot.settings import Settings

Commands: TypeAlias = "argparse._SubParsersAction[CommandLineParser]"
"""What `add_command` adds a command's sub-parser to."""


@dataclass(frozen=True, kw_only=True)
class Command:
    """A `learning-bot <name>` command: what `--help` says of it, its own arguments, and what
    runs it."""

    name: str
    help: str
    description: str | None = None
    arguments: Callable[[argparse.ArgumentParser], None] | None = None
    """Adds the command's own arguments to its parser."""
    run: Callable[[argparse.Namespace, Settings], int]
    """Runs the command; its exit code."""
    no_url: str | None
    """Why the global --url (talk to a running server) does not apply to it; None: it does."""


def add_command(sub: Commands, command: Command, arguments: bool = True) -> None:
    """Add `command`'s sub-parser, which hands the parsed arguments to its `run`; without
    `arguments`, its name and help only (a command line that does not name it)."""
    parser = sub.add_parser(command.name, help=command.help, description=command.description)
    if arguments and command.arguments is not None:
        command.arguments(parser)
    parser.set_defaults(run=command.run, no_url=command.no_url)


def add_json_option(parser: argparse.ArgumentParser, what: str) -> None:
    """The `--json` option of a command whose JSON docs/cli-json.md describes."""
    parser.add_argument(
        "--json",
        action="store_true",
        help=f"print {what} as JSON, for scripts (schema: docs/cli-json.md)",
    )


def close_match(word: str, choices: Sequence[str]) -> str | None:
    """The choice closest to a mistyped word, if one is close enough to suggest."""
    import difflib

    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return found[0] if found else None


class CommandLineParser(argparse.ArgumentParser):
    words: tuple[str, ...] = ()
    """The command line being read (set by `build_parser`): an unknown command that follows an
    unknown option is reported as that option (`--databse-url x status`)."""

    def error(self, message: str) -> NoReturn:
        """One line saying what is wrong, and one hint: the closest command or option when
        there is one, else where the help is."""
        hint = f"see `{self.prog} --help`"
        choice = re.match(
            r"argument (\S+): invalid choice: '([^']*)' \(choose from (.*)\)$", message
        )
        misspelt = self._unknown_option_before(choice.group(2)) if choice else None
        if misspelt is not None:
            message = f"unknown option {misspelt!r}"
            close = close_match(misspelt, _option_strings(self))
            hint = f"did you mean {close}?" if close else hint
        elif choice:
            argument, word, options = choice.groups()
            names = re.findall(r"'([^']*)'", options)
            what = "command" if argument.strip("<>").endswith("command") else argument
            message = f"unknown {what} {word!r}"
            close = close_match(word, names)
            if close is None:
                hint = f"one of: {', '.join(names)}"
            elif argument.startswith("-"):
                hint = f"did you mean {argument} {close}?"
            else:
                hint = f"did you mean `{self.prog} {close}`?"
        unknown = re.match(r"unrecognized arguments: (.*)$", message)
        if unknown:
            word = unknown.group(1).split()[0]
            if word.startswith("-"):
                message = f"unknown option {word!r}"
                close = close_match(word, _option_strings(self))
                if close:
                    hint = f"did you mean {close}? (see `{self.prog} <command> --help`)"
            else:
                message = f"unexpected argument {word!r}"
        raise CliError(message, EXIT_USAGE, hint=hint)

    def _unknown_option_before(self, word: str) -> str | None:
        """The first option of the command line, before `word`, that no command takes."""
        known = set(_option_strings(self)) | {"-h"}
        for typed in self.words:
            if typed == word:
                return None
            if typed.startswith("-") and typed.split("=", 1)[0] not in known:
                return typed.split("=", 1)[0]
        return None


def _option_strings(parser: argparse.ArgumentParser) -> list[str]:
    """Every option of `parser` and of its subcommands."""
    found: list[str] = []
    for action in parser._actions:
        found.extend(o for o in action.option_strings if o.startswith("--"))
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found.extend(_option_strings(child))
    return sorted(set(found))
