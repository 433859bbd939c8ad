"""The composition root: settings -> store -> learning services -> command bus."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from bot.bus import BusSettings, CommandBus, LearnerServices
from bot.settings import Settings
from engine.service import LearningService

if TYPE_CHECKING:
    from storage import SqlStore


@dataclass
class App:
    settings: Settings
    store: object
    services: LearnerServices
    bus: CommandBus

    def service(self, learner: str | None = None) -> LearningService:
        return self.services.get(learner or self.settings.learner)

    def close(self) -> None:
        close = getattr(self.store, "close", None)
        if close is not None:
            close()


def build_app(settings: Settings, *, spool: bool = True) -> App:
    """Everything a surface needs. With `spool`, runs that storage cannot take are kept in a
    local spool and replayed when it is back."""
    from storage import SqlStore

    sql = SqlStore(settings.database_url)
    store: object = sql
    if spool:
        from storage.spool import Spool, SpoolingStore, default_spool_root

        limit = round(settings.spool_max_mb * 1024 * 1024)
        store = SpoolingStore(sql, Spool(default_spool_root(sql.url), max_bytes=limit))
    # SpoolingStore delegates everything but record_runs to the SqlStore it wraps.
    port = cast("SqlStore", store)
    services = LearnerServices(port, settings.config, cache_ttl=settings.cache_ttl)
    bus = CommandBus(
        services,
        port,
        BusSettings(
            admins=settings.admins,
            reward_admins_only=settings.reward_admins_only,
            learners=dict(settings.learners),
            default_learner=settings.learner,
            dashboard_url=settings.dashboard_url,
            rate_limit=settings.rate_limit,
        ),
    )
    return App(settings, store, services, bus)


def build_read_app(settings: Settings) -> App | None:
    """A read-only App over a SQLite file through the standard library (no SQLAlchemy import),
    for one-shot reads such as `learning-bot status`; None when it cannot serve them (another
    database, a file that does not exist yet, an older schema, an unknown learner)."""
    from engine.config import Phase
    from storage.lite import LiteReader, NotReadable, sqlite_path
    from storage.location import default_database_url

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
    port = cast("SqlStore", reader)  # the read methods of the Store port
    services = LearnerServices(port, settings.config, cache_ttl=settings.cache_ttl)
    bus = CommandBus(
        services,
        port,
        BusSettings(
            admins=settings.admins,
            learners=dict(settings.learners),
            default_learner=settings.learner,
            dashboard_url=settings.dashboard_url,
            rate_limit=0,
        ),
    )
    return App(settings, reader, services, bus)
