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

from learning_bot.engine.errors import InvalidInput

MAX_DESCRIPTION_CHARS = 4_000
"""An arm's `description` in a select body at most."""
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


class _Fault(Exception):
    """What is wrong with one value of a JSON tree (its place is found afterwards)."""


def check_json(name: str, value: Any, depth: int = 0) -> Any:
    """A JSON value every backend stores: finite numbers, valid strings (keys too), integers
    within 64 bits, nesting at most MAX_JSON_DEPTH deep. Returns it unchanged. A refusal names
    the place of the first bad value below `name` (`context.tags[2]`)."""
    try:
        _walk(value, depth)
    except _Fault:
        where, reason = _locate(name, value, depth)
        raise InvalidInput(f"{where} {reason}") from None
    return value


def _reason(value: Any) -> str | None:
    """Why a scalar (or a key) cannot be stored; None when it can."""
    if isinstance(value, str):
        if "\x00" in value:
            return "holds a NUL character"
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return "holds an invalid character (a lone surrogate)"
        return None
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return None if -(2**63) <= value < 2**63 else "holds an integer outside 64 bits"
    if isinstance(value, float):
        return None if math.isfinite(value) else "must be a finite number"
    return f"holds a {type(value).__name__}, which is not JSON"


def _walk(value: Any, depth: int) -> None:
    """Raise _Fault at the first value `_reason` refuses or deeper than MAX_JSON_DEPTH (no
    paths built: the common case is a tree with nothing wrong)."""
    if depth > MAX_JSON_DEPTH:
        raise _Fault
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str) or _reason(key):
                raise _Fault
            _walk(item, depth + 1)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _walk(item, depth + 1)
    elif _reason(value):
        raise _Fault


def _faulty(value: Any, depth: int) -> bool:
    try:
        _walk(value, depth)
    except _Fault:
        return True
    return False


def _locate(name: str, value: Any, depth: int) -> tuple[str, str]:
    """The place (`name.key[3]`) of the first value `_walk` refuses, and why."""
    where = name or "the body"
    if depth > MAX_JSON_DEPTH:
        return where, f"is nested more than {MAX_JSON_DEPTH} levels deep"
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return where, "keys must be strings"
            reason = _reason(key)
            if reason:
                return f"{where} key {_shown(key)}", reason
            if _faulty(item, depth + 1):
                return _locate(_shown_path(f"{name}.{key}" if name else key), item, depth + 1)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            if _faulty(item, depth + 1):
                return _locate(f"{name}[{i}]", item, depth + 1)
    return where, _reason(value) or "is not valid"


def _shown(text: str) -> str:
    """A string fit to quote in a message: escapes for what cannot be shown, cut at 60."""
    return ascii(text[:60])


def _shown_path(place: str) -> str:
    """A field path as a message shows it: as it is, or escaped when a key holds what cannot
    be printed."""
    if place.isprintable() and _reason(place) is None and len(place) <= 200:
        return place
    return ascii(place[:200])[1:-1]


_ESCAPES = re.compile(r"\\u(?:[dD][89a-fA-F][0-9a-fA-F]{2}|0000)")
"""An escaped surrogate (a pair is fine, a lone one is not) or NUL in JSON text. Raw NUL and
raw control characters are not JSON; raw surrogates show up as text that is not UTF-8."""
_DIGIT_MAP = bytes(48 if 48 <= i <= 57 else 32 for i in range(256))
_LONG_RUN = b"0" * 19
"""19 digits in a row: an integer that may be past 64 bits (found with bytes.translate and a
substring search, both C loops: a regular expression costs several times a JSON decode)."""


def check_json_text(text: str, data: Any) -> Any:
    """`data`, decoded from the JSON `text`, checked as `check_json` checks it (naming the
    field of the first bad value), but walked only when `text` holds something that may
    decode to such a value: a body with nothing suspect costs a few C scans of its text
    (about a tenth of its decoding)."""
    if _ESCAPES.search(text) is not None:  # a literal prefix: a fast scan
        return check_json("", data)
    if not text.isascii() and not _valid_utf8(text):
        return check_json("", data)
    if _LONG_RUN in text.encode("utf-8", "surrogatepass").translate(_DIGIT_MAP):
        return check_json("", data)
    return data


def _valid_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


MAX_LEARNER_NAME = 64
LEARNER_NAME = re.compile(r"[A-Za-z0-9._:-]{1,64}")
"""A learner name: 1-64 ASCII letters, digits, `.`, `_`, `:` or `-` (no spaces, no controls)."""


def check_learner_name(value: Any) -> str:
    """A learner name in the documented character set, or InvalidInput naming the rule."""
    if value is None:
        raise InvalidInput("a learner name is required")
    if not isinstance(value, str) or not LEARNER_NAME.fullmatch(value):
        shown = repr(value[:80]) if isinstance(value, str) else f"of type {type(value).__name__}"
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


MAX_SEED = 2**63 - 1
"""The largest random seed a simulation or a replay takes (numpy's generators take any
non-negative integer; this keeps it to 64 bits)."""
