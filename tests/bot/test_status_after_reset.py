"""A status right after every arm was reset says so: its counts start at the reset, and the
traces before it are kept (it said "No traces recorded yet" about a learner with runs)."""

from __future__ import annotations

from learning_bot.app import build_app
from learning_bot.bot.commands.status import StatusCommand, status_reply
from learning_bot.bot.render_text import render_text
from learning_bot.settings import Settings
from learning_bot.simulate import simulate


def test_a_status_after_a_full_reset_says_the_runs_before_it_are_kept(sqlite_url: str) -> None:
    app = build_app(Settings(database_url=sqlite_url), spool=False)
    try:
        service = app.service(create=True)
        simulate(service, traces=30, arms=8, seed=3)
        service.reset(actor="test")
        text = render_text(status_reply(service, StatusCommand(), "slack"))
        assert "No traces since every arm was reset (" in text
        assert "/learning reset undo brings the arms back" in text
        assert "No traces recorded yet" not in text
        assert service.traces(limit=1)[1] == 30  # kept
        service.undo_reset(actor="test")
        text = render_text(status_reply(service, StatusCommand(), "terminal"))
        assert "No traces since" not in text
    finally:
        app.close()


def test_a_reset_of_a_learner_without_arms_says_there_is_nothing_to_reset(
    sqlite_url: str,
) -> None:
    from learning_bot.bot.commands.reset import ResetCommand, confirmation
    from learning_bot.bot.replies import ReplyKind

    app = build_app(Settings(database_url=sqlite_url), spool=False)
    try:
        reply = confirmation(app.service(create=True), ResetCommand(), "slack")
        assert reply.kind is ReplyKind.INFO and not reply.actions
        assert render_text(reply) == (
            "Learner 'default' has no arms yet: there is nothing to reset."
        )
    finally:
        app.close()
