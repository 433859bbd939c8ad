"""Requests grouped into conversations, in one pass and bounded memory.

A conversation is the run of requests whose messages extend one another: request i+1's
messages start with request i's messages (then the reply and what followed it). Each open
conversation keeps only its current state: how many messages its latest request sent and a
digest of them. A new request's prefixes are digested as it is read, and it continues the
open conversation whose state is its longest matching prefix (its whole message list too: a
retry of the same request); a Responses API request naming `previous_response_id` continues the
conversation of that reply. Anything else starts a conversation.

Prompt-cache markers (`cache_control`) move to the newest message from one request to the
next, so they are left out of the digest. At most `max_open` conversations stay open; the one
idle the longest is closed first.
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


@dataclass(slots=True)
class _Open:
    key: str
    state: tuple[int, bytes] | None = None
    response_id: str = ""


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


class Conversations:
    """Assigns each exchange the key of the conversation it belongs to."""

    def __init__(self, prefix: str = "replay", max_open: int = MAX_OPEN) -> None:
        self._prefix = prefix
        self._max_open = max_open
        self._by_state: OrderedDict[tuple[int, bytes], _Open] = OrderedDict()
        self._by_response: OrderedDict[str, _Open] = OrderedDict()
        self.started = 0
        """Conversations started so far."""

    def key_of(self, exchange: Exchange, session: str = "") -> str:
        """The conversation key of `exchange` (its file's session when the log names one)."""
        if session:
            return session
        found: _Open | None = None
        if exchange.previous_id:
            found = self._by_response.pop(exchange.previous_id, None)
        digests = [] if exchange.previous_id and found else prefix_digests(exchange.messages)
        if found is None:
            for j in range(len(digests), 0, -1):
                found = self._by_state.get((j, digests[j - 1]))
                if found is not None:
                    break
        if found is None:
            self.started += 1
            found = _Open(f"{self._prefix}:{self.started}")
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
        self._trim()
        return found.key

    @property
    def open(self) -> int:
        return len({id(c) for c in (*self._by_state.values(), *self._by_response.values())})

    def _trim(self) -> None:
        for index in (self._by_state, self._by_response):
            while len(index) > self._max_open:
                index.popitem(last=False)
