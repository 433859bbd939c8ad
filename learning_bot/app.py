"""Wiring: settings -> store (with spool) -> learning services -> command bus."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from learning_bot.bot.bus import DEFAULT_LEARNER, BusSettings, CommandBus, LearnerServices
from learning_bot.engine.errors import Unavailable
from learning_bot.engine.posterior import now_ms
from learning_bot.engine.service import LearningService

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from learning_bot.bot.ports import CommandBatch, SubscriptionStore
    from learning_bot.bot.surface import WorkspaceInstallations
    from learning_bot.engine.config import Phase
    from learning_bot.engine.observing import SpoolByName
    from learning_bot.engine.ports import ObservationWriter, RunWriter, SpoolHealth, Store
    from learning_bot.engine.posterior import WallClock
    from learning_bot.settings import Settings

T = TypeVar("T")


def run_in_background(work: Callable[[], None]) -> None:
    """The services' scheduler: background refreshes run on a daemon thread of their own."""
    threading.Thread(target=work, name="posterior-refresh", daemon=True).start()


@dataclass
class App:
    """Everything a surface needs, and what must be closed at the end."""

    settings: Settings
    store: Store
    writer: RunWriter
    services: LearnerServices
    bus: CommandBus
    engine: Engine | None = None
    """The SQLAlchemy engine, when there is one (surfaces get `installations` over it)."""
    alerts: SubscriptionStore | None = None
    """Subscriptions and alert states (None in the read-only App)."""
    clock: WallClock = now_ms
    """The one clock (Unix ms) the services, the bus and the alert scheduler read the date
    and time from."""

    @property
    def installations(self) -> WorkspaceInstallations | None:
        """Where a surface keeps the workspaces it was installed in (in the project's
        database), or None without one."""
        if self.engine is None:
            return None
        from learning_bot.storage.workspace_installations import SqlWorkspaceInstallations

        return SqlWorkspaceInstallations(self.engine)

    def service(self, learner: str | None = None, *, create: bool = False) -> LearningService:
        """A learner's service; an unknown learner is NotFound unless `create` (a write)."""
        return self.services.get(learner or self.settings.learner, create=create)

    def close(self) -> None:
        close = getattr(self.writer, "close", None)
        if close is not None:
            close()
        self.store.close()


def bus_settings(settings: Settings, *, rate_limit: int | None = None) -> BusSettings:
    return BusSettings(
        admins=settings.admins,
        reward_admins_only=settings.reward_admins_only,
        learners=dict(settings.learners),
        default_learner=settings.learner,
        dashboard_url=settings.dashboard_url,
        rate_limit=settings.rate_limit if rate_limit is None else rate_limit,
        command_lease=settings.command_lease,
    )


def build_app(
    settings: Settings,
    *,
    spool: bool = True,
    serving: bool = False,
    one_shot: bool = False,
    clock: WallClock = now_ms,
) -> App:
    """Everything a surface needs. With `spool`, runs that storage cannot take are kept in a
    local spool and replayed when it is back. A `serving` app (serve, slack, discord run,
    mcp) backs up and upgrades an outdated SQLite file instead of refusing it. A `one_shot`
    app (a command that does one thing and ends) fails at once, Unavailable, when storage
    does not answer; any other starts anyway and checks the schema when it answers. Every
    part reads the date and time from `clock`."""
    from learning_bot.storage import SqlStore
    from learning_bot.storage.alerts import SqlAlertStore
    from learning_bot.storage.command_log import SqlCommandLog

    sql = SqlStore(
        settings.database_url,
        upgrade_sqlite=serving,
        pool=settings.pool,
        wait_for_storage=not one_shot,
    )
    writer: RunWriter = sql
    spooling_writer: ObservationWriter | None = None
    by_name: SpoolByName | None = None
    spooled: SpoolHealth | None = None
    if spool:
        from learning_bot.storage.spool import Spool, default_spool_root
        from learning_bot.storage.spooling_store import SpoolingStore

        limit = round(settings.spool_max_mb * 1024 * 1024)
        config = settings.config

        def opener(name: str, phase: Phase) -> int:
            """Replay opens a learner by name; one it creates (a new database) gets this
            process's settings, as a learner created by a first observe does."""
            return sql.open_learner(name, phase, config.learner_settings(), config.half_life).id

        spooling = SpoolingStore(
            sql,
            Spool(default_spool_root(sql.url), max_bytes=limit),
            adopt_seconds=settings.spool_adopt_seconds if serving else 0.0,
            opener=opener,
        )
        writer, by_name, spooled = spooling, spooling.record_runs_by_name, spooling
        spooling_writer = spooling

    def make(learner: str) -> LearningService:
        return LearningService(
            sql,
            settings.config,
            learner=learner,
            cache_ttl=settings.cache_ttl,
            writer=spooling_writer,
            schedule=run_in_background,
            spool_by_name=by_name,
            spool=spooled,
            prices=settings.prices,
            wall_clock=clock,
        )

    implicit = frozenset({DEFAULT_LEARNER, *settings.learners.values()})
    services = LearnerServices(make, settings.config, names=sql.learner_names, implicit=implicit)
    alerts = SqlAlertStore(sql.engine)
    bus = CommandBus(
        services,
        SqlCommandLog(sql.engine),
        bus_settings(settings),
        subscriptions=alerts,
        clock=clock,
    )
    return App(settings, sql, writer, services, bus, sql.engine, alerts, clock)


def build_read_app(settings: Settings) -> App | None:
    """A read-only App over a SQLite file through the standard library (no SQLAlchemy import),
    for one-shot reads such as `learning-bot status`; None when it cannot serve them (another
    database, a file that does not exist yet, an older schema, an unknown learner)."""
    from learning_bot.engine.config import Phase
    from learning_bot.engine.read_only import ReadOnlyStore
    from learning_bot.storage.lite import LiteReader, NotReadable, sqlite_path
    from learning_bot.storage.location import default_database_url

    path = sqlite_path(settings.database_url or default_database_url())
    if path is None:
        return None
    try:
        reader = LiteReader(path)
    except NotReadable:
        return None
    try:
        reader.open_learner(settings.learner, Phase.PASSIVE)
    except NotReadable:
        reader.close()
        return None

    store = ReadOnlyStore(reader)

    def make(learner: str) -> LearningService:
        return LearningService(
            store, settings.config, learner=learner, cache_ttl=60.0, prices=settings.prices
        )

    services = LearnerServices(make, settings.config)
    bus = CommandBus(services, _NoCommandLog(), bus_settings(settings, rate_limit=0))
    return App(settings, store, store, services, bus)


class _NoCommandLog:
    """The command log of the read-only App: its commands only read, so nothing is logged,
    and anything that would need the log is refused as unavailable."""

    def _refuse(self) -> Unavailable:
        return Unavailable("this read-only view keeps no command log")

    def in_transaction(self, work: Callable[[CommandBatch], T]) -> T:
        raise self._refuse()

    def release_command(self, key: str) -> None:
        raise self._refuse()

    def marking(self, key: str, reply: str) -> AbstractContextManager[None]:
        return nullcontext()  # nothing is claimed here, so there is nothing to mark

    def create_confirmation(self, confirmation: Mapping[str, Any]) -> None:
        raise self._refuse()

    def get_confirmation(self, token: str) -> Mapping[str, Any] | None:
        return None

    def use_confirmation(
        self, token: str, actor_id: str, at: int, lease_ms: int | None = None
    ) -> bool:
        raise self._refuse()

    def finish_confirmation(self, token: str, outcome: str) -> None:
        raise self._refuse()
