"""`/learning config`: a learner's stored settings shown and changed through the command bus
(one validation with `learning-bot learner set`), audited, idempotent and for admins; and the
command log's leases (a claim or a confirmation whose process died is taken over once)."""

from __future__ import annotations

import json

from sqlalchemy import select, update

from learning_bot.bot.bus import BusSettings, CommandBus
from learning_bot.bot.commands import ConfigCommand, ConfirmCommand, UsageError, parse_command
from learning_bot.bot.replies import ReplyKind
from learning_bot.bot.shapes import reply_json
from learning_bot.engine import Phase
from learning_bot.engine.posterior import now_ms
from learning_bot.storage import SqlStore
from learning_bot.storage.command_log import SqlCommandLog
from learning_bot.storage.schema import audit_log, command_results, confirmations, learners

from .conftest import ADMIN, GUEST, MEMBER, Actor, Invocation, make_bus, say

LISTED = Actor("U-listed", "Lee")


def test_parse_config() -> None:
    assert parse_command("config") == ConfigCommand()
    assert parse_command("config halfLife 50") == ConfigCommand((("halfLife", 50),))
    assert parse_command("config policy seed other") == ConfigCommand(
        (("policy", "seed"),), "other"
    )
    assert parse_command("config seedArms '[\"tool:a\"]'") == ConfigCommand(
        (("seedArms", ["tool:a"]),)
    )
    for bad, words in (
        ("config halfLife", "needs a value"),
        ("config phase active", "own command"),
        ("config a 1 b c", "unexpected 'c'"),
    ):
        try:
            parse_command(bad)
        except UsageError as exc:
            assert words in str(exc) and exc.command == "config"
        else:
            raise AssertionError(bad)


def test_show_change_idempotent_and_audited(bus: CommandBus, store: SqlStore) -> None:
    shown = say(bus, "config")
    assert shown.kind is ReplyKind.INFO and shown.data["settings"]["policy"] == "seed"
    assert "phase" not in shown.data["settings"]
    changed = say(bus, "config halfLife 50", key="k1")
    assert changed.kind is ReplyKind.OK, changed.summary
    assert changed.data["changed"] == ["halfLife"]
    assert "halfLife 20 -> 50" in changed.summary or "-> 50" in changed.summary
    # Stored with the learner: a fresh service (another replica) reads it.
    with store.engine.connect() as conn:
        stored = conn.execute(select(learners.c.settings).where(learners.c.name == "default"))
        assert json.loads(stored.scalar_one())["halfLife"] == 50
    again = say(bus, "config halfLife 50", key="k2")
    assert again.kind is ReplyKind.INFO and again.data["changed"] == []
    assert "nothing changed" in again.summary
    replay = say(bus, "config halfLife 50", key="k1")  # the same key: the first reply
    assert reply_json(replay) == reply_json(changed)
    with store.engine.connect() as conn:
        results = [
            r.result.split(":")[0]
            for r in conn.execute(
                select(audit_log).where(audit_log.c.kind == "command").order_by(audit_log.c.id)
            )
        ]
    assert results == ["ok", "info"]


def test_refused_values_and_actors(bus: CommandBus) -> None:
    for text, words in (
        ("config halfLife -3", "halfLife"),
        ("config policy nonsense", "policy: must be one of"),
        ("config nonsense 1", "unknown setting"),
    ):
        reply = say(bus, text)
        assert reply.kind is ReplyKind.ERROR and words in reply.summary, reply.summary
    assert say(bus, "config halfLife 50", actor=MEMBER).error_code == "forbidden"
    assert say(bus, "config halfLife 50", actor=GUEST).error_code == "forbidden"
    assert say(bus, "config", actor=GUEST).kind is ReplyKind.INFO
    assert say(bus, "config").data["settings"]["halfLife"] != 50


def test_naming_a_learner_in_chat_needs_the_allow_list(store: SqlStore) -> None:
    bus = make_bus(store, BusSettings(admins=frozenset({"U-listed"})))
    chat = Invocation("slack", ADMIN, "config halfLife 40 other", scope="T1")
    assert bus.dispatch(chat).error_code == "forbidden"
    listed = Invocation("slack", Actor("U-listed", "Lee", is_admin=True), chat.command, scope="T1")
    reply = bus.dispatch(listed)
    assert reply.kind is ReplyKind.OK and reply.data["learner"] == "other"
    assert bus.services.get("default").config.half_life != 40


def test_a_claim_whose_process_died_is_taken_over_once(store: SqlStore) -> None:
    bus = make_bus(store, BusSettings(command_lease=5.0))
    log = SqlCommandLog(store.engine)
    # A process claimed the key and died before answering.
    assert log.in_transaction(lambda b: b.claim("test:k9", 1_000, 5_000)) == (True, None)
    # Within the lease, another claim waits for it ...
    assert log.in_transaction(lambda b: b.claim("test:k9", 5_000, 5_000)) == (False, None)
    with store.engine.begin() as conn:  # ... long past it, the claim has lapsed
        conn.execute(update(command_results).values(created_at=1_000))
    first = say(bus, "config halfLife 30", key="k9")
    assert first.kind is ReplyKind.OK, first.summary
    second = say(bus, "config halfLife 30", key="k9")
    assert reply_json(second) == reply_json(first)


def test_a_confirmation_used_by_a_dead_process_is_taken_over(store: SqlStore) -> None:
    bus = make_bus(store, BusSettings(command_lease=5.0))
    prompt = say(bus, "phase passive")
    token = prompt.actions[0].token
    log = SqlCommandLog(store.engine)
    # A dying process marked it used and never wrote the outcome.
    assert log.use_confirmation(token, ADMIN.id, now_ms())
    fresh = say(bus, ConfirmCommand(token))
    assert fresh.kind is ReplyKind.INFO  # within the lease: taken as done elsewhere
    with store.engine.begin() as conn:
        conn.execute(update(confirmations).values(used_at=10_000))
    done = say(bus, ConfirmCommand(token))
    assert done.kind is ReplyKind.OK and done.data["phase"] == "passive"
    assert bus.services.get("default").phase() is Phase.PASSIVE
    assert say(bus, ConfirmCommand(token)).data.get("alreadyDone") is True
    row = log.get_confirmation(token)
    assert row is not None and json.loads(row["outcome"])


def test_purge_on_a_schedule(store: SqlStore) -> None:
    from learning_bot.cli.serve import start_purging

    log = SqlCommandLog(store.engine)
    log.in_transaction(lambda b: b.claim("test:old", 1, None))
    stop = start_purging(log, every=0.05)
    try:
        import time

        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with store.engine.connect() as conn:
                if conn.execute(select(command_results)).first() is None:
                    break
            time.sleep(0.02)
        else:
            raise AssertionError("the old key was never purged")
    finally:
        stop.set()
