"""Surface-neutral replies: blocks of plain text that each surface renders (and escapes) in
its own idiom. No block holds markup: every string may have come from a user or an arm."""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal


class Visibility(enum.StrEnum):
    PRIVATE = "private"
    """Only the person who asked sees it (Slack/Discord ephemeral)."""
    PUBLIC = "public"
    """Posted to the channel."""


class ReplyKind(enum.StrEnum):
    OK = "ok"
    INFO = "info"
    ERROR = "error"
    CONFIRM = "confirm"
    """Asks to confirm a destructive command; carries confirm/cancel actions."""


@dataclass(frozen=True, slots=True)
class Heading:
    text: str
    badge: str | None = None
    """A short tag shown beside the heading, e.g. ACTIVE."""


@dataclass(frozen=True, slots=True)
class Text:
    text: str
    muted: bool = False


@dataclass(frozen=True, slots=True)
class Fields:
    """Key/value pairs."""

    items: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    align: Literal["left", "right"] = "left"


@dataclass(frozen=True, slots=True)
class Table:
    columns: tuple[Column, ...]
    rows: tuple[tuple[str, ...], ...]
    title: str | None = None


@dataclass(frozen=True, slots=True)
class Action:
    """A button: `command` is `confirm` or `cancel`, `token` names the pending confirmation."""

    label: str
    command: Literal["confirm", "cancel"]
    token: str
    style: Literal["primary", "danger", "default"] = "default"
    confirm_text: str | None = None
    """A second 'are you sure' a surface may show before sending the click."""


@dataclass(frozen=True, slots=True)
class Actions:
    actions: tuple[Action, ...]


Block = Heading | Text | Fields | Table | Actions


@dataclass(frozen=True, slots=True)
class CompactList:
    """One short list of a compact status: (label, mean) pairs under a title."""

    title: str
    items: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class CompactStatus:
    """A status as a phone shows it: the headline numbers, short lists of arms, and `more`,
    which says where the full tables are."""

    headline: tuple[tuple[str, str], ...]
    lists: tuple[CompactList, ...]
    more: str


class LazyData(Mapping[str, Any]):
    """Reply data made on first read: a reply whose details cost more than its blocks (a
    status's JSON shapes, which import the wire types) builds them only for a surface that
    sends them, not for the terminal's text."""

    __slots__ = ("_made", "_make")

    def __init__(self, make: Callable[[], dict[str, Any]]) -> None:
        self._make = make
        self._made: dict[str, Any] | None = None

    def _data(self) -> dict[str, Any]:
        if self._made is None:
            self._made = self._make()
        return self._made

    def __getitem__(self, key: str) -> Any:
        return self._data()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data())

    def __len__(self) -> int:
        return len(self._data())

    def __repr__(self) -> str:
        return repr(self._data())


@dataclass(frozen=True, slots=True)
class Reply:
    kind: ReplyKind
    blocks: tuple[Block, ...]
    summary: str
    """One line saying what happened; surfaces use it as the notification text."""
    visibility: Visibility = Visibility.PRIVATE
    data: Mapping[str, Any] = field(default_factory=dict)
    """Machine-readable details (for the HTTP surface and for tests); bot.shapes writes them
    on the wire together with the typed fields below. A `LazyData` is made when first read."""
    usage: tuple[str, ...] | None = None
    """A usage error's grammar lines: one command's, or the whole grammar's."""
    detail: str | None = None
    """An error's cause, where the message shown in chat words it for users."""
    dashboard_url: str | None = None
    """The dashboard a status links to, when its address is known."""
    compact: CompactStatus | None = None
    """A status's phone layout (a status that asked for no number of arms)."""
    cancelled: bool = False
    """A confirmation prompt was cancelled."""
    replaces_prompt: bool = False
    """The answer to a confirmation: surfaces show it in place of the prompt."""
    confirmed_by: str | None = None
    """Who confirmed the prompt this reply replaces."""
    arm_names: tuple[tuple[str, str], ...] | None = None
    """The learner's (arm id, label) pairs, for a surface's autocomplete."""

    @property
    def ok(self) -> bool:
        return self.kind is not ReplyKind.ERROR

    @property
    def actions(self) -> tuple[Action, ...]:
        return tuple(a for b in self.blocks if isinstance(b, Actions) for a in b.actions)

    @property
    def error_code(self) -> str | None:
        """An error reply's code in the error table (bot.errors), else None."""
        code = self.data.get("errorCode")
        return code if isinstance(code, str) else None


def error_reply(
    message: str,
    hint: str | None = None,
    *,
    code: str = "invalid_input",
    detail: str | None = None,
    **data: Any,
) -> Reply:
    """An error answer; `code` names its row in the error table (bot.errors)."""
    blocks: list[Block] = [Text(message)]
    if hint:
        blocks.append(Text(hint, muted=True))
    return Reply(
        ReplyKind.ERROR,
        tuple(blocks),
        message,
        data={"error": message, "errorCode": code, **data},
        detail=detail,
    )


Explanation = tuple[list[Any], int, int]
"""What `LearningService.context_explanation` answers: the feature lifts
(engine.context_policy.FeatureLift), runs that deferred the arm, and those that loaded it then."""


def depends_on_text(lift: Any) -> str:
    """One feature lift as `status arm` words it."""
    other = f"; {lift.rate_without:.0%} otherwise" if lift.rate_without is not None else ""
    return f"used in {lift.rate_with:.0%} of {lift.runs_with:.0f} runs where {lift.feature}{other}"


def deferred_text(deferred: int, loaded: int) -> str | None:
    """How often a deferred arm was loaded then, as `status arm` words it (None: never
    deferred)."""
    return f"{loaded} of {deferred} runs ({loaded / deferred:.0%})" if deferred else None


def explanation_fields(explanation: Explanation) -> tuple[tuple[str, str], ...]:
    """`status arm`'s lines on what the arm's usefulness depends on (the request features its
    rate of use differs most under) and how often it was deferred, then loaded."""
    lifts, deferred, loaded = explanation
    out = [("Depends on", depends_on_text(lift)) for lift in lifts]
    loaded_text = deferred_text(deferred, loaded)
    if loaded_text is not None:
        out.append(("Deferred, then loaded", loaded_text))
    return tuple(out)


def context_fields(service: Any, arm_id: str) -> tuple[tuple[str, str], ...]:
    """`explanation_fields` of the arm, as the service explains it now."""
    return explanation_fields(service.context_explanation(arm_id))
