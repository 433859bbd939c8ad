"""What a `/learning` command declares about itself (`CommandSpec`), what it is handed while
it runs (`Context`), and the word helpers its parser shares with the others.

A command is one module of this package holding a `SPEC`: its name, grammar, help, who may
run it, its parser and its handler, and how the terminal, Discord and MCP offer it. The
registry (bot.commands.registry) finds those modules; the parser, the help, shell
completion, Discord's app commands, the MCP tools and the bus are built from it."""

from __future__ import annotations

import dataclasses
import json
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from learning_bot.bot.invocation import Actor, Command, Invocation
from learning_bot.bot.replies import Reply
from learning_bot.engine.errors import Forbidden, InvalidInput
from learning_bot.engine.text import strip_controls

if TYPE_CHECKING:
    from learning_bot.bot.subscriptions import SubscriptionHandlers
    from learning_bot.engine.service import LearningService

MAX_INPUT_CHARS = 1000
MAX_ARM_CHARS = 512
"""The longest arm id or label a command takes."""
C = TypeVar("C", bound=Command)

ADMIN_LIST_HINT = "have your id added to the admin allow-list (LEARNING_BOT_ADMINS)"
CHAT_SURFACES = frozenset({"slack", "discord"})
"""Surfaces whose admins are a workspace's or a guild's, not the deployment's."""


class UsageError(InvalidInput):
    """The text is not a valid command; the message names the offending word."""

    def __init__(self, message: str, command: str | None = None) -> None:
        super().__init__(message)
        self.command = command


# -- words ---------------------------------------------------------------------------------


def clean_input(text: str) -> str:
    """Control characters (engine.text) become spaces; everything else is kept as text."""
    return strip_controls(text)


def tokens(text: str) -> list[str]:
    """The words of a command line: shell quoting, no escapes or comments."""
    lexer = shlex.shlex(text, posix=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    lexer.escape = ""
    try:
        words = list(lexer)
    except ValueError as exc:
        raise UsageError(f"unbalanced quotes: {exc}") from None
    for word in words:
        if word == "":
            raise UsageError('empty quotes ("") are not a valid argument')
    return words


def shown(word: str) -> str:
    """A word as an error message quotes it (long ones cut)."""
    return word if len(word) <= 40 else word[:37] + "..."


def unexpected(word: str, after: str, command: str | None = None) -> UsageError:
    """The error for a word a command does not take, `after` its name (or the words before
    it); `command`: the command the usage is shown for, when `after` is more than its name."""
    return UsageError(f"unexpected {shown(word)!r} after {after}", command or after)


def ends_with(words: list[str], word: str) -> tuple[bool, list[str]]:
    """Whether the words end with `word` (any case), and the words before it."""
    if words and words[-1].lower() == word:
        return True, words[:-1]
    return False, words


def setting_value(raw: str) -> Any:
    """A setting's value as typed (chat, `learning-bot learner set`): JSON when it reads as
    JSON (50, 0.2, true, null, ["a"]), else the text itself (seed). The learner's
    configuration then validates it (LearningService.set_settings)."""
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def no_words(name: str, command: C) -> Callable[[list[str]], C]:
    """The parser of a command that takes no words after its name."""

    def parse(rest: list[str]) -> C:
        if rest:
            raise unexpected(rest[0], name)
        return command

    return parse


# -- who may run it ------------------------------------------------------------------------


class Gate(Protocol):
    """What an access rule asks of the authorisation middleware."""

    reward_admins_only: bool

    def is_admin(self, invocation: Invocation) -> bool: ...

    def on_allow_list(self, invocation: Invocation) -> bool: ...


Access = Callable[[Gate, Invocation, Any], None]
"""Raises Forbidden when the invocation's actor may not run the command (its changes only:
a command's read is open to everyone)."""

GUEST_REFUSAL = "Guests can look at status, but cannot change the learning layer."


def anyone(gate: Gate, invocation: Invocation, command: Any) -> None:
    """Every actor, guests too."""


def members(gate: Gate, invocation: Invocation, command: Any) -> None:
    """Everyone but guests."""
    if invocation.actor.is_guest:
        raise Forbidden(GUEST_REFUSAL)


def admins(what: str) -> Access:
    """Admins only; `what` completes "Only admins can ..." in the refusal."""

    def check(gate: Gate, invocation: Invocation, command: Any) -> None:
        members(gate, invocation, command)
        if not gate.is_admin(invocation):
            raise Forbidden(f"Only admins can {what}. Ask a workspace admin, or {ADMIN_LIST_HINT}.")

    return check


# -- how surfaces offer it -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Option:
    """One typed argument, as Discord's app commands and MCP tools declare it."""

    name: str
    kind: type
    """int, str or bool."""
    description: str
    required: bool = False
    default: Any = None
    choices: tuple[str, ...] | Callable[[], tuple[str, ...]] = ()
    """The values it takes (lower case); a callable: read when a surface builds it."""
    low: int | None = None
    """The least value (int) or length (str)."""
    high: int | None = None
    """The greatest value (int) or length (str)."""
    autocomplete: str = ""
    """"arm": one arm id or label completes; "arms": several, space-separated."""
    limit: int = 0
    """Text longer than this is refused (0: `high`), without declaring a length."""

    def values(self) -> tuple[str, ...]:
        """Its choices."""
        return self.choices() if callable(self.choices) else self.choices


PUBLIC = Option(
    "public", bool, "Post the answer to the channel (default: only you see it)", default=False
)
"""The option that posts a reply to the channel."""


@dataclass(frozen=True, slots=True)
class Form:
    """A command as a surface with typed arguments offers it: a description, its options
    and the command they make (values checked against the options first: text cleaned and
    held to its length, numbers to their range, choices lower-cased)."""

    description: str
    options: tuple[Option, ...] = ()
    build: Callable[[Mapping[str, Any]], Command] | None = None
    """None: the command without arguments."""
    public: Callable[[Any], bool] = lambda command: False
    """Whether the answer goes to the channel (else only the caller sees it)."""
    tool: str = ""
    """The MCP tool's name, when the MCP surface offers the command as a tool of its own
    built from these options (the learner beside them)."""
    changes: bool = False
    """The tool changes the learner's state (what MCP clients are told)."""


@dataclass(frozen=True, slots=True)
class Terminal:
    """A command as `learning-bot <name>` offers it."""

    summary: str
    """`<name> — what it does` (the part after the dash is the one-line help)."""
    words: str
    """What the words after the name mean (its `WORD` help); `{commands}` stands for the
    terminal's commands, `a|b|...`."""
    confirm: bool = False
    """Takes --confirm (it asks before changing anything)."""
    conversation: bool = False
    """Takes --conversation (it acts on a conversation's latest run)."""
    reads_only: bool = False
    """Answered from the read-only view when that is all there is (nothing written)."""


# -- what a running command is handed ------------------------------------------------------


@dataclass(frozen=True)
class Context:
    """One command's call, as the bus hands it to the command's handler."""

    invocation: Invocation
    learner: str
    """The learner the command acts on."""
    services: Callable[[str, bool], LearningService]
    """(learner, create) -> its service; NotFound for an unknown learner when not create."""
    ask: Callable[[Reply], Reply]
    """A confirmation prompt stored for this call, answered with its buttons (or returned
    as it is to a caller that confirms on its own side)."""
    confirm: Callable[[str], Reply]
    cancel: Callable[[str], Reply]
    subscription_handlers: Callable[[], SubscriptionHandlers]
    """Unavailable when this view keeps no subscriptions."""
    paused_notice: Callable[[Reply], Reply]
    dashboard_url: str | None = None
    create: bool = False
    """Whether the command may create its learner (it changes something)."""

    def service(self) -> LearningService:
        return self.services(self.learner, self.create)

    @property
    def actor(self) -> Actor:
        return self.invocation.actor

    @property
    def conversation(self) -> str:
        return self.invocation.conversation

    @property
    def surface(self) -> str:
        """The surface whose wording the reply uses."""
        return self.invocation.speaks_as


def never(command: Any) -> bool:
    return False


def always(command: Any) -> bool:
    return True


def no_learner(command: Any) -> str | None:
    return None


def own_learner(command: Any) -> str | None:
    """The learner the command's `learner` field names (None: the conversation's)."""
    learner: str | None = command.learner
    return learner


@dataclass(frozen=True)
class CommandSpec(Generic[C]):
    """Everything about one command, declared once."""

    name: str
    type: type[C]
    run: Callable[[Context, C], Reply]
    order: int
    """Where it stands in the help and the grammar (lowest first)."""
    grammar: tuple[str, ...] = ()
    """Its forms after `/learning`; empty: a command nobody types (a button, a query)."""
    help: str = ""
    """One paragraph, `{cmd} <usage> — <what it does>`; `{cmd}` is the surface's prefix."""
    parse: Callable[[list[str]], C] | None = None
    """The words after its name -> the command."""
    access: Access = members
    """Who may run it when it changes something (`mutating`)."""
    guards_reads: bool = False
    """`access` is asked of its reads too."""
    mutating: Callable[[C], bool] = never
    """Whether this call changes something: audited, rate-limited, refused to guests."""
    rate_limited: bool = True
    asks: Callable[[C], bool] = never
    """Whether this call asks for confirmation before it changes anything."""
    confirmed: Callable[[C], C] | None = None
    """The command as its confirmation runs it."""
    learner: Callable[[C], str | None] = no_learner
    """A learner the command names itself (else the conversation's)."""
    creates: Callable[[C], bool] | None = None
    """Whether this call may create a learner that does not exist yet (None: when it changes
    something); a command that only acts on what a learner holds (reward, reset) answers
    NotFound for an unknown one instead of leaving an empty learner behind."""
    from_json: Callable[[dict[str, Any]], C] | None = None
    """The command from its stored JSON fields (a pending confirmation); None: not stored."""
    words: tuple[str, ...] = ()
    """The words shell completion offers after its name."""
    arms: str = ""
    """Where an arm id or label completes: "after-arm", "first", "any", or nowhere."""
    terminal: Terminal | None = None
    form: Form | None = None

    def may_create(self, command: C) -> bool:
        """Whether running `command` may create its learner."""
        return (self.mutating if self.creates is None else self.creates)(command)

    def __post_init__(self) -> None:
        if self.grammar and self.parse is None:
            raise TypeError(f"command {self.name!r} has a grammar but no parser")


def with_confirm(command: Any) -> Any:
    """The command with its `confirm` field set."""
    return dataclasses.replace(command, confirm=True)


__all__ = [
    "Access",
    "Actor",
    "CommandSpec",
    "Context",
    "Form",
    "Gate",
    "Option",
    "Terminal",
    "UsageError",
]
