"""The status line about the sessions of the last day: redrawn and why, and how many took on
tools outside their cached prefix."""

from __future__ import annotations

from learning_bot.bot.shapes import session_decisions_json
from learning_bot.bot.status_view import sessions_line
from learning_bot.engine.session_sets import SessionDecisions


def test_the_line_counts_redraws_and_sessions_that_took_on_tools() -> None:
    assert sessions_line(SessionDecisions(3)) == "Sessions (last day): 3, 0 redrawn"
    assert sessions_line(SessionDecisions(3, grown=1)) == (
        "Sessions (last day): 3, 0 redrawn, 1 took on tools outside its cached prefix"
    )
    decided = SessionDecisions(9, 2, 3, (("compacted", 2),), grown=4)
    assert sessions_line(decided) == (
        "Sessions (last day): 9, 2 redrawn (3 redraws; sessions by latest reason: compacted (2)), "
        "4 took on tools outside their cached prefix"
    )
    assert session_decisions_json(decided)["grown"] == 4
    one = SessionDecisions(4, 1, 1, (("a run missed the cache", 1),))
    assert sessions_line(one) == (
        "Sessions (last day): 4, 1 redrawn (1 redraw; sessions by latest reason: "
        "a run missed the cache (1))"
    )
