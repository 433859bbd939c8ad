"""Arms: the prompt components the learning layer chooses between."""

from __future__ import annotations

import enum
import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, NamedTuple

from learning_bot.engine.bounds import MAX_TOKEN_COST, check_count, check_text
from learning_bot.engine.errors import InvalidArmId, InvalidInput
from learning_bot.engine.text import has_controls

MAX_ARM_ID_LENGTH = 512
"""Longest accepted arm id, in characters."""


class ArmType(enum.StrEnum):
    """The five kinds of prompt component."""

    TOOL = "tool"
    MEMORY = "memory"
    SKILL = "skill"
    FILE = "file"
    SECTION = "section"


_ARM_TYPES = {t.value: t for t in ArmType}


class ArmId(NamedTuple):
    """A parsed arm id: `type:category:name`; the name may itself contain `:`."""

    type: ArmType
    category: str
    name: str

    def __str__(self) -> str:
        return f"{self.type.value}:{self.category}:{self.name}"


def parse_arm_id(arm_id: str) -> ArmId:
    """Parse `type:category:name`, raising InvalidArmId that says what is wrong."""
    if not isinstance(arm_id, str):
        raise InvalidArmId(f"arm id must be a string, got {type(arm_id).__name__}")
    return _parse(arm_id)


@lru_cache(maxsize=16384)
def _parse(arm_id: str) -> ArmId:
    """parse_arm_id for a string; cached, since inventories repeat run after run."""
    if not arm_id:
        raise InvalidArmId("arm id is empty; expected type:category:name")
    if len(arm_id) > MAX_ARM_ID_LENGTH:
        raise InvalidArmId(
            f"arm id is {len(arm_id)} characters long; at most {MAX_ARM_ID_LENGTH} are allowed"
        )
    shown = _shorten(arm_id)
    if has_controls(arm_id):
        raise InvalidArmId(f"arm id {shown!r} contains control characters")
    if arm_id != arm_id.strip():
        raise InvalidArmId(f"arm id {shown!r} has leading or trailing whitespace")
    parts = arm_id.split(":", 2)
    if len(parts) < 3:
        raise InvalidArmId(
            f"arm id {shown!r} has {len(parts)} part(s); expected type:category:name "
            "(for example tool:fs:Read)"
        )
    type_part, category, name = parts
    arm_type = _ARM_TYPES.get(type_part)
    if arm_type is None:
        known = ", ".join(_ARM_TYPES)
        raise InvalidArmId(f"unknown arm type {type_part!r} in {shown!r}; known types: {known}")
    if not category or category.strip() != category:
        raise InvalidArmId(f"arm id {shown!r} has an empty or padded category")
    if not name or name.strip() != name:
        raise InvalidArmId(f"arm id {shown!r} has an empty or padded name")
    return ArmId(arm_type, category, name)


def build_arm_id(arm_type: ArmType | str, category: str, name: str) -> str:
    """Join the three parts into an id, validating the result."""
    type_value = arm_type.value if isinstance(arm_type, ArmType) else str(arm_type)
    if ":" in category:
        raise InvalidArmId(f"category {_shorten(category)!r} must not contain ':'")
    arm_id = f"{type_value}:{category}:{name}"
    parse_arm_id(arm_id)
    return arm_id


def _shorten(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def estimate_tokens(content: str | dict[str, Any] | list[Any] | None) -> int:
    """Token cost estimate: ceil(len/4); a dict or list is first serialised like JSON.stringify."""
    if content is None:
        return 0
    if isinstance(content, (dict, list)):
        text = json.dumps(content, separators=(",", ":"), ensure_ascii=False)
    elif isinstance(content, str):
        text = content
    else:
        raise InvalidInput(f"content must be a string, dict or list, got {type(content).__name__}")
    # JavaScript measures strings in UTF-16 code units; count the same way.
    length = len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)
    return math.ceil(length / 4)


@dataclass(frozen=True, slots=True)
class Arm:
    """One prompt component: its id, its token cost and, for memories, the text to look for."""

    id: str
    token_cost: int
    label: str = ""
    content: str | None = field(default=None, repr=False, compare=False)
    description: str | None = field(default=None, repr=False, compare=False)
    """What the arm does, for lexical relevance to a request (a tool's description)."""
    parsed: ArmId = field(init=False, repr=False, compare=False)
    type: ArmType = field(init=False, repr=False, compare=False)
    category: str = field(init=False, repr=False, compare=False)
    name: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        parsed = parse_arm_id(self.id)
        object.__setattr__(self, "parsed", parsed)
        object.__setattr__(self, "type", parsed.type)
        object.__setattr__(self, "category", parsed.category)
        object.__setattr__(self, "name", parsed.name)
        cost = self.token_cost
        if type(cost) is not int or not 0 <= cost <= MAX_TOKEN_COST:
            where = f"token_cost of {_shorten(self.id)!r}"
            object.__setattr__(self, "token_cost", check_count(where, cost, MAX_TOKEN_COST))
        label = self.label
        if type(label) is not str or len(label) > MAX_ARM_ID_LENGTH or not label.isprintable():
            check_text(f"label of {_shorten(self.id)!r}", label, MAX_ARM_ID_LENGTH)
        if not self.label:
            object.__setattr__(self, "label", parsed.name)
        if self.content is not None:
            check_text(f"content of {_shorten(self.id)!r}", self.content)
        if self.description is not None:
            from learning_bot.engine.bounds import MAX_DESCRIPTION_CHARS

            where = f"description of {_shorten(self.id)!r}"
            check_text(where, self.description, MAX_DESCRIPTION_CHARS)
