"""Nothing stuck when a process dies mid-command: an idempotency claim or a taken confirmation
without a reply is a lease (engine.bounds.COMMAND_LEASE_MS); once it has run out a retry runs
the command, exactly once, and the command log is purged as commands come (SQLite and
PostgreSQL)."""

from __future__ import annotations

import threading

from bot.bus import CommandBus
from bot.commands import ConfirmCommand
from bot.middleware.idempotency import IN_FLIGHT
from bot.replies import ReplyKind
from bot.shapes import reply_json
from engine.bounds import COMMAND_LEASE_MS, COMMAND_RETENTION_MS
from engine.posterior import now_ms
from storage.command_log import SqlCommandLog

from .conftest import ADMIN, MEMBER, say
from .test_bus import observe, state

DEAD = "test:trigger-dead"  # the bus scopes a key by its surface


def pulls(bus: CommandBus, arm: str = "tool:t:T1") -> int:
    return {p[0]: p for p in state(bus)[0]}[arm][3]  # type: ignore[union-attr,no-any-return]


def log_of(bus: CommandBus) -> SqlCommandLog:
    assert isinstance(bus.commands, SqlCommandLog)
    return bus.commands


def test_a_claim_whose_process_died_runs_on_retry_once(bus: CommandBus) -> None:
    observe(bus, "a", ["T1"])
    before = pulls(bus)
    # A process claimed the key, then died before it wrote or answered.
    log_of(bus).in_transaction(lambda b: b.claim(DEAD, now_ms() - COMMAND_LEASE_MS - 1))
    first = say(bus, "reward T1 good", actor=MEMBER, key="trigger-dead")
    assert first.kind is ReplyKind.OK, first.summary
    assert pulls(bus) == before + 1
    again = say(bus, "reward T1 good", actor=MEMBER, key="trigger-dead")
    assert reply_json(again) == reply_json(first)
    assert pulls(bus) == before + 1


def test_a_claim_inside_its_lease_is_not_run_twice(bus: CommandBus) -> None:
    observe(bus, "a", ["T1"])
    before = pulls(bus)
    log_of(bus).in_transaction(lambda b: b.claim(DEAD, now_ms()))  # running elsewhere
    reply = say(bus, "reward T1 good", actor=MEMBER, key="trigger-dead")
    assert reply is IN_FLIGHT
    assert pulls(bus) == before


def test_one_of_several_retries_takes_over_a_dead_claim(bus: CommandBus) -> None:
    log = log_of(bus)
    log.in_transaction(lambda b: b.claim(DEAD, now_ms() - COMMAND_LEASE_MS - 1))
    results: list[bool] = []
    gate = threading.Barrier(6)

    def retry() -> None:
        gate.wait()
        new, _ = log.in_transaction(lambda b: b.claim(DEAD, now_ms()))
        results.append(new)

    threads = [threading.Thread(target=retry) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False] * 5 + [True]


def test_a_confirmation_taken_by_a_dead_process_runs_on_the_next_click(bus: CommandBus) -> None:
    observe(bus, "a", ["T1"])
    prompt = say(bus, "reset")
    assert prompt.kind is ReplyKind.CONFIRM
    token = prompt.actions[0].token
    # The process that took the click died before the reset ran.
    assert log_of(bus).use_confirmation(token, ADMIN.id, now_ms() - COMMAND_LEASE_MS - 1)
    assert pulls(bus) > 0
    done = say(bus, ConfirmCommand(token))
    assert done.kind is ReplyKind.OK, done.summary
    assert pulls(bus) == 0
    observe(bus, "b", ["T1"])
    twice = say(bus, ConfirmCommand(token))
    assert twice.data.get("alreadyDone") is True
    assert pulls(bus) == 1  # the reset ran once


def test_a_confirmation_being_run_elsewhere_is_not_run_again(bus: CommandBus) -> None:
    observe(bus, "a", ["T1"])
    token = say(bus, "reset").actions[0].token
    assert log_of(bus).use_confirmation(token, ADMIN.id, now_ms())
    reply = say(bus, ConfirmCommand(token))
    assert reply.data.get("alreadyDone") is True
    assert pulls(bus) == 1


def test_old_keys_are_purged_as_commands_come(bus: CommandBus) -> None:
    observe(bus, "a", ["T1"])
    log = log_of(bus)
    old = now_ms() - COMMAND_RETENTION_MS - 1
    log.in_transaction(lambda b: b.claim("test:ancient", old))
    say(bus, "reward T1 good", actor=MEMBER, key="fresh")
    new, _ = log.in_transaction(lambda b: b.claim("test:ancient", now_ms()))
    assert new  # purged, so the key is free again
    stored = log.in_transaction(lambda b: b.claim("test:fresh", now_ms()))
    assert stored[0] is False and stored[1] is not None  # a recent key is kept
