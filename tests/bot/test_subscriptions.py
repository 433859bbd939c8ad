"""/learning subscribe, unsubscribe and subscriptions through the bus: admins only, audited,
idempotent, stored per channel."""

from __future__ import annotations

from sqlalchemy import select

from learning_bot.bot.bus import Actor, BusSettings, CommandBus, Invocation, LearnerServices
from learning_bot.bot.commands import SubscribeCommand, UnsubscribeCommand, parse_command
from learning_bot.bot.replies import Reply
from learning_bot.engine import LearningConfig, Phase
from learning_bot.engine.service import LearningService
from learning_bot.storage import SqlStore
from learning_bot.storage.alerts import SqlAlertStore
from learning_bot.storage.command_log import SqlCommandLog
from learning_bot.storage.schema import audit_log
from tests.bot.conftest import ADMIN, GUEST, MEMBER


def _bus(store: SqlStore) -> tuple[CommandBus, SqlAlertStore]:
    config = LearningConfig.for_policy("seed", phase=Phase.ACTIVE)

    def make(learner: str) -> LearningService:
        return LearningService(store, config, learner=learner, cache_ttl=0)

    alerts = SqlAlertStore(store.engine)
    services = LearnerServices(make, config, names=store.learner_names)
    bus = CommandBus(services, SqlCommandLog(store.engine), BusSettings(), subscriptions=alerts)
    return bus, alerts


def _say(
    bus: CommandBus, text: str, actor: Actor = ADMIN, key: str | None = None, surface: str = "slack"
) -> Reply:
    return bus.dispatch(
        Invocation(surface, actor, text, scope="T1", conversation="C1", idempotency_key=key)
    )


def test_parser_reads_kinds_and_learners() -> None:
    assert parse_command("subscribe") == SubscribeCommand("alerts", None)
    weekly = SubscribeCommand("digest weekly", "prod")
    assert parse_command("subscribe Digest Weekly prod") == weekly
    assert parse_command("unsubscribe all") == UnsubscribeCommand(None, None)
    for bad in ("subscribe digest", "subscribe digest hourly", "subscribe a b", "subscribe $x"):
        assert _usage(bad)


def _usage(text: str) -> str:
    try:
        parse_command(text)
    except ValueError as exc:
        return str(exc)
    raise AssertionError(f"{text!r} parsed")


def test_admin_subscribes_a_channel_once_and_it_is_audited(store: SqlStore) -> None:
    bus, alerts = _bus(store)
    _say(bus, "reward x good")  # the default learner exists
    reply = _say(bus, "subscribe alerts", key="k1")
    assert reply.ok and reply.data["new"], reply.summary
    assert _say(bus, "subscribe alerts", key="k1") == reply  # the same trigger: replayed
    again = _say(bus, "subscribe alerts", key="k2")
    assert again.ok and not again.data["new"]
    _say(bus, "subscribe digest daily")
    [a, d] = alerts.subscriptions(surface="slack", channel="C1")
    assert (a.kind, a.learner, a.created_by, a.scope) == ("alerts", "default", ADMIN.id, "T1")
    assert d.kind == "digest daily"
    with store.engine.connect() as conn:
        details = [r.detail for r in conn.execute(select(audit_log.c.detail))]
    assert sum("SubscribeCommand" in d for d in details) == 3

    listed = _say(bus, "subscriptions", actor=MEMBER)
    assert listed.ok and [s["kind"] for s in listed.data["subscriptions"]] == [
        "alerts",
        "digest daily",
    ]
    alerts.pause(a.id, "not_in_channel", 5)
    listed = _say(bus, "subscriptions", actor=MEMBER)
    assert "1 paused" in listed.summary
    assert listed.data["subscriptions"][0]["pausedReason"] == "not_in_channel"
    status = _say(bus, "status", actor=MEMBER)
    assert status.data["pausedSubscriptions"] == ["alerts"]
    assert any("not_in_channel" in getattr(b, "text", "") for b in status.blocks)

    gone = _say(bus, "unsubscribe all")
    assert gone.ok and gone.data["removed"] == 2
    assert alerts.subscriptions() == []


def test_members_guests_unknown_learners_and_other_surfaces_are_refused(store: SqlStore) -> None:
    bus, alerts = _bus(store)
    _say(bus, "reward x good")
    assert _say(bus, "subscribe", actor=MEMBER).error_code == "forbidden"
    assert _say(bus, "unsubscribe", actor=GUEST).error_code == "forbidden"
    missing = _say(bus, "subscribe alerts nosuch")
    assert missing.error_code == "not_found" and "nosuch" in missing.summary
    assert not _say(bus, "subscribe", surface="http").ok
    assert alerts.subscriptions() == []
