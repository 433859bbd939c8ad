"""SqlAlertStore: subscriptions, alert states, the messages owed to channels and the sender's
lease (bot.ports.SubscriptionStore) on the project's database."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, and_, delete, func, or_, select, update

from learning_bot.engine.alert_records import AlertState, SentMessage, Subscription
from learning_bot.storage.database import reading, with_retries, write_transaction
from learning_bot.storage.schema import (
    alert_leases,
    alert_messages,
    alert_states,
    alert_subscriptions,
)

_SUB = alert_subscriptions.c
_MSG = alert_messages.c


def _subscription(row: Any) -> Subscription:
    return Subscription(
        id=int(row.id),
        surface=row.surface,
        channel=row.channel,
        scope=row.scope,
        learner=row.learner,
        kind=row.kind,
        created_by=row.created_by,
        created_at=int(row.created_at),
        paused_at=row.paused_at,
        paused_reason=row.paused_reason,
        timezone=row.timezone,
    )


class SqlAlertStore:
    """The bot's SubscriptionStore port on a SQLAlchemy engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._insert: Any
        if engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            self._insert = pg_insert
        else:
            from sqlalchemy.dialects.sqlite import insert as sqlite_insert

            self._insert = sqlite_insert

    # -- subscriptions ---------------------------------------------------------------------

    def subscribe(self, subscription: Subscription) -> tuple[Subscription, bool]:
        s = subscription
        target = and_(
            _SUB.surface == s.surface,
            _SUB.channel == s.channel,
            _SUB.learner == s.learner,
            _SUB.kind == s.kind,
        )

        def run() -> tuple[Subscription, bool]:
            with write_transaction(self.engine) as conn:
                stmt = (
                    self._insert(alert_subscriptions)
                    .values(
                        surface=s.surface,
                        channel=s.channel,
                        scope=s.scope,
                        learner=s.learner,
                        kind=s.kind,
                        created_by=s.created_by,
                        created_at=s.created_at,
                        timezone=s.timezone,
                    )
                    .on_conflict_do_nothing()
                    .returning(_SUB.id)
                )
                created = conn.execute(stmt).first() is not None
                if not created:
                    conn.execute(
                        update(alert_subscriptions)
                        .where(target)
                        .values(paused_at=None, paused_reason=None)
                    )
                row = conn.execute(select(alert_subscriptions).where(target)).one()
                return _subscription(row), created

        return with_retries(run)

    def unsubscribe(self, surface: str, channel: str, learner: str, kind: str | None) -> int:
        where = and_(_SUB.surface == surface, _SUB.channel == channel, _SUB.learner == learner)
        if kind is not None:
            where = and_(where, _SUB.kind == kind)

        def run() -> int:
            with write_transaction(self.engine) as conn:
                ids = [r.id for r in conn.execute(select(_SUB.id).where(where))]
                if ids:
                    conn.execute(delete(alert_messages).where(_MSG.subscription_id.in_(ids)))
                    conn.execute(delete(alert_subscriptions).where(_SUB.id.in_(ids)))
                return len(ids)

        return with_retries(run)

    def subscriptions(
        self, *, surface: str | None = None, channel: str | None = None
    ) -> list[Subscription]:
        stmt = select(alert_subscriptions).order_by(_SUB.id)
        if surface is not None:
            stmt = stmt.where(_SUB.surface == surface)
        if channel is not None:
            stmt = stmt.where(_SUB.channel == channel)
        with reading(self.engine) as conn:
            return [_subscription(row) for row in conn.execute(stmt)]

    def pause(self, subscription_id: int, reason: str, at: int) -> bool:
        def run() -> bool:
            with write_transaction(self.engine) as conn:
                done = conn.execute(
                    update(alert_subscriptions)
                    .where(_SUB.id == subscription_id, _SUB.paused_at.is_(None))
                    .values(paused_at=at, paused_reason=reason[:2000])
                ).rowcount
                return bool(done)

        return with_retries(run)

    # -- alert states ----------------------------------------------------------------------

    def alert_states(self, learner: str) -> list[AlertState]:
        c = alert_states.c
        with reading(self.engine) as conn:
            rows = conn.execute(
                select(alert_states).where(c.learner == learner).order_by(c.alert)
            ).all()
        return [
            AlertState(
                r.learner,
                r.alert,
                r.state,
                int(r.episode),
                int(r.first_seen),
                int(r.last_seen),
                r.resolved_at,
                r.detail,
            )
            for r in rows
        ]

    def save_alert_state(self, state: AlertState) -> None:
        values = {
            "learner": state.learner,
            "alert": state.alert,
            "state": state.state,
            "episode": state.episode,
            "first_seen": state.first_seen,
            "last_seen": state.last_seen,
            "resolved_at": state.resolved_at,
            "detail": state.detail,
        }

        def run() -> None:
            with write_transaction(self.engine) as conn:
                stmt = self._insert(alert_states).values(**values)
                stmt = stmt.on_conflict_do_update(
                    index_elements=["learner", "alert"],
                    set_={k: v for k, v in values.items() if k not in ("learner", "alert")},
                )
                conn.execute(stmt)

        with_retries(run)

    # -- messages --------------------------------------------------------------------------

    def claim_message(
        self,
        subscription_id: int,
        alert: str,
        episode: int,
        stage: str,
        holder: str,
        at: int,
        stale_before: int | None = None,
    ) -> bool:
        def run() -> bool:
            with write_transaction(self.engine) as conn:
                stmt = self._insert(alert_messages).values(
                    subscription_id=subscription_id,
                    alert=alert,
                    episode=episode,
                    stage=stage,
                    claimed_by=holder,
                    claimed_at=at,
                )
                if stale_before is None:
                    stmt = stmt.on_conflict_do_nothing()
                else:  # a claim its holder never finished (it stopped mid-send) is taken over
                    stmt = stmt.on_conflict_do_update(
                        index_elements=["subscription_id", "alert", "episode", "stage"],
                        set_={"claimed_by": holder, "claimed_at": at},
                        where=and_(
                            _MSG.sent_at.is_(None),
                            _MSG.error.is_(None),
                            _MSG.claimed_at < stale_before,
                        ),
                    )
                return conn.execute(stmt.returning(_MSG.subscription_id)).first() is not None

        return with_retries(run)

    def release_message(self, subscription_id: int, alert: str, episode: int, stage: str) -> None:
        def run() -> None:
            with write_transaction(self.engine) as conn:
                conn.execute(
                    delete(alert_messages).where(
                        _MSG.subscription_id == subscription_id,
                        _MSG.alert == alert,
                        _MSG.episode == episode,
                        _MSG.stage == stage,
                        _MSG.sent_at.is_(None),
                    )
                )

        with_retries(run)

    def message_sent(
        self,
        subscription_id: int,
        alert: str,
        episode: int,
        stage: str,
        at: int,
        ref: str | None,
        error: str | None = None,
    ) -> None:
        def run() -> None:
            with write_transaction(self.engine) as conn:
                conn.execute(
                    update(alert_messages)
                    .where(
                        _MSG.subscription_id == subscription_id,
                        _MSG.alert == alert,
                        _MSG.episode == episode,
                        _MSG.stage == stage,
                    )
                    .values(sent_at=at, ref=ref, error=None if error is None else error[:2000])
                )

        with_retries(run)

    def sent_message(
        self, subscription_id: int, alert: str, episode: int, stage: str
    ) -> SentMessage | None:
        with reading(self.engine) as conn:
            row = conn.execute(
                select(alert_messages).where(
                    _MSG.subscription_id == subscription_id,
                    _MSG.alert == alert,
                    _MSG.episode == episode,
                    _MSG.stage == stage,
                )
            ).first()
        if row is None:
            return None
        return SentMessage(
            int(row.subscription_id), row.alert, int(row.episode), row.stage, row.sent_at, row.ref
        )

    def sent_since(self, surface: str, channel: str, since: int) -> int:
        stmt = (
            select(func.count())
            .select_from(alert_messages.join(alert_subscriptions, _SUB.id == _MSG.subscription_id))
            .where(_SUB.surface == surface, _SUB.channel == channel, _MSG.claimed_at > since)
        )
        with reading(self.engine) as conn:
            return int(conn.execute(stmt).scalar_one())

    # -- lease -----------------------------------------------------------------------------

    def acquire_lease(self, name: str, holder: str, at: int, ttl_ms: int) -> bool:
        c = alert_leases.c

        def run() -> bool:
            with write_transaction(self.engine) as conn:
                stmt = self._insert(alert_leases).values(
                    name=name, holder=holder, expires_at=at + ttl_ms
                )
                stmt = stmt.on_conflict_do_update(
                    index_elements=["name"],
                    set_={"holder": holder, "expires_at": at + ttl_ms},
                    where=or_(c.holder == holder, c.expires_at < at),
                ).returning(c.holder)
                row = conn.execute(stmt).first()
                return row is not None and row.holder == holder

        return with_retries(run)


__all__ = ["SqlAlertStore"]
