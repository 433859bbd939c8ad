"""The registry: every command module of this package (each holds a `SPEC`), found once, and
what is built from them: the command names, the grammar, the parser, and the look-ups the
bus dispatches through."""

from __future__ import annotations

import importlib
import json
import pkgutil
from functools import cache
from typing import Any

from learning_bot.bot.commands.base import (
    MAX_INPUT_CHARS,
    CommandSpec,
    UsageError,
    clean_input,
    shown,
    tokens,
)
from learning_bot.bot.invocation import Command
from learning_bot.engine.config import Phase

PREFIX = "/learning"
_NOT_COMMANDS = frozenset({"base", "registry", "usage"})
"""Modules of this package that declare no command."""


@cache
def specs() -> tuple[CommandSpec[Any], ...]:
    """Every command's declaration, in help order."""
    import learning_bot.bot.commands as package

    found: list[CommandSpec[Any]] = []
    for module in pkgutil.iter_modules(package.__path__):
        if module.name in _NOT_COMMANDS or module.name.startswith("_"):
            continue
        spec = getattr(
            importlib.import_module(f"learning_bot.bot.commands.{module.name}"), "SPEC", None
        )
        if not isinstance(spec, CommandSpec):
            raise TypeError(f"learning_bot.bot.commands.{module.name} declares no SPEC")
        found.append(spec)
    found.sort(key=lambda s: (s.order, s.name))
    names = [s.name for s in found]
    types = [s.type for s in found]
    if len(set(names)) != len(names) or len(set(types)) != len(types):
        raise TypeError(f"two commands share a name or a type: {names}")
    return tuple(found)


@cache
def typed() -> tuple[CommandSpec[Any], ...]:
    """The commands people type (those with a grammar), in help order."""
    return tuple(s for s in specs() if s.grammar)


@cache
def _by_name() -> dict[str, CommandSpec[Any]]:
    return {s.name: s for s in typed()}


@cache
def _by_type() -> dict[type, CommandSpec[Any]]:
    return {s.type: s for s in specs()}


@cache
def _by_type_name() -> dict[str, CommandSpec[Any]]:
    return {s.type.__name__: s for s in specs()}


def command_names() -> tuple[str, ...]:
    """The names of the commands people type, in help order."""
    return tuple(_by_name())


def grammar_lines() -> tuple[str, ...]:
    """Every form of every command, `/learning ...`."""
    return tuple(f"{PREFIX} {line}" for s in typed() for line in s.grammar)


def named(name: str) -> CommandSpec[Any] | None:
    """The typed command called `name` (any case), or None."""
    return _by_name().get(name.lower()) if isinstance(name, str) else None


def spec_of(command: Command) -> CommandSpec[Any]:
    """The declaration of a command object."""
    spec = _by_type().get(type(command))
    if spec is None:
        raise ValueError(f"unknown command {command!r}")
    return spec


def is_mutating(command: Command) -> bool:
    """Whether the command changes something (audited, rate-limited, refused to guests)."""
    spec = _by_type().get(type(command))
    return spec is not None and spec.mutating(command)


def asks_confirmation(command: Command) -> bool:
    """Whether the command asks before it changes anything."""
    spec = _by_type().get(type(command))
    return spec is not None and spec.asks(command)


def parse_command(text: str | None) -> Command:
    """Parse the text after `/learning` into a command, or raise UsageError."""
    if text is None:
        return _default()
    if not isinstance(text, str):
        raise UsageError("the command must be text")
    if len(text) > MAX_INPUT_CHARS:
        raise UsageError(f"the command is {len(text)} characters long; at most {MAX_INPUT_CHARS}")
    text = clean_input(text).strip()
    if text.lower().startswith(PREFIX):
        text = text[len(PREFIX) :].strip()
    words = tokens(text)
    if not words:
        return _default()
    spec = named(words[0])
    if spec is None or spec.parse is None:
        raise UsageError(f"unknown command {shown(words[0])!r}")
    command: Command = spec.parse(words[1:])
    return command


def _default() -> Command:
    """A bare `/learning`: the first command in help order, without words."""
    spec = typed()[0]
    assert spec.parse is not None
    command: Command = spec.parse([])
    return command


def command_to_json(command: Command) -> str:
    """A command as a pending confirmation or an audit entry stores it."""
    data: dict[str, Any] = {"type": type(command).__name__}
    slots: tuple[str, ...] = command.__slots__
    for name in slots:
        value = getattr(command, name)
        data[name] = value.value if isinstance(value, Phase) else value
    return json.dumps(data)


def command_from_json(text: str) -> Command:
    """A stored command back (one that can be stored: see CommandSpec.from_json)."""
    data = json.loads(text)
    kind = data.pop("type")
    spec = _by_type_name().get(kind)
    if spec is None or spec.from_json is None:
        raise ValueError(f"unknown command type {kind}")
    command: Command = spec.from_json(data)
    return command
