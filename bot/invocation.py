"""Who asks, from where, for what: the bus's input from every surface."""

from __future__ import annotations

from dataclasses import dataclass

from learning_bot.bot.commands import Command
from learning_bot.engine.bounds import check_text


@dataclass(frozen=True, slots=True)
class Actor:
    """Who typed the command, and what their surface says about them."""

    id: str
    name: str = ""
    is_admin: bool = False
    is_guest: bool = False

    @property
    def display(self) -> str:
        return self.name or self.id


@dataclass(frozen=True, slots=True)
class Invocation:
    """One command from one surface."""

    surface: str
    actor: Actor
    command: Command | str
    """A parsed command, or the raw text after `/learning` (parsed by the bus)."""
    scope: str = ""
    """Workspace or guild id; mapped to a learner by configuration."""
    conversation: str = ""
    """Channel or thread: `reward` without an arm credits this conversation's latest run."""
    idempotency_key: str | None = None
    """The same key twice runs once and returns the first reply (trigger or interaction id)."""
    learner: str | None = None
    """Names the learner directly (the HTTP API's ?learner=), bypassing the scope mapping."""
    wording: str = ""
    """The surface whose idiom the reply's command hints use (`learning-bot ...` for a
    terminal, `/learning ...` in chat); empty: the invoking surface's own."""
    interactive: bool = True
    """False for surfaces that cannot show confirm buttons (an API client confirms on its own
    side): a destructive command without `confirm` then gets the confirmation text back,
    and nothing is stored for it."""

    @property
    def speaks_as(self) -> str:
        """The surface whose wording replies take."""
        return self.wording or self.surface


def check_invocation(invocation: Invocation) -> None:
    """Every string an invocation carries (the command's text, who, where, the keys) is one
    every backend stores (engine.bounds.check_text): InvalidInput naming the first that is
    not, before it is parsed, audited or stored."""
    actor = invocation.actor
    fields = (
        ("text", invocation.command if isinstance(invocation.command, str) else ""),
        ("actor", actor.id),
        ("actor name", actor.name),
        ("scope", invocation.scope),
        ("conversation", invocation.conversation),
        ("idempotency key", invocation.idempotency_key or ""),
        ("learner", invocation.learner or ""),
    )
    for name, value in fields:
        check_text(name, value)
