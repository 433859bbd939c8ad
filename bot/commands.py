"""Typed `/learning` commands and the parser from the text after `/learning`.

Grammar (keywords are case-insensitive; arm ids and labels keep their case):

    (nothing) | status [top N] [public] | status arm <id-or-label> [public]
    reward [<arm-id-or-label>] [1|0|good|bad] [reason...]
    reset [all | <arm ids...>] [confirm] | reset undo [confirm]
    phase [passive|active] [confirm]
    config | config <key> <value> [learner]
    subscribe [alerts|digest daily|digest weekly|changes] [learner]
    unsubscribe [alerts|digest daily|digest weekly|changes|all] [learner]
    subscriptions
    help [command]
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any

from learning_bot.engine.bounds import MAX_CHAT_RESET_ARMS, check_learner_name
from learning_bot.engine.config import Phase
from learning_bot.engine.errors import InvalidInput
from learning_bot.engine.text import strip_controls

MAX_INPUT_CHARS = 1000
MAX_TOP = 25

GRAMMAR = (
    "/learning [status [top N] [public]]",
    "/learning status arm <id-or-label> [public]",
    "/learning reward [<arm-id-or-label>] [1|0|good|bad] [reason...]",
    "/learning reset [all | <arm ids...>] [confirm]",
    "/learning reset undo [confirm]",
    "/learning phase [passive|active] [confirm]",
    "/learning config [<key> <value> [learner]]",
    "/learning subscribe [alerts|digest daily|digest weekly|changes] [learner]",
    "/learning unsubscribe [alerts|digest daily|digest weekly|changes|all] [learner]",
    "/learning subscriptions",
    "/learning help [command]",
)
COMMAND_NAMES = (
    "status",
    "reward",
    "reset",
    "phase",
    "config",
    "subscribe",
    "unsubscribe",
    "subscriptions",
    "help",
)
_VALUES = {"1": 1.0, "0": 0.0, "good": 1.0, "bad": 0.0}


class UsageError(InvalidInput):
    """The text is not a valid command; the message names the offending word."""

    def __init__(self, message: str, command: str | None = None) -> None:
        super().__init__(message)
        self.command = command


@dataclass(frozen=True, slots=True)
class StatusCommand:
    top: int | None = None
    """How many arms each list shows; None: the compact status (headline numbers, short
    lists), as a plain `/learning` or `status` asks."""
    public: bool = False
    arm: str | None = None


@dataclass(frozen=True, slots=True)
class RewardCommand:
    arm: str | None = None
    value: float = 1.0
    reason: str | None = None
    public: bool = False


@dataclass(frozen=True, slots=True)
class ResetCommand:
    arms: tuple[str, ...] | None = None
    """None resets every arm."""
    undo: bool = False
    confirm: bool = False


@dataclass(frozen=True, slots=True)
class PhaseCommand:
    phase: Phase | None = None
    """None shows the current phase."""
    confirm: bool = False


@dataclass(frozen=True, slots=True)
class ConfigCommand:
    """Show the learner's stored settings (no changes), or change them (SPEC 4a: a learner's
    settings are its own state, changed only by this command and its equivalents)."""

    changes: tuple[tuple[str, Any], ...] = ()
    """(key, value) pairs, keys camelCase or snake_case as the config file takes them."""
    learner: str | None = None
    """The learner to show or change; None: the one this conversation is served by."""


def setting_value(raw: str) -> Any:
    """A setting's value as typed (chat, `learning-bot learner set`): JSON when it reads as
    JSON (50, 0.2, true, null, ["a"]), else the text itself (seed). The learner's
    configuration then validates it (LearningService.set_settings)."""
    try:
        return json.loads(raw)
    except ValueError:
        return raw


@dataclass(frozen=True, slots=True)
class SubscribeCommand:
    """Subscribe this channel to a learner's alerts, digests or changes (admins)."""

    kind: str = "alerts"
    """One of engine.alert_records.SUBSCRIPTION_KINDS."""
    learner: str | None = None
    """None: the learner this workspace or guild is mapped to."""


@dataclass(frozen=True, slots=True)
class UnsubscribeCommand:
    kind: str | None = "alerts"
    """None: every kind."""
    learner: str | None = None


@dataclass(frozen=True, slots=True)
class SubscriptionsCommand:
    """This channel's subscriptions (and whether any is paused)."""


@dataclass(frozen=True, slots=True)
class HelpCommand:
    topic: str | None = None


@dataclass(frozen=True, slots=True)
class ArmNamesQuery:
    """The learner's arm ids and labels, for a surface's autocomplete (never typed)."""


@dataclass(frozen=True, slots=True)
class ConfirmCommand:
    """A click on a confirmation's confirm button (or `confirm` typed at the console)."""

    token: str


@dataclass(frozen=True, slots=True)
class CancelCommand:
    token: str


Command = (
    StatusCommand
    | RewardCommand
    | ResetCommand
    | PhaseCommand
    | ConfigCommand
    | SubscribeCommand
    | UnsubscribeCommand
    | SubscriptionsCommand
    | HelpCommand
    | ArmNamesQuery
    | ConfirmCommand
    | CancelCommand
)
MUTATING = (
    RewardCommand,
    ResetCommand,
    ConfirmCommand,
    CancelCommand,
    SubscribeCommand,
    UnsubscribeCommand,
)


def is_mutating(command: Command) -> bool:
    if isinstance(command, PhaseCommand):
        return command.phase is not None
    if isinstance(command, ConfigCommand):
        return bool(command.changes)
    return isinstance(command, MUTATING)


def clean_input(text: str) -> str:
    """Control characters (engine.text) become spaces; everything else is kept as text."""
    return strip_controls(text)


def _tokens(text: str) -> list[str]:
    lexer = shlex.shlex(text, posix=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    lexer.escape = ""
    try:
        tokens = list(lexer)
    except ValueError as exc:
        raise UsageError(f"unbalanced quotes: {exc}") from None
    for token in tokens:
        if token == "":
            raise UsageError('empty quotes ("") are not a valid argument')
    return tokens


def _shown(word: str) -> str:
    return word if len(word) <= 40 else word[:37] + "..."


def parse_command(text: str | None) -> Command:
    """Parse the text after `/learning` into a command, or raise UsageError."""
    if text is None:
        return StatusCommand()
    if not isinstance(text, str):
        raise UsageError("the command must be text")
    if len(text) > MAX_INPUT_CHARS:
        raise UsageError(f"the command is {len(text)} characters long; at most {MAX_INPUT_CHARS}")
    text = clean_input(text).strip()
    if text.lower().startswith("/learning"):
        text = text[len("/learning") :].strip()
    tokens = _tokens(text)
    if not tokens:
        return StatusCommand()
    head, rest = tokens[0].lower(), tokens[1:]
    if head == "status":
        return _parse_status(rest)
    if head == "reward":
        return _parse_reward(rest)
    if head == "reset":
        return _parse_reset(rest)
    if head == "phase":
        return _parse_phase(rest)
    if head == "config":
        return _parse_config(rest)
    if head in ("subscribe", "unsubscribe"):
        return _parse_subscribe(head, rest)
    if head == "subscriptions":
        if rest:
            raise UsageError(f"unexpected {_shown(rest[0])!r} after subscriptions", head)
        return SubscriptionsCommand()
    if head == "help":
        if len(rest) > 1:
            raise UsageError(f"unexpected {_shown(rest[1])!r} after help", "help")
        topic = rest[0].lower() if rest else None
        if topic is not None and topic not in COMMAND_NAMES:
            raise UsageError(
                f"no help for {_shown(rest[0])!r}; commands: {', '.join(COMMAND_NAMES)}",
                "help",
            )
        return HelpCommand(topic)
    raise UsageError(f"unknown command {_shown(tokens[0])!r}")


def _parse_subscribe(head: str, rest: list[str]) -> SubscribeCommand | UnsubscribeCommand:
    """`[alerts|digest daily|digest weekly|changes] [learner]` (`all` too for unsubscribe)."""
    words = [w.lower() for w in rest]
    kind: str | None = "alerts"
    taken = 0
    if words[:1] == ["digest"]:
        if len(words) < 2 or words[1] not in ("daily", "weekly"):
            raise UsageError("'digest' needs daily or weekly, e.g. subscribe digest daily", head)
        kind, taken = f"digest {words[1]}", 2
    elif words[:1] and words[0] in ("alerts", "changes"):
        kind, taken = words[0], 1
    elif words[:1] == ["all"] and head == "unsubscribe":
        kind, taken = None, 1
    learner = rest[taken] if len(rest) > taken else None
    if len(rest) > taken + 1:
        raise UsageError(f"unexpected {_shown(rest[taken + 1])!r} after {head}", head)
    if learner is not None:
        try:
            check_learner_name(learner)
        except InvalidInput as exc:
            raise UsageError(
                f"{_shown(learner)!r} is neither alerts, digest daily, digest weekly, changes "
                f"nor a learner name ({exc})",
                head,
            ) from None
    if head == "subscribe":
        assert kind is not None
        return SubscribeCommand(kind, learner)
    return UnsubscribeCommand(kind, learner)


def _parse_status(rest: list[str]) -> StatusCommand:
    top: int | None = None
    public, arm = False, None
    i = 0
    while i < len(rest):
        word = rest[i].lower()
        if word == "public":
            public = True
        elif word == "top":
            if i + 1 >= len(rest):
                raise UsageError("'top' needs a number, e.g. status top 10", "status")
            value = rest[i + 1]
            if not value.isdigit() or not 1 <= int(value) <= MAX_TOP:
                raise UsageError(
                    f"top must be a whole number from 1 to {MAX_TOP}, got {_shown(value)!r}",
                    "status",
                )
            top = int(value)
            i += 1
        elif word == "arm":
            if arm is not None or i + 1 >= len(rest):
                raise UsageError("'arm' needs one arm id or label", "status")
            arm = rest[i + 1]
            i += 1
        else:
            raise UsageError(f"unexpected {_shown(rest[i])!r} after status", "status")
        i += 1
    return StatusCommand(top=top, public=public, arm=arm)


def _looks_numeric(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def _parse_reward(rest: list[str]) -> RewardCommand:
    arm: str | None = None
    value = 1.0
    public = False
    if rest and rest[-1].lower() == "public":
        public = True
        rest = rest[:-1]
    i = 0
    if i < len(rest) and rest[i].lower() not in _VALUES and not _looks_numeric(rest[i]):
        arm = rest[i]
        i += 1
    if i < len(rest):
        word = rest[i].lower()
        if word in _VALUES:
            value = _VALUES[word]
            i += 1
        elif _looks_numeric(word):
            raise UsageError(f"reward value {_shown(rest[i])!r} is not 1, 0, good or bad", "reward")
    reason = " ".join(rest[i:]).strip() or None
    if reason is not None and len(reason) > 500:
        raise UsageError("the reason is longer than 500 characters", "reward")
    return RewardCommand(arm=arm, value=value, reason=reason, public=public)


def _parse_reset(rest: list[str]) -> ResetCommand:
    confirm = False
    if rest and rest[-1].lower() == "confirm":
        confirm = True
        rest = rest[:-1]
    if rest and rest[0].lower() == "undo":
        if len(rest) > 1:
            raise UsageError(f"unexpected {_shown(rest[1])!r} after reset undo", "reset")
        return ResetCommand(undo=True, confirm=confirm)
    if not rest or (len(rest) == 1 and rest[0].lower() == "all"):
        return ResetCommand(arms=None, confirm=confirm)
    if any(word.lower() in ("all", "undo", "confirm") for word in rest):
        raise UsageError("use 'reset all', 'reset undo' or 'reset <arm ids...>'", "reset")
    if len(rest) > MAX_CHAT_RESET_ARMS:
        raise UsageError(f"at most {MAX_CHAT_RESET_ARMS} arms per reset", "reset")
    return ResetCommand(arms=tuple(rest), confirm=confirm)


def _parse_phase(rest: list[str]) -> PhaseCommand:
    confirm = False
    if rest and rest[-1].lower() == "confirm":
        confirm = True
        rest = rest[:-1]
    if not rest:
        if confirm:
            raise UsageError("'confirm' needs a phase: phase active confirm", "phase")
        return PhaseCommand()
    if len(rest) > 1:
        raise UsageError(f"unexpected {_shown(rest[1])!r} after phase", "phase")
    word = rest[0].lower()
    if word not in ("passive", "active"):
        raise UsageError(f"unknown phase {_shown(rest[0])!r}; use passive or active", "phase")
    return PhaseCommand(Phase(word), confirm)


def _parse_config(rest: list[str]) -> ConfigCommand:
    if not rest:
        return ConfigCommand()
    if len(rest) == 1:
        raise UsageError(
            f"'config {_shown(rest[0])}' needs a value, e.g. config halfLife 50", "config"
        )
    if len(rest) > 3:
        raise UsageError(f"unexpected {_shown(rest[3])!r} after config", "config")
    key = rest[0]
    if key.lower() == "phase":
        raise UsageError("the phase has its own command: phase passive|active", "config")
    learner = rest[2] if len(rest) == 3 else None
    return ConfigCommand(((key, setting_value(rest[1])),), learner)


def command_to_json(command: Command) -> str:
    data: dict[str, Any] = {"type": type(command).__name__}
    for name in command.__slots__:
        value = getattr(command, name)
        data[name] = value.value if isinstance(value, Phase) else value
    return json.dumps(data)


def command_from_json(text: str) -> Command:
    data = json.loads(text)
    kind = data.pop("type")
    if kind == "ResetCommand":
        arms = data.get("arms")
        return ResetCommand(
            tuple(arms) if arms is not None else None, data["undo"], data["confirm"]
        )
    if kind == "PhaseCommand":
        return PhaseCommand(Phase(data["phase"]) if data["phase"] else None, data["confirm"])
    if kind == "RewardCommand":
        return RewardCommand(data["arm"], data["value"], data["reason"], data["public"])
    if kind == "StatusCommand":
        return StatusCommand(data["top"], data["public"], data["arm"])
    if kind == "ConfigCommand":
        changes = tuple((str(k), v) for k, v in data["changes"])
        return ConfigCommand(changes, data["learner"])
    if kind == "HelpCommand":
        return HelpCommand(data["topic"])
    raise ValueError(f"unknown command type {kind}")
