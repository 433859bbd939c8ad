"""What a select knows about the request (docs/context.md): the user's message, the
channel, the model and the tools called so far, checked once and turned into the few things the
context-aware policy reads: the message's words (for lexical relevance, in memory only) and
hashed features (what is learned and stored). The message text itself is never stored: a run's
stored context keeps the other fields and, for the message, its length only."""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from learning_bot.engine.bounds import check_text
from learning_bot.engine.errors import InvalidInput

MAX_MESSAGE_CHARS = 16_000
"""A request's message (`context.message`) at most: longer ones are refused, not cut."""
MAX_TOOLS_CALLED = 256
"""Names in `context.tools_called` at most."""
MAX_TOOL_NAME_CHARS = 128
MAX_CONTEXT_FIELD_CHARS = 256
"""`channel` and `model` at most."""
MAX_MESSAGE_FEATURES = 48
"""Distinct message words that become learned features, at most (the first ones met)."""

MESSAGE_KEYS = ("message",)
_TOOLS_KEYS = ("tools_called", "toolsCalled")

_IDENTIFIER = re.compile(r"[A-Za-z0-9]+(?:_+[A-Za-z0-9]+)*")
"""A word as a user writes it: letters and digits, snake_case joints included."""
_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]*[a-z0-9]+|[A-Z0-9]+")
"""The parts of an identifier at its camelCase joints; letters and digits written together
stay together (`k8s`, `S3`, `gpt4o`, `getS3Object` -> get, S3, Object)."""
MAX_WORD_CHARS = 64
"""A word longer than this (a hash, an encoded blob) is no feature and no relevance term."""
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "can",
        "could",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "he",
        "her",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "no",
        "not",
        "of",
        "on",
        "or",
        "our",
        "please",
        "she",
        "so",
        "some",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "too",
        "up",
        "us",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "will",
        "with",
        "would",
        "you",
        "your",
        "also",
        "just",
        "now",
        "then",
        "after",
        "before",
        "all",
        "any",
        "each",
        "other",
        "same",
        "such",
        "only",
        "own",
        "very",
    ]
)


def words(text: str) -> list[str]:
    """The words of a text as relevance and features read them (`terms`, the form they are
    matched by)."""
    return [key for key, _ in terms(text)]


def terms(text: str) -> list[tuple[str, str]]:
    """The words of a text, each as (the form it is matched by, the form it was written in,
    lower-cased). A word is a run of letters and digits, so alphanumeric words stay whole
    (`k8s`, `s3`, `ec2`, `gpt4o`, `x86`); a snake_case or camelCase identifier counts whole
    and by its parts (`s3_upload`: s3_upload, s3, upload). Stop words and one-character
    words are left out, and a letters-only word loses a plural or -ing/-ed ending in the
    matched form (so "files" and "file" meet); a word with digits or an identifier whole is
    matched as written."""
    out: list[tuple[str, str]] = []
    for identifier in _IDENTIFIER.findall(text):
        if len(identifier) <= MAX_WORD_CHARS:
            out.extend(_identifier_terms(identifier))
        else:
            out.extend(_split_identifier(identifier))
    return out


def _split_identifier(identifier: str) -> tuple[tuple[str, str], ...]:
    """`terms` of one identifier."""
    if "_" not in identifier and (identifier[1:].islower() or identifier.isdigit()):
        # one part (no joint inside): most words
        w = identifier.lower()
        if 1 < len(w) <= MAX_WORD_CHARS and w not in _STOP:
            return ((stem(w) if w.isalpha() else w, w),)
        return ()
    out: list[tuple[str, str]] = []
    parts = [p for segment in identifier.split("_") for p in _PART.findall(segment)]
    if len(parts) > 1:
        whole = identifier.lower()
        if len(whole) <= MAX_WORD_CHARS:
            out.append((whole, whole))
    for part in parts:
        w = part.lower()
        if len(w) < 2 or len(w) > MAX_WORD_CHARS or w in _STOP:
            continue
        out.append((stem(w) if w.isalpha() else w, w))
    return tuple(out)


_identifier_terms = functools.lru_cache(maxsize=16_384)(_split_identifier)
"""`_split_identifier` memoised, for identifiers of at most MAX_WORD_CHARS (words repeat
across messages; the bound keeps the cache to a few MB)."""


def stem(word: str) -> str:
    """A light suffix stripper (English plurals, -ing, -ed): enough for tool names and requests."""
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith("ed"):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


@functools.lru_cache(maxsize=65_536)
def feature_hash(kind: str, value: str) -> int:
    """A feature's stored key: 63 bits of BLAKE2b over its kind and value (what is stored
    instead of the text, so a message cannot be read back). Memoised: the words of requests
    repeat."""
    digest = hashlib.blake2b(f"{kind}\x1f{value}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


@functools.lru_cache(maxsize=1_024)
def message_words(message: str) -> tuple[str, ...]:
    """`words(message)`, memoised for the few messages a select and its draw read again."""
    return tuple(key for key, _ in message_terms(message))


@functools.lru_cache(maxsize=1_024)
def message_terms(message: str) -> tuple[tuple[str, str], ...]:
    """`terms(message)`, memoised."""
    return tuple(terms(message))


@functools.lru_cache(maxsize=1_024)
def written_features(message: str) -> tuple[tuple[int, str], ...]:
    """The message's word features (`opening_features`) each with the form it was written in
    (the first one met): what explanations name a feature by (engine.feature_words)."""
    out: list[tuple[int, str]] = []
    seen: set[str] = set()
    for key, written in message_terms(message) if message else ():
        if key not in seen:
            seen.add(key)
            out.append((feature_hash("w", key), written))
            if len(out) >= MAX_MESSAGE_FEATURES:
                break
    return tuple(out)


@functools.lru_cache(maxsize=1_024)
def opening_features(message: str) -> tuple[int, ...]:
    """A message's distinct words as hashed features (at most MAX_MESSAGE_FEATURES), in the
    order they come: what a session keeps of its opening message (never the text)."""
    return tuple(feature for feature, _ in written_features(message))


@dataclass(frozen=True, slots=True)
class RequestContext:
    """The request a select is made for. Every field may be empty."""

    message: str = ""
    channel: str = ""
    model: str = ""
    tools_called: tuple[str, ...] = ()
    opening: tuple[int, ...] = ()
    """The word features of the session's opening message (`opening_features`), which a
    session-stable set was decided on: a later turn of the session learns under them too, so
    the evidence says which tools sessions opened this way go on to use (the set is decided
    once, on the opening, and must serve the whole session)."""

    @classmethod
    def of(cls, context: Mapping[str, Any] | None) -> RequestContext | None:
        """The request context in a select's `context` mapping, checked (InvalidInput names the
        field); None when it carries none of the fields (a select as before)."""
        if context is None:
            return None
        if not isinstance(context, Mapping):
            raise InvalidInput(f"context must be an object, got {type(context).__name__}")
        message = _text(context, MESSAGE_KEYS, MAX_MESSAGE_CHARS)
        channel = _text(context, ("channel",), MAX_CONTEXT_FIELD_CHARS)
        model = _text(context, ("model",), MAX_CONTEXT_FIELD_CHARS)
        tools = _names(
            context, _TOOLS_KEYS, "context.tools_called", "tool names", MAX_TOOL_NAME_CHARS
        )
        if not (message or channel or model or tools):
            return None
        return cls(message, channel, model, tools)

    def message_words(self) -> tuple[str, ...]:
        return message_words(self.message) if self.message else ()

    def features(self) -> npt.NDArray[np.int64]:
        """The hashed features learned per arm: the words of the session's opening message
        (`opening`, as `opening_features` hashed them) and then this message's, distinct, at
        most MAX_MESSAGE_FEATURES in all; the previous tool, the channel and the model."""
        keys: list[int] = list(self.opening[:MAX_MESSAGE_FEATURES])
        seen = set(keys)
        for key in opening_features(self.message):
            if len(keys) >= MAX_MESSAGE_FEATURES:
                break
            if key not in seen:
                seen.add(key)
                keys.append(key)
        if self.tools_called:
            keys.append(feature_hash("prev", self.tools_called[-1]))
        if self.channel:
            keys.append(feature_hash("ch", self.channel))
        if self.model:
            keys.append(feature_hash("model", self.model))
        return np.array(keys, dtype=np.int64)


def _text(context: Mapping[str, Any], keys: tuple[str, ...], limit: int) -> str:
    value = next((context[k] for k in keys if k in context), None)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInput(f"context.{keys[0]} must be a string, got {type(value).__name__}")
    check_text(f"context.{keys[0]}", value, limit)
    return value


def stored_context(context: Mapping[str, Any]) -> dict[str, Any]:
    """The context as a run keeps it: the message replaced by its length in characters
    (`message_chars`), everything else as given."""
    out = {k: v for k, v in context.items() if k not in MESSAGE_KEYS}
    message = context.get("message")
    if isinstance(message, str):
        out["message_chars"] = len(message)
    return out


LOADED_KEYS = ("loaded", "deferred_loaded", "deferredLoaded")
"""Where a run report's context names the deferred arms the model loaded through tool search."""


def loaded_arms(context: Mapping[str, Any]) -> tuple[str, ...]:
    """The deferred arms (ids or tool names) a run report says the model loaded."""
    return _names(
        context, LOADED_KEYS, "context.loaded", "arm ids or tool names", MAX_TOOL_NAME_CHARS * 2
    )


def _names(
    context: Mapping[str, Any], keys: Sequence[str], where: str, what: str, max_chars: int
) -> tuple[str, ...]:
    """The list of names under the first of `keys` in `context` (none when it has none), at
    most MAX_TOOLS_CALLED of them, each a string of at most `max_chars`; InvalidInput naming
    `where` otherwise."""
    raw = next((context[k] for k in keys if k in context), None)
    if raw is None:
        return ()
    if not isinstance(raw, list | tuple):
        raise InvalidInput(f"{where} must be an array of {what}")
    if len(raw) > MAX_TOOLS_CALLED:
        raise InvalidInput(f"{where}: at most {MAX_TOOLS_CALLED} names")
    for i, name in enumerate(raw):
        if not isinstance(name, str):
            raise InvalidInput(f"{where}[{i}] must be a string")
        check_text(f"{where}[{i}]", name, max_chars)
    return tuple(raw)
