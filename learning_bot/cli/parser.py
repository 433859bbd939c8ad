"""The `learning-bot` argument parser's class, which says what is wrong in one line with one
hint, and what a command module's `register` adds its sub-parser to."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from typing import NoReturn, TypeAlias

from learning_bot.adapters.terminal.commands import EXIT_USAGE, CliError

Commands: TypeAlias = "argparse._SubParsersAction[CommandLineParser]"
"""What a command module's `register` adds its sub-parser to."""


def close_match(word: str, choices: Sequence[str]) -> str | None:
    """The choice closest to a mistyped word, if one is close enough to suggest."""
    import difflib

    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return found[0] if found else None


class CommandLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """One line saying what is wrong, and one hint: the closest command or option when
        there is one, else where the help is."""
        hint = f"see `{self.prog} --help`"
        choice = re.match(
            r"argument (\S+): invalid choice: '([^']*)' \(choose from (.*)\)$", message
        )
        if choice:
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


def _option_strings(parser: argparse.ArgumentParser) -> list[str]:
    """Every option of `parser` and of its subcommands."""
    found: list[str] = []
    for action in parser._actions:
        found.extend(o for o in action.option_strings if o.startswith("--"))
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found.extend(_option_strings(child))
    return sorted(set(found))
