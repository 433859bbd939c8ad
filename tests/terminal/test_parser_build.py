"""The command line's parser builds the arguments of the commands a command line names only,
and reads every command line as the parser with every command's arguments does."""

from __future__ import annotations

import argparse
import functools
from typing import Any

import pytest

from learning_bot.adapters.terminal.commands import CliError
from learning_bot.cli.general import build_parser

LINES = [
    ["status"],
    ["status", "top", "5", "--json"],
    ["status", "--database-url", "sqlite:///x.sqlite"],
    ["--learner", "serve", "status"],
    ["--learner", "serve", "status", "arm", "Read"],
    ["reward", "Read", "good", "it", "worked"],
    ["reset", "all", "confirm"],
    ["phase", "active", "--confirm"],
    ["config", "halfLife", "50"],
    ["serve", "--port", "9000"],
    ["simulate", "--traces", "40", "--arms", "10"],
    ["db", "upgrade"],
    ["discord", "sync"],
    ["learner", "list"],  # refused the same way
    ["status", "--port", "1"],
    ["export", "--format", "csv"],
    ["mcp"],
    ["help", "--json"],
    ["completion", "bash"],
]


def _read(line: list[str], full: bool) -> dict[str, Any] | str:
    parser = build_parser() if full else build_parser(line)
    try:
        values = vars(parser.parse_args(line))
    except SystemExit as exc:
        return f"exit {exc.code}"
    except CliError as exc:
        return f"refused: {exc}"
    values.pop("root_parser")
    return {k: _same(v) for k, v in values.items()}


def _same(value: Any) -> Any:
    """A handler made anew for each parser (a partial), compared by what it calls with."""
    if isinstance(value, functools.partial):
        return (value.func, value.args, value.keywords)
    return value


@pytest.mark.parametrize("line", LINES, ids=" ".join)
def test_a_command_line_reads_the_same_as_with_every_command_built(line: list[str]) -> None:
    assert _read(line, full=False) == _read(line, full=True)


def _sub(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_only_the_named_command_gets_its_arguments() -> None:
    full, lazy = _sub(build_parser()), _sub(build_parser(["status"]))
    assert list(lazy) == list(full)  # every command is listed by --help and a close match
    options = {name: {a.dest for a in p._actions} for name, p in lazy.items()}
    assert options["status"] == {a.dest for a in full["status"]._actions}
    assert options["serve"] == {"help"} != {a.dest for a in full["serve"]._actions}


@pytest.mark.parametrize("describer", ["help", "completion"])
def test_the_commands_that_describe_every_command_get_them_all(describer: str) -> None:
    full, built = _sub(build_parser()), _sub(build_parser([describer]))
    for name, parser in full.items():
        assert [a.dest for a in built[name]._actions] == [a.dest for a in parser._actions]


@pytest.mark.parametrize(
    ("argv", "said", "hint"),
    [
        (
            ["--databse-url", "x", "status"],
            "learning-bot: unknown option '--databse-url'",
            "did you mean --database-url?",
        ),
        (["statu"], "learning-bot: unknown command 'statu'", "did you mean `learning-bot status`?"),
        (["--url", "http://h", "statu"], "learning-bot: unknown command 'statu'", None),
    ],
)
def test_a_misspelt_option_before_the_command_is_named_not_the_word_after_it(
    capsys: pytest.CaptureFixture[str], argv: list[str], said: str, hint: str | None
) -> None:
    from learning_bot.cli import main

    assert main(argv) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == said
    if hint is not None:
        assert lines[1] == hint
