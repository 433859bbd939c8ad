"""Surface-neutral replies: blocks of plain text that each surface renders (and escapes) in
its own idiom. No block holds markup: every string may have come from a user or an arm."""

from __future__ import annotations

import enum
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
class Reply:
    kind: ReplyKind
    blocks: tuple[Block, ...]
    summary: str
    """One line saying what happened; surfaces use it as the notification text."""
    visibility: Visibility = Visibility.PRIVATE
    data: dict[str, Any] = field(default_factory=dict)
    """Machine-readable details (for the HTTP surface and for tests)."""

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

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "summary": self.summary,
            "visibility": self.visibility.value,
            "blocks": [_block_to_dict(b) for b in self.blocks],
            "data": self.data,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Reply:
        return cls(
            kind=ReplyKind(data["kind"]),
            blocks=tuple(_block_from_dict(b) for b in data["blocks"]),
            summary=data["summary"],
            visibility=Visibility(data["visibility"]),
            data=dict(data.get("data") or {}),
        )


def error_reply(
    message: str, hint: str | None = None, *, code: str = "invalid_input", **data: Any
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
    )


def _block_to_dict(block: Block) -> dict[str, Any]:
    if isinstance(block, Heading):
        return {"type": "heading", "text": block.text, "badge": block.badge}
    if isinstance(block, Text):
        return {"type": "text", "text": block.text, "muted": block.muted}
    if isinstance(block, Fields):
        return {"type": "fields", "items": [list(i) for i in block.items]}
    if isinstance(block, Table):
        return {
            "type": "table",
            "title": block.title,
            "columns": [{"name": c.name, "align": c.align} for c in block.columns],
            "rows": [list(r) for r in block.rows],
        }
    return {
        "type": "actions",
        "actions": [
            {
                "label": a.label,
                "command": a.command,
                "token": a.token,
                "style": a.style,
                "confirmText": a.confirm_text,
            }
            for a in block.actions
        ],
    }


def _block_from_dict(data: dict[str, Any]) -> Block:
    kind = data["type"]
    if kind == "heading":
        return Heading(data["text"], data.get("badge"))
    if kind == "text":
        return Text(data["text"], bool(data.get("muted")))
    if kind == "fields":
        return Fields(tuple((str(k), str(v)) for k, v in data["items"]))
    if kind == "table":
        return Table(
            tuple(Column(c["name"], c["align"]) for c in data["columns"]),
            tuple(tuple(str(x) for x in r) for r in data["rows"]),
            data.get("title"),
        )
    return Actions(
        tuple(
            Action(a["label"], a["command"], a["token"], a["style"], a.get("confirmText"))
            for a in data["actions"]
        )
    )
