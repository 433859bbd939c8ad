"""The contract every surface implements, so the server can run any mix of them.

A surface translates its native input (a Slack slash command, a Discord interaction, an MCP
tool call, a line typed at the console) into an `Invocation` for the command bus, and the
bus's `Reply` back into native output. The composition root builds the configured surfaces
and hands them to the HTTP server, which mounts their routes and runs them side by side.

A surface may also bring its own `learning-bot <name>` subcommand (`SurfaceCommand`); the
composition root adds it to the command line and lends it what it needs (`SurfaceHost`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import argparse

    from learning_bot.bot.bus import CommandBus


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


class SurfaceParts(Protocol):
    """What the composition root builds a surface from (its app): a registry entry's builder
    that needs no more than this can live in the surface's own adapter."""

    @property
    def bus(self) -> CommandBus: ...

    @property
    def engine(self) -> Any:
        """The SQLAlchemy engine of the project's database, or None: where a surface may keep
        tables of its own (Slack's installations)."""
        ...


class SurfaceHost(Protocol):
    """What the composition root lends a surface's own subcommand: the app (built on first use,
    closed when the command ends) and the two ways a surface is run."""

    @property
    def bus(self) -> CommandBus:
        """The command bus of the app, built for serving."""
        ...

    def surface(self) -> Surface:
        """This surface, built from the environment as `learning-bot serve` builds it."""
        ...

    def serve_http(self, surfaces: Sequence[Surface], host: str, port: int) -> int:
        """Serve `surfaces` (and the HTTP API) on host:port until SIGINT or SIGTERM, or until a
        surface fails; the exit code."""
        ...

    def run_alone(self, surface: Surface) -> int:
        """Run one surface that connects out (no port is opened) until SIGINT or SIGTERM."""
        ...


@dataclass(frozen=True)
class SurfaceCommand:
    """A surface's own `learning-bot <name>` subcommand, declared in a module that does not
    import the surface's libraries (the command line is built before any command runs)."""

    name: str
    help: str
    description: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    """Adds the subcommand's own arguments to its parser."""
    run: Callable[[argparse.Namespace, SurfaceHost], int]
    """Runs the subcommand; its exit code."""
    no_url: str
    """Why the global --url (talk to a running server) does not apply to it."""
