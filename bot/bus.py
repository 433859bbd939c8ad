"""The command bus: one place where `/learning` commands are authorised, de-duplicated,
audited, executed and answered, whatever surface they came from."""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from bot.commands import (
    CancelCommand,
    Command,
    ConfirmCommand,
    PhaseCommand,
    ResetCommand,
    RewardCommand,
    UsageError,
    is_mutating,
    parse_command,
)
from bot.handlers import Handlers, command_from_json, command_to_json, usage_reply
from bot.replies import Reply, ReplyKind, error_reply
from engine.config import LearningConfig
from engine.errors import Forbidden, LearningError, NotFound, Unavailable
from engine.ports import AuditEntry, CommandStore, PendingConfirmation, Store
from engine.posterior import now_ms
from engine.service import LearningService

log = logging.getLogger("learning_bot.bus")

DEFAULT_LEARNER = "default"
CONFIRMATION_TTL_MS = 15 * 60 * 1000
RATE_WINDOW_MS = 60_000
UNAVAILABLE_TEXT = "Storage is unavailable right now; try again shortly."


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


@dataclass(frozen=True)
class BusSettings:
    """Who may do what, and which learner serves which workspace or guild."""

    admins: frozenset[str] = frozenset()
    """Actor ids (or surface:id) allowed to reset and change phase besides surface admins."""
    reward_admins_only: bool = False
    learners: Mapping[str, str] = field(default_factory=dict)
    """scope (workspace/guild id, or surface:scope) -> learner name; unmapped -> default."""
    default_learner: str = DEFAULT_LEARNER
    dashboard_url: str | None = None
    rate_limit: int = 20
    """Mutating commands one actor may run per minute on one surface; 0 turns it off."""


Next = Callable[[Invocation, Command], Reply]
Middleware = Callable[[Invocation, Command, Next], Reply]


class LearnerServices:
    """One LearningService per learner name, created on first use and shared."""

    def __init__(
        self,
        store: Store,
        config: LearningConfig,
        *,
        cache_ttl: float = 0.5,
        factory: Callable[[str], LearningService] | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self._cache_ttl = cache_ttl
        self._factory = factory
        self._services: dict[str, LearningService] = {}
        self._lock = threading.Lock()

    def get(self, learner: str) -> LearningService:
        with self._lock:
            service = self._services.get(learner)
            if service is None:
                if self._factory is not None:
                    service = self._factory(learner)
                else:
                    service = LearningService(
                        self.store, self.config, learner=learner, cache_ttl=self._cache_ttl
                    )
                self._services[learner] = service
            return service


class CommandBus:
    """dispatch(invocation) -> Reply, through idempotency, authorisation and audit."""

    def __init__(
        self,
        services: LearnerServices,
        commands: CommandStore,
        settings: BusSettings | None = None,
        middleware: Iterable[Middleware] = (),
    ) -> None:
        self.services = services
        self.commands = commands
        self.settings = settings or BusSettings()
        self.handlers = Handlers(self.settings)
        self._chain: list[Middleware] = [
            self._audit,
            self._rate_limit,
            self._authorise,
            *middleware,
        ]

    # -- public --------------------------------------------------------------------------------

    def learner_for(self, invocation: Invocation) -> str:
        if invocation.learner:
            return invocation.learner
        learners = self.settings.learners
        for key in (f"{invocation.surface}:{invocation.scope}", invocation.scope):
            if key in learners:
                return learners[key]
        return self.settings.default_learner

    def service_for(self, invocation: Invocation) -> LearningService:
        return self.services.get(self.learner_for(invocation))

    def dispatch(self, invocation: Invocation) -> Reply:
        """Run one command and answer it; never raises for anything a user can type."""
        try:
            command = (
                invocation.command
                if not isinstance(invocation.command, str)
                else parse_command(invocation.command)
            )
        except UsageError as exc:
            return usage_reply(str(exc), exc.command)
        key = invocation.idempotency_key
        if key:
            scoped = f"{invocation.surface}:{key}"[:256]
            try:
                claim = self.commands.claim_command(scoped, now_ms())
            except Unavailable:
                return error_reply(UNAVAILABLE_TEXT)
            if not claim.new:
                return self._replay(scoped, claim.reply)
            reply = self._guarded(invocation, command)
            try:
                self.commands.finish_command(scoped, json.dumps(reply.to_dict()))
            except LearningError:
                log.warning("could not store the reply of idempotency key %s", scoped)
            return reply
        return self._guarded(invocation, command)

    # -- pipeline ------------------------------------------------------------------------------

    def _replay(self, key: str, stored: str | None) -> Reply:
        deadline = time.monotonic() + 2.0
        while stored is None and time.monotonic() < deadline:
            time.sleep(0.05)
            stored = self.commands.claim_command(key, now_ms()).reply
        if stored is None:
            return Reply(
                ReplyKind.INFO,
                (),
                "This request is already being handled.",
            )
        return Reply.from_dict(json.loads(stored))

    def _guarded(self, invocation: Invocation, command: Command) -> Reply:
        return self._answer(lambda: self._run(0, invocation, command), invocation, command)

    @staticmethod
    def _answer(run: Callable[[], Reply], invocation: Invocation, command: Command) -> Reply:
        """Run, turning every failure into a one-line error reply (never a traceback)."""
        try:
            return run()
        except Unavailable:
            return error_reply(UNAVAILABLE_TEXT)
        except Forbidden as exc:
            return error_reply(str(exc), forbidden=True)
        except LearningError as exc:
            return error_reply(str(exc))
        except Exception:
            log.exception("command failed: %r from %s", command, invocation.surface)
            return error_reply("Something went wrong on our side; the error was logged.")

    def _run(self, index: int, invocation: Invocation, command: Command) -> Reply:
        if index < len(self._chain):
            middleware = self._chain[index]
            return middleware(invocation, command, lambda inv, cmd: self._run(index + 1, inv, cmd))
        return self._execute(invocation, command)

    def _rate_limit(self, invocation: Invocation, command: Command, nxt: Next) -> Reply:
        limit = self.settings.rate_limit
        if (
            limit
            and is_mutating(command)
            and not isinstance(command, ConfirmCommand | CancelCommand)
        ):
            key = f"{invocation.surface}:{invocation.actor.id}"
            now = now_ms()
            count = self.commands.hit_rate_limit(key, RATE_WINDOW_MS, now)
            if count > limit:
                wait = (RATE_WINDOW_MS - now % RATE_WINDOW_MS) // 1000 + 1
                return error_reply(
                    f"That is more than {limit} changes in a minute; try again in {wait} s.",
                    rate_limited=True,
                )
        return nxt(invocation, command)

    def _authorise(self, invocation: Invocation, command: Command, nxt: Next) -> Reply:
        if isinstance(command, ConfirmCommand | CancelCommand):
            return nxt(invocation, command)  # checked against the pending command itself
        self.check_allowed(invocation, command)
        return nxt(invocation, command)

    def check_allowed(self, invocation: Invocation, command: Command) -> None:
        """Raise Forbidden when the actor may not run `command` here."""
        actor = invocation.actor
        if not is_mutating(command):
            return
        if actor.is_guest:
            raise Forbidden("Guests can look at status, but cannot change the learning layer.")
        if isinstance(command, RewardCommand):
            if self.settings.reward_admins_only and not self.is_admin(invocation):
                raise Forbidden("Only admins can give rewards in this workspace.")
            return
        if isinstance(command, ResetCommand | PhaseCommand) and not self.is_admin(invocation):
            what = "reset posteriors" if isinstance(command, ResetCommand) else "change the phase"
            raise Forbidden(
                f"Only admins can {what}. Ask a workspace admin, or have your id added to "
                "the admin allow-list (LEARNING_BOT_ADMINS)."
            )

    def is_admin(self, invocation: Invocation) -> bool:
        actor = invocation.actor
        admins = self.settings.admins
        return actor.is_admin or actor.id in admins or f"{invocation.surface}:{actor.id}" in admins

    def _audit(self, invocation: Invocation, command: Command, nxt: Next) -> Reply:
        reply = self._answer(lambda: nxt(invocation, command), invocation, command)
        if is_mutating(command) or (isinstance(command, PhaseCommand) and command.phase):
            entry = AuditEntry(
                kind="command",
                actor=invocation.actor.id,
                surface=invocation.surface,
                detail={
                    "command": command_to_json(command),
                    "actor_name": invocation.actor.name,
                    "scope": invocation.scope,
                    "conversation": invocation.conversation,
                },
                result=f"{reply.kind.value}: {reply.summary}"[:2000],
                at=now_ms(),
            )
            try:
                self.commands.record_command_audit(self.learner_for(invocation), entry)
            except LearningError:
                log.warning("could not record the audit entry for %r", command)
        return reply

    # -- execution -----------------------------------------------------------------------------

    def _execute(self, invocation: Invocation, command: Command) -> Reply:
        if isinstance(command, ConfirmCommand):
            return self._confirm(invocation, command.token)
        if isinstance(command, CancelCommand):
            return self._cancel(invocation, command.token)
        learner = self.learner_for(invocation)
        service = self.services.get(learner)
        if isinstance(command, ResetCommand) and not command.confirm:
            return self._ask_confirmation(invocation, command, service, learner)
        if isinstance(command, PhaseCommand) and command.phase is not None and not command.confirm:
            if command.phase is service.phase():
                return self.handlers.phase(service, command, invocation.actor)
            return self._ask_confirmation(invocation, command, service, learner)
        return self.handlers.run(service, command, invocation.actor, invocation.conversation)

    def _ask_confirmation(
        self, invocation: Invocation, command: Command, service: LearningService, learner: str
    ) -> Reply:
        prompt = self.handlers.confirmation(service, command)
        token = secrets.token_urlsafe(18)
        at = now_ms()
        self.commands.create_confirmation(
            PendingConfirmation(
                token=token,
                learner=learner,
                actor_id=invocation.actor.id,
                surface=invocation.surface,
                command=command_to_json(command),
                summary=prompt.summary,
                created_at=at,
                expires_at=at + CONFIRMATION_TTL_MS,
            )
        )
        return self.handlers.with_actions(prompt, token)

    def _pending(self, invocation: Invocation, token: str) -> PendingConfirmation:
        pending = self.commands.get_confirmation(token)
        if pending is None:
            raise NotFound("This confirmation does not exist (or was already cleaned up).")
        if pending.actor_id != invocation.actor.id:
            raise Forbidden("Only the person who asked can confirm or cancel this.")
        return pending

    def _confirm(self, invocation: Invocation, token: str) -> Reply:
        pending = self._pending(invocation, token)
        if pending.used_at is not None:
            return self.handlers.already_done(pending)
        if now_ms() > pending.expires_at:
            return error_reply("This confirmation has expired; run the command again.")
        command = command_from_json(pending.command)
        self.check_allowed(invocation, command)
        if not self.commands.use_confirmation(token, invocation.actor.id, now_ms()):
            return self.handlers.already_done(self.commands.get_confirmation(token) or pending)
        service = self.services.get(pending.learner)
        confirmed = _confirmed(command)
        reply = self.handlers.run(service, confirmed, invocation.actor, invocation.conversation)
        reply = self.handlers.outcome(reply, invocation.actor)
        self.commands.finish_confirmation(token, json.dumps(reply.to_dict()))
        return reply

    def _cancel(self, invocation: Invocation, token: str) -> Reply:
        pending = self._pending(invocation, token)
        if pending.used_at is not None:
            return self.handlers.already_done(pending)
        if not self.commands.use_confirmation(token, invocation.actor.id, now_ms()):
            return self.handlers.already_done(self.commands.get_confirmation(token) or pending)
        reply = self.handlers.cancelled(pending, invocation.actor)
        self.commands.finish_confirmation(token, json.dumps(reply.to_dict()))
        return reply


def _confirmed(command: Command) -> Command:
    if isinstance(command, ResetCommand):
        return ResetCommand(arms=command.arms, undo=command.undo, confirm=True)
    if isinstance(command, PhaseCommand):
        return PhaseCommand(command.phase, confirm=True)
    return command
