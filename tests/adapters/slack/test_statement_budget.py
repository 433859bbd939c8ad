"""What one `/learning reward <arm>` costs the database: at most 9 SQL statements in at most 3
transactions, and no read of the learner's whole posteriors table, from Slack (a signed slash
command through slack-bolt) and from the console (the terminal surface). The ninth is the
"ran once" mark a command's first change stores on its idempotency claim in its own
transaction (bot.ports.CommandStore.marking); a command without an idempotency key sends 8.
Transactions are counted by SQLAlchemy's `begin` event; statements are everything sent to the
database but the transaction control itself (SQLite's BEGIN IMMEDIATE)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from sqlalchemy import event

from learning_bot.adapters.terminal import local_sender
from learning_bot.app import App
from learning_bot.engine import Arm, ReportedArm, RunReport, ToolCall
from learning_bot.storage import queries

from .conftest import SlackDriver

ARM_COUNT = 200
FULL_TABLE = " ".join(queries.ARMS.split())


@dataclass
class Counter:
    statements: list[str] = field(default_factory=list)
    transactions: int = 0

    @property
    def full_reads(self) -> list[str]:
        return [s for s in self.statements if FULL_TABLE in " ".join(s.split())]


@pytest.fixture
def counted(core: App) -> Iterator[Counter]:
    """Counts every statement and transaction on the app's engine while the test runs."""
    assert core.engine is not None
    counter = Counter()
    engine = core.engine

    def on_execute(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.split(None, 1)[0].upper() not in ("BEGIN", "COMMIT", "ROLLBACK"):
            counter.statements.append(statement)

    def on_begin(conn: Any) -> None:
        counter.transactions += 1

    inventory = [Arm(f"tool:bulk:B{i:03d}", 10) for i in range(ARM_COUNT)]
    core.service().observe(
        RunReport(
            "warm",
            tuple(ReportedArm(a) for a in inventory),
            tool_calls=(ToolCall("B001"),),
            channel="C1",
        )
    )
    core.service().status()  # a learner in use: its posteriors are cached
    event.listen(engine, "before_cursor_execute", on_execute)
    event.listen(engine, "begin", on_begin)
    try:
        yield counter
    finally:
        event.remove(engine, "before_cursor_execute", on_execute)
        event.remove(engine, "begin", on_begin)


def check_budget(counter: Counter) -> None:
    assert counter.statements, "nothing was counted"
    assert len(counter.statements) <= 9, "\n".join(counter.statements)
    assert counter.transactions <= 3, counter.transactions
    assert not counter.full_reads, counter.full_reads


async def test_slack_reward_stays_in_budget(
    core: App, counted: Counter, slack: SlackDriver
) -> None:
    counted.statements.clear()
    counted.transactions = 0
    response, key = await slack.command("reward B042 good", user="U-member")
    assert response.status_code == 200
    await slack.fake.next_post(key)  # the answer went out: the command is done
    check_budget(counted)
    view = core.service().view("tool:bulk:B042")
    assert view.posterior.pulls == 2 and view.posterior.alpha == 3 + 1.0


def test_console_reward_stays_in_budget(core: App, counted: Counter) -> None:
    send = local_sender(core.bus, "console", surface="console")
    reply = send("reward B042 good")
    assert reply.ok, reply.summary
    check_budget(counted)
    assert core.service().view("tool:bulk:B042").posterior.pulls == 2
