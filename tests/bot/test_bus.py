"""The command bus over a real store: authorisation, confirmation, idempotency, audit."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from learning_bot.bot.bus import BusSettings, CommandBus
from learning_bot.bot.commands import CancelCommand, ConfirmCommand
from learning_bot.bot.render_text import render_text
from learning_bot.bot.replies import ReplyKind
from learning_bot.bot.shapes import reply_from_json, reply_json
from learning_bot.engine import Arm, Phase, ReportedArm, RunReport, ToolCall, Usage
from learning_bot.storage import SqlStore
from learning_bot.storage.schema import audit_log

from .conftest import ADMIN, GUEST, MEMBER, Actor, make_bus, say

ARMS = (
    *tuple(Arm(f"tool:t:T{i}", 100) for i in range(8)),
    Arm("tool:web:WebSearch", 300),
    Arm("tool:web:WebFetch", 300),
)


def observe(
    bus: CommandBus, trace: str, used: list[str], conversation: str = "C1", **kw: object
) -> None:
    service = bus.services.get("default")
    service.observe(
        RunReport(
            trace,
            tuple(ReportedArm(a) for a in ARMS),
            tool_calls=tuple(ToolCall(n) for n in used),
            channel=conversation,
            **kw,  # type: ignore[arg-type]
        )
    )


def state(bus: CommandBus) -> tuple[object, ...]:
    service = bus.services.get("default")
    service.refresh(force=True)
    posts = tuple(
        (v.arm_id, v.posterior.alpha, v.posterior.beta, v.posterior.pulls)
        for v in service.posteriors()
    )
    return posts, service.traces(limit=1)[1], service.phase()


def test_status_shows_everything(bus: CommandBus) -> None:
    for i in range(12):
        observe(
            bus,
            f"r{i}",
            [f"T{i % 8}", "WebSearch"],
            is_baseline=i % 3 == 0,
            usage=Usage(input=2000 if i % 3 == 0 else 1200),
        )
    reply = say(bus, "status")
    text = render_text(reply)
    assert reply.kind is ReplyKind.INFO
    assert "[ACTIVE]" in text
    for needle in (
        "Token budget",
        "Baseline rate",
        "Min pulls",
        "Traces",
        "Total tokens",
        "Date range",
    ):
        assert needle in text
    assert "Baseline runs  4 (33.3%)" in text
    assert (
        "Tokens per run, selected against baseline runs: 40.0% fewer (avg 1,200 against 2,000;"
        in text
    )
    assert "stays near zero" not in text
    assert "Top 5 arms by mean" in text and "candidates for exclusion" in text
    assert "tool:web:WebSearch" in text.split("Bottom")[0]
    assert reply.visibility.value == "private"
    assert say(bus, "status public").visibility.value == "public"
    top3 = say(bus, "status top 3")
    assert len(top3.data["top"]) == 3


def test_empty_status_hints(bus: CommandBus) -> None:
    text = render_text(say(bus, ""))
    assert "No traces recorded yet" in text and "learning-bot simulate" in text


def test_status_arm_detail_and_unknown_arm(bus: CommandBus) -> None:
    observe(bus, "a", ["WebSearch"])
    reply = say(bus, "status arm WebSearch")
    assert reply.data["arm"]["armId"] == "tool:web:WebSearch"
    assert "95% interval" in render_text(reply)
    bad = say(bus, "status arm Nope")
    assert bad.kind is ReplyKind.ERROR and "unknown arm 'Nope'" in bad.summary
    ambiguous = say(bus, "status arm Web")
    assert ambiguous.kind is ReplyKind.ERROR and "matches 2 arms" in ambiguous.summary


def test_non_admins_cannot_reset_or_change_phase(bus: CommandBus) -> None:
    observe(bus, "a", ["T1"])
    before = state(bus)
    for text in (
        "reset",
        "reset all confirm",
        "reset undo confirm",
        "phase passive confirm",
        "phase passive",
    ):
        reply = say(bus, text, actor=MEMBER)
        assert reply.kind is ReplyKind.ERROR, text
        assert "Only admins" in reply.summary
    assert state(bus) == before
    assert say(bus, "phase", actor=MEMBER).kind is ReplyKind.INFO
    listed = Actor("U-listed", "Lisa")
    assert say(bus, "reset all confirm", actor=listed).kind is ReplyKind.OK


def test_guests_cannot_change_anything(bus: CommandBus) -> None:
    observe(bus, "a", ["T1"])
    before = state(bus)
    reply = say(bus, "reward T1 good", actor=GUEST)
    assert reply.kind is ReplyKind.ERROR and "Guests" in reply.summary
    assert state(bus) == before
    assert say(bus, "status", actor=GUEST).kind is ReplyKind.INFO


def test_reset_asks_then_runs_exactly_once(bus: CommandBus) -> None:
    observe(bus, "a", ["T1"])
    before = state(bus)
    prompt = say(bus, "reset")
    assert prompt.kind is ReplyKind.CONFIRM
    assert "all 10 arms" in prompt.summary and "reset undo" in render_text(prompt)
    assert [a.command for a in prompt.actions] == ["confirm", "cancel"]
    assert state(bus) == before  # nothing happened yet
    token = prompt.actions[0].token
    other = say(bus, ConfirmCommand(token), actor=Actor("U-admin2", is_admin=True))
    assert other.kind is ReplyKind.ERROR and "Only the person who asked" in other.summary
    assert state(bus) == before
    done = say(bus, ConfirmCommand(token))
    assert done.kind is ReplyKind.OK and done.replaces_prompt and done.confirmed_by == "Ada"
    assert "Confirmed by Ada" in render_text(done)
    after = state(bus)
    assert after[1] == 1 and all(p[1:] == (1.0, 1.0, 0) for p in after[0])  # type: ignore[index]
    again = say(bus, ConfirmCommand(token))
    assert again.kind is ReplyKind.INFO and again.data["alreadyDone"]
    assert "Already done" in again.summary
    assert bus.services.get("default").last_reset().reset_id == 1  # type: ignore[union-attr]
    cancel_late = say(bus, CancelCommand(token))
    assert cancel_late.data.get("alreadyDone")


def test_cancel_changes_nothing(bus: CommandBus) -> None:
    observe(bus, "a", ["T1"])
    before = state(bus)
    prompt = say(bus, "phase passive")
    assert prompt.kind is ReplyKind.CONFIRM
    reply = say(bus, CancelCommand(prompt.actions[0].token))
    assert reply.cancelled and reply.replaces_prompt and state(bus) == before
    assert say(bus, ConfirmCommand(prompt.actions[0].token)).data["alreadyDone"]
    assert state(bus) == before


def test_unknown_token(bus: CommandBus) -> None:
    reply = say(bus, ConfirmCommand("nope"))
    assert reply.kind is ReplyKind.ERROR and "does not exist" in reply.summary


def test_phase_change_and_undo_through_the_bus(bus: CommandBus) -> None:
    observe(bus, "a", ["T1"])
    reply = say(bus, "phase passive confirm")
    assert reply.kind is ReplyKind.OK and reply.data["phase"] == "passive"
    assert bus.services.get("default").phase() is Phase.PASSIVE
    prompt = say(bus, "phase active")
    assert "Warning: only 1 trace" in render_text(prompt)
    same = say(bus, "phase passive")
    assert same.kind is ReplyKind.INFO  # already passive: nothing to confirm
    before = state(bus)
    say(bus, "reset all confirm")
    undo_prompt = say(bus, "reset undo")
    assert undo_prompt.kind is ReplyKind.CONFIRM and "Undo reset #1" in undo_prompt.summary
    say(bus, ConfirmCommand(undo_prompt.actions[0].token))
    assert state(bus) == before
    nothing = say(bus, "reset undo")
    assert nothing.kind is ReplyKind.ERROR and "no reset to undo" in nothing.summary


def test_same_idempotency_key_runs_once(bus: CommandBus) -> None:
    observe(bus, "a", ["T1"])
    first = say(bus, "reward T1 good", actor=MEMBER, key="trigger-1")
    second = say(bus, "reward T1 good", actor=MEMBER, key="trigger-1")
    assert first.kind is ReplyKind.OK
    assert reply_json(second) == reply_json(first)
    post = {p[0]: p for p in state(bus)[0]}  # type: ignore[union-attr]
    assert post["tool:t:T1"][3] == 2  # one observation + one manual reward, not two
    third = say(bus, "reward T1 good", actor=MEMBER, key="trigger-2")
    assert third.kind is ReplyKind.OK
    assert {p[0]: p for p in state(bus)[0]}["tool:t:T1"][3] == 3  # type: ignore[union-attr]


def test_a_reply_lost_to_an_outage_is_recorded_when_storage_answers(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL restarting between a reward's write and the record of its reply: the record
    is tried again, so a retry of the same key gets the first reply and rewards nothing twice
    (before, the claim stayed without a reply and the retry was told it was still running)."""
    from learning_bot.bot import bus as bus_module
    from learning_bot.engine import Unavailable
    from learning_bot.storage.command_log import SqlCommandLog

    monkeypatch.setattr(bus_module, "RECORD_PAUSES", (0.0, 0.0))

    class Restarting(SqlCommandLog):
        """The real command log; its Nth transactions fail as a restarting server's do."""

        calls = 0
        failing: tuple[int, ...] = ()

        def in_transaction(self, work):  # type: ignore[no-untyped-def]
            Restarting.calls += 1
            if Restarting.calls in Restarting.failing:
                raise Unavailable("storage is unavailable: terminating connection")
            return super().in_transaction(work)

    bus = make_bus(store, BusSettings())
    bus.commands = Restarting(store.engine)
    observe(bus, "a", ["T1"])
    Restarting.calls, Restarting.failing = 0, (2, 3)  # the claim passes; two records fail
    first = say(bus, "reward T1 good", actor=MEMBER, key="trigger-1")
    assert first.kind is ReplyKind.OK
    assert Restarting.calls == 4
    again = say(bus, "reward T1 good", actor=MEMBER, key="trigger-1")
    assert reply_json(again) == reply_json(first)
    assert {p[0]: p for p in state(bus)[0]}["tool:t:T1"][3] == 2  # type: ignore[union-attr]


def test_a_command_killed_after_its_change_is_answered_and_never_run_twice(
    store: SqlStore,
) -> None:
    """A replica killed after a reward's write committed and before its reply was recorded:
    the write stored the claim's reply in its own transaction, so the retry that reaches
    another replica past the lease is answered and rewards nothing twice (before, the claim
    stayed without a reply and the retry took it over and rewarded a second time). A command
    killed before its change runs on the retry, once."""
    from learning_bot.storage.command_log import SqlCommandLog

    class Killed(BaseException):
        """The process dying: nothing after it runs."""

    class Dying(SqlCommandLog):
        """The real command log; the process dies before its transaction number `dies_at`
        or just after number `dies_after` commits."""

        calls = 0
        dies_at = dies_after = 0

        def in_transaction(self, work):  # type: ignore[no-untyped-def]
            Dying.calls += 1
            if Dying.calls == Dying.dies_at:
                raise Killed
            done = super().in_transaction(work)
            if Dying.calls == Dying.dies_after:
                raise Killed
            return done

    now = [1_000_000_000_000]
    settings = BusSettings(command_lease=30.0)
    first = make_bus(store, settings)

    def replica(commands: SqlCommandLog) -> CommandBus:
        return CommandBus(first.services, commands, settings, clock=lambda: now[0])

    observe(first, "a", ["T1"])
    pulls = {p[0]: p[3] for p in state(first)[0]}  # type: ignore[union-attr]

    # Killed after the change: transaction 1 is the claim, then the reward's own write,
    # then transaction 2 would record the reply.
    Dying.calls, Dying.dies_at = 0, 2
    with pytest.raises(Killed):
        say(replica(Dying(store.engine)), "reward T1 good", actor=MEMBER, key="trigger-1")
    after_kill = {p[0]: p[3] for p in state(first)[0]}  # type: ignore[union-attr]
    assert after_kill["tool:t:T1"] == pulls["tool:t:T1"] + 1
    now[0] += 1_000  # within the lease the command may still be running: it is not answered
    waiting = say(
        replica(SqlCommandLog(store.engine)), "reward T1 good", actor=MEMBER, key="trigger-1"
    )
    assert "already being handled" in render_text(waiting)
    now[0] += 30_000  # past the lease, on another replica
    again = say(
        replica(SqlCommandLog(store.engine)), "reward T1 good", actor=MEMBER, key="trigger-1"
    )
    assert again.kind is ReplyKind.OK and "ran once" in again.summary
    assert {p[0]: p[3] for p in state(first)[0]}["tool:t:T1"] == after_kill["tool:t:T1"]  # type: ignore[union-attr]

    # Killed after its claim, before any change: a retry within the lease is told it is
    # being handled; one past the lease takes the claim over and runs it, once.
    Dying.calls, Dying.dies_at, Dying.dies_after = 0, 0, 1
    with pytest.raises(Killed):
        say(replica(Dying(store.engine)), "reward T2 good", actor=MEMBER, key="trigger-2")
    now[0] += 1_000
    waiting = say(
        replica(SqlCommandLog(store.engine)), "reward T2 good", actor=MEMBER, key="trigger-2"
    )
    assert "already being handled" in render_text(waiting)
    assert {p[0]: p[3] for p in state(first)[0]}["tool:t:T2"] == pulls["tool:t:T2"]  # type: ignore[union-attr]
    now[0] += 31_000
    retried = say(
        replica(SqlCommandLog(store.engine)), "reward T2 good", actor=MEMBER, key="trigger-2"
    )
    assert retried.kind is ReplyKind.OK and "ran once" not in retried.summary
    twice = say(
        replica(SqlCommandLog(store.engine)), "reward T2 good", actor=MEMBER, key="trigger-2"
    )
    assert reply_json(twice) == reply_json(retried)
    final = {p[0]: p[3] for p in state(first)[0]}  # type: ignore[union-attr]
    assert final["tool:t:T2"] == pulls["tool:t:T2"] + 1


def test_reward_without_arm_credits_latest_run_here(bus: CommandBus) -> None:
    observe(bus, "old", ["T2"], conversation="C7", timestamp=1)
    observe(bus, "new", ["T3", "WebFetch"], conversation="C7", timestamp=2)
    before = {p[0]: p for p in state(bus)[0]}  # type: ignore[union-attr]
    reply = say(bus, "reward good thanks", actor=MEMBER, conversation="C7")
    assert reply.kind is ReplyKind.OK
    assert set(reply.data["armIds"]) == {"tool:t:T3", "tool:web:WebFetch"}
    after = {p[0]: p for p in state(bus)[0]}  # type: ignore[union-attr]
    assert after["tool:t:T3"][1] == before["tool:t:T3"][1] + 1
    assert after["tool:t:T2"] == before["tool:t:T2"]
    empty = say(bus, "reward", actor=MEMBER, conversation="nowhere")
    assert empty.kind is ReplyKind.ERROR and "no run has been recorded" in empty.summary


BAD = [
    "foo",
    "reward 2",
    "reward Nope good",
    "reward Web good",
    "reset foo:bar confirm",
    "reset tool:none:Missing confirm",
    '""',
    "x" * 10_000,
    "status arm Nope",
    "phase turbo confirm",
    "reward \u0442\u04301 good",
    "reward `T1` good",
    "reward <!channel> good",
    "reward @everyone good",
]


@pytest.mark.parametrize("text", BAD)
def test_bad_input_gets_an_error_and_changes_nothing(bus: CommandBus, text: str) -> None:
    observe(bus, "a", ["T1"])
    before = state(bus)
    reply = say(bus, text)
    assert reply.kind is ReplyKind.ERROR
    assert reply.summary and "Traceback" not in render_text(reply)
    assert state(bus) == before


def test_mutating_commands_are_audited(bus: CommandBus, store: SqlStore) -> None:
    observe(bus, "a", ["T1"])
    say(bus, "reward T1 good", actor=MEMBER)
    say(bus, "reset all confirm", actor=MEMBER)  # refused, still audited
    say(bus, "status")
    learner = store.open_learner("default", Phase.ACTIVE)
    with store.engine.connect() as conn:
        entries = conn.execute(
            select(audit_log)
            .where(audit_log.c.learner_id == learner.id, audit_log.c.kind == "command")
            .order_by(audit_log.c.id.desc())
        ).all()
    assert [(e.actor, e.surface, e.result.split(":")[0]) for e in entries] == [
        ("U-member", "test", "error"),
        ("U-member", "test", "ok"),
    ]
    assert "Only admins" in entries[0].result


def test_help(bus: CommandBus) -> None:
    reply = say(bus, "help")
    assert "/learning reward" in render_text(reply)
    assert "lagged" in render_text(say(bus, "help reward"))


def test_reply_round_trips_through_json(bus: CommandBus) -> None:
    observe(bus, "a", ["T1"])
    for text in ("status", "reset", "help", "reward T1 good", "nonsense"):
        reply = say(bus, text)
        assert reply_from_json(reply_json(reply)) == reply


def test_scopes_map_to_learners(store: SqlStore) -> None:
    from learning_bot.bot.bus import BusSettings, Invocation

    bus = make_bus(store, BusSettings(learners={"T-a": "team-a", "discord:G1": "guild"}))
    assert bus.learner_for(Invocation("slack", ADMIN, "status", scope="T-a")) == "team-a"
    assert bus.learner_for(Invocation("discord", ADMIN, "status", scope="G1")) == "guild"
    assert bus.learner_for(Invocation("slack", ADMIN, "status", scope="other")) == "default"
    reply = bus.dispatch(Invocation("slack", ADMIN, "status", scope="T-a"))
    assert "team-a" in render_text(reply)


def test_mutating_commands_are_rate_limited_per_actor(store: SqlStore) -> None:
    from learning_bot.bot.bus import BusSettings

    bus = make_bus(store, BusSettings(rate_limit=3))
    observe(bus, "a", ["T1"])
    replies = [say(bus, "reward T1 good", actor=MEMBER) for _ in range(4)]
    assert [r.kind for r in replies[:3]] == [ReplyKind.OK] * 3
    assert replies[3].kind is ReplyKind.ERROR
    assert "more than 3 changes in a minute" in replies[3].summary
    post = {p[0]: p for p in state(bus)[0]}  # type: ignore[union-attr]
    assert post["tool:t:T1"][3] == 4  # one observation + three rewards, not four
    assert say(bus, "status", actor=MEMBER).kind is ReplyKind.INFO  # reads are never limited
    assert say(bus, "reward T1 good", actor=ADMIN).kind is ReplyKind.OK  # per actor


def test_storage_outage_gets_a_clear_reply(store: SqlStore) -> None:
    from learning_bot.bot.bus import BusSettings
    from learning_bot.engine import Unavailable

    class Down:
        def __getattr__(self, name: str) -> object:
            def fail(*args: object, **kwargs: object) -> object:
                raise Unavailable("storage is unavailable: connection refused")

            return fail

    class Switch:
        """The store, until it goes down."""

        def __init__(self) -> None:
            self.current: object = store

        def __getattr__(self, name: str) -> object:
            return getattr(self.current, name)

    switch = Switch()
    bus = make_bus(switch, BusSettings())  # type: ignore[arg-type]
    observe(bus, "a", ["T1"])
    bus.commands = Down()  # type: ignore[assignment]
    switch.current = Down()
    for text in ("status", "reward T1 good", "reset all confirm", "phase"):
        reply = say(bus, text, key=None)
        assert reply.kind is ReplyKind.ERROR, text
        assert reply.summary == "Storage is unavailable right now; try again shortly."
