"""Requests grouped into conversations, in one pass and bounded memory.

A conversation is the run of requests whose messages extend one another: request i+1's
messages start with request i's messages (then the reply and what followed it). Each open
conversation keeps only its current state: how many messages its latest request sent and a
digest of them. A new request's prefixes are digested as it is read, and it continues the
open conversation whose state is its longest matching prefix (its whole message list too: a
retry of the same request); a Responses API request naming `previous_response_id` continues the
conversation of that reply. Anything else starts a conversation.

Prompt-cache markers (`cache_control`) move to the newest message from one request to the
next, so they are left out of the digest, and so are system and developer messages (which
may change between requests, e.g. with the date). A conversation idle for longer than
`IDLE_MS` is closed, and at most `max_open` stay open (the one idle the longest is closed
first), so memory does not grow with the file. A transcript names its session: its runs need
no matching.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from learning_bot.replay.formats import Exchange

MAX_OPEN = 20_000
"""Conversations kept open at most (each costs a few hundred bytes)."""


IDLE_MS = 3_600_000
"""A conversation idle for longer (an hour, past every provider's prompt-cache lifetime) is
closed: a request continuing it after that starts a new one, as selection would draw anew."""


@dataclass(slots=True)
class Conversation:
    """One open conversation: its key and current state."""

    key: str
    state: tuple[int, bytes] | None = None
    response_id: str = ""
    last_seen: int = 0
    runs: int = 0
    """Runs read in it so far."""


def _clean(item: Any) -> Any:
    if isinstance(item, Mapping):
        return {k: _clean(v) for k, v in item.items() if k != "cache_control"}
    if isinstance(item, list):
        return [_clean(v) for v in item]
    return item


def prefix_digests(messages: Sequence[Any]) -> list[bytes]:
    """digests[j]: the digest of messages[: j + 1]."""
    h = hashlib.blake2b(digest_size=16)
    out: list[bytes] = []
    for item in messages:
        text = json.dumps(item, sort_keys=True, separators=(",", ":"))
        if '"cache_control"' in text:
            text = json.dumps(_clean(item), sort_keys=True, separators=(",", ":"))
        h.update(text.encode())
        h.update(b"\x1e")
        out.append(h.digest())
    return out


def _turns(exchange: Exchange) -> list[Any]:
    """The messages that make the conversation: a system or developer message (which may
    change from one request to the next, e.g. with the date) is left out."""
    return [
        m
        for m in exchange.messages
        if not (isinstance(m, Mapping) and m.get("role") in ("system", "developer"))
    ]


class Conversations:
    """Finds the conversation each exchange belongs to."""

    def __init__(
        self, prefix: str = "replay", max_open: int = MAX_OPEN, idle_ms: int = IDLE_MS
    ) -> None:
        self._prefix = prefix
        self._max_open = max_open
        self._idle_ms = idle_ms
        self._by_state: OrderedDict[tuple[int, bytes], Conversation] = OrderedDict()
        self._by_response: OrderedDict[str, Conversation] = OrderedDict()
        self._named: dict[str, Conversation] = {}
        self.started = 0
        """Conversations started so far."""

    def find(self, exchange: Exchange, now: int, session: str = "") -> Conversation:
        """The conversation of `exchange` sent at `now` (ms): the session the log names, else
        the open conversation it continues, else a new one."""
        self._close_idle(now)
        if session:
            named = self._named.get(session)
            if named is None:
                named = self._named[session] = Conversation(session)
                self.started += 1
            named.last_seen = now
            return named
        found: Conversation | None = None
        if exchange.previous_id:
            found = self._by_response.pop(exchange.previous_id, None)
        digests = [] if exchange.previous_id and found else prefix_digests(_turns(exchange))
        if found is None:
            for j in range(len(digests), 0, -1):
                found = self._by_state.get((j, digests[j - 1]))
                if found is not None:
                    break
        if found is None:
            self.started += 1
            found = Conversation(f"{self._prefix}:{self.started}")
        elif found.state is not None:
            self._by_state.pop(found.state, None)
        if found.response_id:
            self._by_response.pop(found.response_id, None)
        if digests and not exchange.previous_id:  # chained by id: its input holds only new items
            found.state = (len(digests), digests[-1])
            self._by_state[found.state] = found
        if exchange.response_id:
            found.response_id = exchange.response_id
            self._by_response[exchange.response_id] = found
        found.last_seen = now
        for index in (self._by_state, self._by_response):
            while len(index) > self._max_open:
                index.popitem(last=False)
        return found

    @property
    def open(self) -> int:
        """Conversations open now."""
        both = (*self._by_state.values(), *self._by_response.values())
        return len({id(c) for c in both}) + len(self._named)

    def _close_idle(self, now: int) -> None:
        """Forget the conversations idle for longer than `idle_ms` (the indexes are in order of
        last use: the idlest come first)."""
        horizon = now - self._idle_ms
        for index in (self._by_state, self._by_response):
            while index:
                first = next(iter(index.values()))
                if first.last_seen >= horizon:
                    break
                index.popitem(last=False)
