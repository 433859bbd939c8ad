"""The contract every surface implements, so the server can run any mix of them.

A surface translates its native input (a Slack slash command, a Discord interaction, an MCP
tool call, a line typed at the console) into an `Invocation` for the command bus, and the
bus's `Reply` back into native output. The composition root builds the configured surfaces
and hands them to the HTTP server, which mounts their routes and runs them side by side.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class Surface(Protocol):
    """A surface that runs beside the HTTP server.

    - `name` shows in logs and in "live surfaces: ...".
    - `routes` are ASGI routes (Starlette `Route`/`Mount` objects) the HTTP server mounts,
      e.g. Slack's POST /slack/events; empty for a surface that only connects out.
    - `run()` serves until `stop()` is called and then returns; raising means the surface
      failed, and the server stops and exits non-zero naming it.
    - `stop()` ends `run()` and lets answers already on their way go out.
    """

    @property
    def name(self) -> str: ...

    @property
    def routes(self) -> Sequence[object]: ...

    async def run(self) -> None: ...

    async def stop(self) -> None: ...
