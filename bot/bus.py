"""The command bus: one place where `/learning` commands are de-duplicated, rate-limited,
authorised, audited, executed and answered, whatever surface they came from."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from learning_bot.bot import confirmations
from learning_bot.bot.commands.base import Context, UsageError
from learning_bot.bot.commands.registry import (
    asks_confirmation,
    command_from_json,
    command_to_json,
    is_mutating,
    parse_command,
    spec_of,
)
from learning_bot.bot.commands.usage import usage_reply
from learning_bot.bot.errors import FORBIDDEN, NOT_FOUND, UNAVAILABLE, error_kind, user_message
from learning_bot.bot.invocation import Actor, Command, Invocation, check_invocation
from learning_bot.bot.middleware import Call, Middleware
from learning_bot.bot.middleware.audit import Audit
from learning_bot.bot.middleware.authorise import Authorise
from learning_bot.bot.middleware.idempotency import (
    IN_FLIGHT,
    Idempotency,
    ran_mark,
    scoped_key,
    stored_answer,
)
from learning_bot.bot.middleware.rate_limit import RateLimit
from learning_bot.bot.ports import (
    CommandBatch,
    CommandStore,
    PendingConfirmation,
    SubscriptionStore,
)
from learning_bot.bot.replies import Reply, ReplyKind, error_reply
from learning_bot.bot.shapes import reply_json
from learning_bot.bot.subscriptions import SubscriptionHandlers
from learning_bot.engine.bounds import check_learner_name, unknown_learner_message
from learning_bot.engine.config import LearningConfig
from learning_bot.engine.errors import InvalidInput, NotFound, Unavailable
from learning_bot.engine.posterior import WallClock, now_ms
from learning_bot.engine.service import LearningService

log = logging.getLogger("learning_bot.bus")

DEFAULT_LEARNER = "default"
CONFIRMATION_TTL_MS = 15 * 60 * 1000
IN_FLIGHT_WAIT_SECONDS = 2.0
RECORD_PAUSES = (0.25, 0.5, 1.0, 2.0, 4.0)
"""Pauses between attempts to record a command's reply after it changed something, while
storage is unavailable (a database restarting between the change and its record): without
the record, a retry of the same key past its lease would run the command again."""

__all__ = [
    "Actor",
    "BusSettings",
    "CommandBus",
    "Invocation",
    "LearnerServices",
]


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
    command_lease: float = 60.0
    """Seconds an idempotency claim, or a used confirmation, without a reply belongs to the
    process that took it; past that its process is taken to be dead (its transaction rolled
    back) and a retry takes it over and runs the command once."""

    @property
    def lease_ms(self) -> int:
        return max(1, int(self.command_lease * 1000))


class LearnerServices:
    """One LearningService per learner name, created on first use by `factory` and shared.

    With `names` (the stored learners' names), a read (`create=False`) of a learner that does
    not exist yet raises NotFound and creates nothing, unless the name is one of `implicit`
    (the default learner, which every surface shows before anything is written)."""

    def __init__(
        self,
        factory: Callable[[str], LearningService],
        config: LearningConfig,
        *,
        names: Callable[[], Sequence[str]] | None = None,
        implicit: frozenset[str] = frozenset({DEFAULT_LEARNER}),
    ) -> None:
        self.config = config
        self._factory = factory
        self._names = names
        self._implicit = implicit
        self._services: dict[str, LearningService] = {}
        self._lock = threading.Lock()

    def get(self, learner: str, *, create: bool = True) -> LearningService:
        if type(learner) is str:
            # A learner already served (its name was checked then): one lookup, without the
            # lock (entries are only ever added).
            service = self._services.get(learner)
            if service is not None:
                return service
        check_learner_name(learner)
        with self._lock:
            service = self._services.get(learner)
            if service is None:
                if not create and self._names is not None and learner not in self._implicit:
                    known = list(self._names())
                    if learner not in known:
                        raise NotFound(unknown_learner_message(learner, known))
                service = self._factory(learner)
                self._services[learner] = service
            return service

    def names(self) -> list[str]:
        """The learners that exist: those stored, and those loaded in this process."""
        stored = list(self._names()) if self._names is not None else []
        with self._lock:
            return sorted({*stored, *self._services})

    def loaded(self) -> list[LearningService]:
        with self._lock:
            return list(self._services.values())


def _only_asks(call: Call) -> bool:
    """A destructive command without its confirmation, from a caller that is not asked."""
    return not call.invocation.interactive and asks_confirmation(call.command)


class CommandBus:
    """dispatch(invocation) -> Reply, through the middleware chain (idempotency, rate limit,
    authorisation, audit) and the handlers; never raises for anything a user can type."""

    def __init__(
        self,
        services: LearnerServices,
        commands: CommandStore,
        settings: BusSettings | None = None,
        middleware: Sequence[Middleware] = (),
        subscriptions: SubscriptionStore | None = None,
        clock: WallClock = now_ms,
    ) -> None:
        self.services = services
        self.clock = clock
        """The date and time commands, confirmations and audit entries are stamped with."""
        self.commands = commands
        self.settings = settings or BusSettings()
        self.subscriptions = (
            None if subscriptions is None else SubscriptionHandlers(subscriptions, services, clock)
        )
        self.authorise = Authorise(self.settings.admins, self.settings.reward_admins_only)
        self.chain: list[Middleware] = [
            Idempotency(self.settings.lease_ms, clock),
            Audit(clock),
            RateLimit(self.settings.rate_limit, clock),
            self.authorise,
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

    def is_admin(self, invocation: Invocation) -> bool:
        return self.authorise.is_admin(invocation)

    def check_allowed(self, invocation: Invocation, command: Command) -> None:
        """Raise Forbidden when the actor may not run `command` here (for a surface that
        wants to refuse before showing anything, e.g. a confirm button click)."""
        self.authorise.check(invocation, command)

    def dispatch(self, invocation: Invocation) -> Reply:
        """Run one command and answer it."""
        try:
            check_invocation(invocation)
        except InvalidInput as exc:
            return error_reply(str(exc))
        try:
            command = (
                invocation.command
                if not isinstance(invocation.command, str)
                else parse_command(invocation.command)
            )
        except UsageError as exc:
            return usage_reply(str(exc), exc.command, invocation.speaks_as)
        call = Call(invocation, command, self._learner(invocation, command))
        return self._answer(lambda: self._through_chain(call), call)

    def _learner(self, invocation: Invocation, command: Command) -> str:
        """The learner a command names itself, else the invocation's."""
        try:
            named = spec_of(command).learner(command)
        except ValueError:  # not a command: its run says so
            named = None
        return named or self.learner_for(invocation)

    # -- pipeline ------------------------------------------------------------------------------

    def _through_chain(self, call: Call) -> Reply:
        chain = self.chain
        # A question answered to a caller that confirms on its own side (not interactive) does
        # nothing and stores nothing: no audit, rate-limit or idempotency row.
        stored = [] if _only_asks(call) else [m for m in chain if m.touches_store(call)]

        def before(batch: CommandBatch | None) -> Reply | None:
            for middleware in chain:
                early = middleware.before(call, batch)
                if early is not None:
                    return early
            return None

        early = self.commands.in_transaction(before) if stored else before(None)
        if early is IN_FLIGHT:
            return self._wait_for_first(call)
        reply = self._answer(lambda: self._marked(call, stored), call) if early is None else early
        # A replayed answer was recorded by its first run; a refusal is recorded like a run.
        if early is None or early.error_code is not None:

            def after(batch: CommandBatch | None) -> None:
                for middleware in reversed(chain):
                    middleware.after(call, reply, batch)

            pauses = RECORD_PAUSES if stored and reply.error_code is None else ()
            for pause in (*pauses, None):
                try:
                    if stored:
                        self.commands.in_transaction(after)
                    else:
                        after(None)
                    break
                except Unavailable:
                    if pause is None:
                        log.warning("could not record the outcome of %r", call.command)
                        break
                    time.sleep(pause)
        return reply

    def _wait_for_first(self, call: Call) -> Reply:
        """The same idempotency key is running elsewhere: wait a little for its reply."""
        key = f"{call.invocation.surface}:{call.invocation.idempotency_key}"[:256]
        deadline = time.monotonic() + IN_FLIGHT_WAIT_SECONDS
        while time.monotonic() < deadline:
            time.sleep(0.05)
            _, stored = self.commands.in_transaction(lambda b: b.claim(key, self.clock()))
            answer = stored_answer(stored, self.clock(), self.settings.lease_ms)
            if answer is not None:
                return answer
        return IN_FLIGHT

    @staticmethod
    def _answer(run: Callable[[], Reply], call: Call) -> Reply:
        """Run, turning every failure into a one-line error reply (never a traceback)."""
        try:
            return run()
        except Exception as exc:
            kind = error_kind(exc)
            if kind.code == "internal":
                log.exception("command failed: %r from %s", call.command, call.invocation.surface)
            message = user_message(exc)
            detail = str(exc) if message != str(exc) else None
            return error_reply(message, code=kind.code, detail=detail)

    # -- execution -----------------------------------------------------------------------------

    def _marked(self, call: Call, stored: Sequence[Middleware]) -> Reply:
        """Run the command; one that changes something under an idempotency claim marks the
        claim in the transaction of its first change (CommandStore.marking)."""
        key = scoped_key(call)
        if key is None or not stored or not is_mutating(call.command):
            return self._execute(call)
        with self.commands.marking(key, ran_mark(self.clock())):
            return self._execute(call)

    def _execute(self, call: Call) -> Reply:
        """The command's own handler, handed this call's context."""
        spec = spec_of(call.command)
        return spec.run(self._context(call, spec.may_create(call.command)), call.command)

    def _context(self, call: Call, create: bool) -> Context:
        invocation = call.invocation
        return Context(
            invocation=invocation,
            learner=call.learner,
            services=self._service,
            ask=lambda prompt: self._ask_confirmation(call, prompt),
            confirm=lambda token: self._confirm(invocation, token),
            cancel=lambda token: self._cancel(invocation, token),
            subscription_handlers=self._subscription_handlers,
            paused_notice=lambda reply: self._paused_notice(reply, invocation),
            dashboard_url=self.settings.dashboard_url,
            create=create,
        )

    def _service(self, learner: str, create: bool) -> LearningService:
        return self.services.get(learner, create=create)

    def _subscription_handlers(self) -> SubscriptionHandlers:
        if self.subscriptions is None:
            raise Unavailable("subscriptions need the database: this view keeps none")
        return self.subscriptions

    def _paused_notice(self, reply: Reply, invocation: Invocation) -> Reply:
        if self.subscriptions is None:
            return reply
        return self.subscriptions.with_paused_notice(reply, invocation)

    def _ask_confirmation(self, call: Call, prompt: Reply) -> Reply:
        if not call.invocation.interactive or prompt.kind is not ReplyKind.CONFIRM:
            return prompt  # the caller confirms on its own side, or nothing to confirm
        import secrets  # with hmac and hashlib: only where a confirmation is stored

        token = secrets.token_urlsafe(18)
        at = self.clock()
        self.commands.create_confirmation(
            PendingConfirmation(
                token=token,
                learner=call.learner,
                actor_id=call.invocation.actor.id,
                surface=call.invocation.surface,
                command=command_to_json(call.command),
                summary=prompt.summary,
                created_at=at,
                expires_at=at + CONFIRMATION_TTL_MS,
            ).to_mapping()
        )
        return confirmations.with_actions(prompt, token)

    def _confirm(self, invocation: Invocation, token: str) -> Reply:
        pending = self._unused(invocation, token)
        if isinstance(pending, Reply):
            return pending
        if self.clock() > pending.expires_at:
            return error_reply("This confirmation has expired; run the command again.")
        command = command_from_json(pending.command)
        self.authorise.check(invocation, command)

        def run() -> Reply:
            spec = spec_of(command)
            confirmed = spec.confirmed(command) if spec.confirmed is not None else command
            call = Call(invocation, confirmed, pending.learner)
            reply = spec.run(self._context(call, spec.may_create(confirmed)), confirmed)
            return confirmations.outcome(reply, invocation.actor)

        return self._spend(invocation, token, pending, run)

    def _cancel(self, invocation: Invocation, token: str) -> Reply:
        pending = self._unused(invocation, token)
        if isinstance(pending, Reply):
            return pending
        return self._spend(
            invocation, token, pending, lambda: confirmations.cancelled(pending, invocation.actor)
        )

    def _unused(self, invocation: Invocation, token: str) -> PendingConfirmation | Reply:
        """The asker's pending confirmation, or the reply that it is missing, someone
        else's, or already answered (a use whose process died past the lease is not)."""
        row = self.commands.get_confirmation(token)
        if row is None:
            return error_reply(
                "This confirmation does not exist (or was already cleaned up).",
                code=NOT_FOUND.code,
            )
        pending = PendingConfirmation.from_mapping(row)
        if pending.actor_id != invocation.actor.id:
            return error_reply(
                "Only the person who asked can confirm or cancel this.", code=FORBIDDEN.code
            )
        if pending.used_at is not None and not _lapsed(
            pending, self.settings.lease_ms, self.clock()
        ):
            return confirmations.already_done(pending)
        return pending

    def _spend(
        self,
        invocation: Invocation,
        token: str,
        pending: PendingConfirmation,
        answer: Callable[[], Reply],
    ) -> Reply:
        """Use the confirmation (once: a second click gets the first one's outcome), answer
        it, and keep that answer as its outcome."""
        lease = self.settings.lease_ms
        if not self.commands.use_confirmation(token, invocation.actor.id, self.clock(), lease):
            return self._already_done(token, pending)
        reply = answer()
        self.commands.finish_confirmation(token, json.dumps(reply_json(reply)))
        return reply

    def _already_done(self, token: str, pending: PendingConfirmation) -> Reply:
        row = self.commands.get_confirmation(token)
        return confirmations.already_done(
            PendingConfirmation.from_mapping(row) if row is not None else pending
        )


def _lapsed(pending: PendingConfirmation, lease_ms: int, now: int) -> bool:
    """A use without an outcome older than the lease at `now`: its process died mid-command."""
    return (
        pending.used_at is not None and pending.outcome is None and pending.used_at < now - lease_ms
    )


UNAVAILABLE_TEXT = UNAVAILABLE.public_message
