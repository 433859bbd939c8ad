"""The limits every value entering the learning layer is checked against, once, at the boundary.

Every backend must be able to store and read back whatever is accepted, so the limits are
those of the narrowest one (PostgreSQL `bigint`, `integer` and `text`, SQLite's 64-bit
integers, JSON without Infinity), with room to add up many runs without overflow:

- counts (tokens, characters, durations in ms) are whole numbers from 0 to `MAX_COUNT`
  (10^12), so 9 million runs at the limit still sum inside a signed 64-bit integer;
- a token cost is at most `MAX_TOKEN_COST` (2^31 - 1, a PostgreSQL `integer`);
- timestamps are Unix milliseconds from 0 to `MAX_TIMESTAMP_MS` (the end of year 9999);
- floats are finite;
- strings are valid Unicode (no lone surrogates) without NUL (see `engine.text` for the
  control-character rule that display paths add on top).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Sequence
from typing import Any

from engine.errors import InvalidInput

MAX_COUNT = 10**12
MAX_TOKEN_COST = 2**31 - 1
MAX_TIMESTAMP_MS = 253_402_300_799_999

# The limits of the use cases, the one place each is written; surfaces check them at their edge
# with these names so that every way in refuses the same input with the same number.
MAX_REASON_CHARS = 500
"""A manual reward's reason."""
MAX_ACTOR_CHARS = 256
"""Who gave a reward or made a change."""
MAX_PAGE = 1000
"""Rows one page of a listing (traces, exports) returns at most."""
MAX_RESET_ARMS = 1000
"""Arms one reset names at most (the service, the HTTP API and MCP)."""
MAX_CHAT_RESET_ARMS = 50
"""Arms a chat command's `reset` names at most: the chat grammar's own, smaller limit, so that a
confirmation message listing them stays readable in Slack and Discord."""
MAX_BATCH = 1000
"""Run reports one HTTP request carries at most."""


def check_count(name: str, value: Any, maximum: int = MAX_COUNT) -> int:
    """A whole number from 0 to `maximum` (a float with an integral value is accepted)."""
    if isinstance(value, bool):
        raise InvalidInput(f"{name} must be a whole number from 0 to {maximum}, got {value!r}")
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise InvalidInput(f"{name} must be a whole number from 0 to {maximum}")
        value = int(value)
    if not isinstance(value, int):
        raise InvalidInput(f"{name} must be a whole number, got {type(value).__name__}")
    if not 0 <= value <= maximum:
        shown = value if abs(value) < 10**30 else f"a {len(str(abs(value)))}-digit number"
        raise InvalidInput(f"{name} must be a whole number from 0 to {maximum}, got {shown}")
    return value


def check_timestamp(name: str, value: Any) -> int:
    """Unix milliseconds from 0 to the end of year 9999."""
    return check_count(name, value, MAX_TIMESTAMP_MS)


def check_finite(name: str, value: Any) -> float:
    """A finite number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(f"{name} must be a number, got {type(value).__name__}")
    try:
        number = float(value)
    except OverflowError:
        raise InvalidInput(f"{name} is too large") from None
    if not math.isfinite(number):
        raise InvalidInput(f"{name} must be a finite number")
    return number


def check_text(name: str, value: Any, max_chars: int | None = None) -> str:
    """A string that every backend stores: valid Unicode, no NUL, at most `max_chars`."""
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string, got {type(value).__name__}")
    if max_chars is not None and len(value) > max_chars:
        raise InvalidInput(f"{name} is longer than {max_chars} characters")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInput(f"{name} holds an invalid character (a lone surrogate)") from None
    if "\x00" in value:
        raise InvalidInput(f"{name} holds a NUL character")
    return value


MAX_JSON_DEPTH = 32


def check_json(name: str, value: Any, depth: int = 0) -> Any:
    """A JSON value every backend stores: finite numbers, valid strings (keys too), integers
    within 64 bits, nesting at most MAX_JSON_DEPTH deep. Returns it unchanged."""
    if depth > MAX_JSON_DEPTH:
        raise InvalidInput(f"{name} is nested more than {MAX_JSON_DEPTH} levels deep")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise InvalidInput(f"{name} holds an integer outside 64 bits")
        return value
    if isinstance(value, float):
        check_finite(name, value)
        return value
    if isinstance(value, str):
        check_text(name, value)
        return value
    if isinstance(value, (list, tuple)):
        for item in value:
            check_json(name, item, depth + 1)
        return value
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInput(f"{name} keys must be strings")
            check_text(f"{name} key", key)
            check_json(name, item, depth + 1)
        return value
    raise InvalidInput(f"{name} holds a {type(value).__name__}, which is not JSON")


MAX_LEARNER_NAME = 64
LEARNER_NAME = re.compile(r"[A-Za-z0-9._:-]{1,64}")
"""A learner name: 1-64 ASCII letters, digits, `.`, `_`, `:` or `-` (no spaces, no controls)."""


def check_learner_name(value: Any) -> str:
    """A learner name in the documented character set, or InvalidInput naming the rule."""
    if not isinstance(value, str) or not LEARNER_NAME.fullmatch(value):
        shown = repr(value[:80]) if isinstance(value, str) else type(value).__name__
        raise InvalidInput(
            f"learner name {shown} is not valid: use 1-{MAX_LEARNER_NAME} letters, digits, "
            "'.', '_', ':' or '-'"
        )
    return value


def unknown_learner_message(name: str, known: Sequence[str]) -> str:
    """`unknown learner 'typo' (known: a, b); did you mean 'type'?`"""
    shown = ", ".join(known[:20]) + (", ..." if len(known) > 20 else "")
    message = f"unknown learner {name!r} (known: {shown or 'none yet'})"
    close = difflib.get_close_matches(name, known, n=1)
    if close:
        message += f"; did you mean {close[0]!r}?"
    return message
