"""A model of a provider's prompt-prefix cache, for the simulator (docs/sessions.md).

A request's prompt is an ordered list of blocks (tool definitions, the system prompt, the
conversation so far, the new message). A request that comes within `ttl_seconds` of the
previous request of the same session reads from the cache the longest run of leading blocks
it shares with that request (same block, same place) and writes the rest: the cache breakpoint
is the end of the prompt, so the next request can read all of this one. A request after a
longer gap, or the first of a session, writes its whole prompt. With caching off every token
is uncached input. The result is a `Usage`, priced by `engine.cost.prompt_cost` exactly as a
real run's usage is.

Simplifications: only the session's previous request is looked up (a provider may still hold
older prefixes, and the prefix other sessions wrote: sessions that send one identical tool
set share it); each read refreshes the entry's lifetime, as Anthropic's does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from learning_bot.engine.bounds import check_count
from learning_bot.engine.errors import InvalidInput
from learning_bot.engine.usage import Usage


@dataclass(frozen=True, slots=True)
class Block:
    """One piece of a prompt: `key` says what it is (two blocks with the same key and token
    count are the same text), `tokens` what it costs."""

    key: str
    tokens: int

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not self.key:
            raise InvalidInput("a block needs a non-empty key")
        check_count(f"block {self.key[:64]!r} tokens", self.tokens)


@dataclass(frozen=True, slots=True)
class CachedPrompt:
    """What the cache holds for a session: the previous request's blocks and its time."""

    at: float
    blocks: tuple[Block, ...]


@dataclass
class PromptCache:
    """Prefix caches of many sessions, each the blocks of its previous request."""

    ttl_seconds: float = 300.0
    """How long an entry lives after its last write or read (Anthropic: 5 minutes or 1 hour)."""
    enabled: bool = True
    """Whether requests ask for caching at all; off, every prompt token is uncached input."""
    _sessions: dict[str, CachedPrompt] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not self.ttl_seconds >= 0:
            raise InvalidInput(f"ttl_seconds must be >= 0, got {self.ttl_seconds!r}")

    def request(self, session: str, at: float, blocks: Sequence[Block]) -> Usage:
        """Send a prompt for `session` at time `at` (seconds): the usage it is billed for
        (uncached input, cache read, cache write; no output)."""
        prompt = tuple(blocks)
        total = sum(b.tokens for b in prompt)
        if not self.enabled:
            return Usage(input=total)
        previous = self._sessions.get(session)
        read = 0
        if previous is not None and 0 <= at - previous.at <= self.ttl_seconds:
            read = shared_prefix_tokens(previous.blocks, prompt)
        self._sessions[session] = CachedPrompt(at, prompt)
        return Usage(cache_read=read, cache_write=total - read)

    def forget(self, session: str) -> None:
        """Drop a finished session's entry (it would expire anyway)."""
        self._sessions.pop(session, None)


def shared_prefix_tokens(before: Sequence[Block], after: Sequence[Block]) -> int:
    """Tokens of the longest run of leading blocks the two prompts have in common."""
    tokens = 0
    for a, b in zip(before, after, strict=False):
        if a != b:
            break
        tokens += a.tokens
    return tokens
