"""Streamed answers: a long answer sent in pieces as they are read, and a bound on how many
are sent at once (each holds a piece in memory while its client reads it)."""

from __future__ import annotations

from collections.abc import AsyncIterable, Callable

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from learning_bot.adapters.http.responses import JsonResponse

RETRY_AFTER_SECONDS = 1


class StreamSlots:
    """At most `limit` streamed answers at once in this process (the setting
    `LEARNING_BOT_MAX_STREAMS`). Taken and given back on the event loop only."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("at least one streamed answer must be allowed")
        self.limit = limit
        self.taken = 0

    def take(self) -> bool:
        """A slot if one is free (give it back with `give_back`), else False."""
        if self.taken >= self.limit:
            return False
        self.taken += 1
        return True

    def give_back(self) -> None:
        self.taken -= 1

    def busy(self) -> JsonResponse:
        """The answer when every slot is taken: 503 with Retry-After."""
        return JsonResponse(
            {"error": f"the server is sending {self.limit} long answers already; retry shortly"},
            503,
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )


class SlotStream(StreamingResponse):
    """A streamed JSON answer that gives its slot back however it ends (sent, the client gone,
    a read failing half-way: the client then sees the answer cut short)."""

    def __init__(self, content: AsyncIterable[bytes], release: Callable[[], None]) -> None:
        super().__init__(content, media_type="application/json")
        self._release: Callable[[], None] | None = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            release, self._release = self._release, None
            if release is not None:
                release()
