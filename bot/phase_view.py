"""How the projection of going active reads (engine.projection): the lines `/learning phase`
shows before its buttons and its confirmation repeats, the data `--json` and `GET .../phase`
give, and the line status puts the achieved figures beside."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from learning_bot.engine.errors import Unavailable
from learning_bot.engine.phase_projection import kept_projection, learner_projection

if TYPE_CHECKING:
    from learning_bot.engine.projection_report import Projection, SettingProjection
    from learning_bot.engine.service import LearningService
    from learning_bot.engine.views import Summary


def _cut(setting: SettingProjection) -> str:
    if setting.cost_savings_percent is not None:
        return f"{setting.cost_savings_percent:.0f}% cut"
    return f"{setting.token_savings_percent:.0f}% of prompt tokens cut"


def _short(setting: SettingProjection) -> str:
    return f"Budget {setting.token_budget:,}: {setting.recall * 100:.0f}% kept, {_cut(setting)}"


def projection_lines(
    projection: Projection, active: bool = False, prefix: str = "/learning"
) -> list[str]:
    """Two or three lines: the current setting in full, the others in short, the least-cost
    setting that keeps 95% when there is one (or why there are no figures)."""
    current = projection.current
    if current is None:
        return [f"No projection of going active yet: {projection.reason or 'no figures'}."]
    lead = "At" if active else "Going active at"
    if current.cost_savings_percent is not None:
        assert current.cost_low is not None
        assert current.cost_high is not None
        cut = (
            f"cut prompt cost by {current.cost_savings_percent:.0f}% "
            f"(95%: {current.cost_low:.0f}-{current.cost_high:.0f}%)"
        )
    else:
        cut = f"cut prompt tokens by {current.token_savings_percent:.0f}%"
    lines = [
        f"{lead} budget {current.token_budget:,} selection would have kept "
        f"{current.recall * 100:.0f}% of the components the model used and {cut} over your "
        f"last {projection.runs:,} runs in {projection.sessions:,} sessions."
    ]
    others = [s for s in projection.settings if not s.current]
    if others:
        lines.append(". ".join(_short(s) for s in others) + ".")
    suggested = projection.suggested
    if suggested is not None and not suggested.current:
        lines.append(
            f"Least prompt cost keeping 95% of them: budget {suggested.token_budget:,} "
            f"({prefix} config tokenBudget {suggested.token_budget})."
        )
    elif suggested is None:
        lines.append("No budget tried keeps 95% of the components the model used.")
    return lines


def projection_data(projection: Projection) -> dict[str, Any]:
    """`{"projection": {...}}`, or `{"reason": "..."}` when there are no figures."""
    if projection.current is None:
        return {"reason": projection.reason or "no figures"}
    return {"projection": projection.to_json()}


def read_projection(service: LearningService, cancel: threading.Event | None = None) -> Projection:
    """The learner's projection; storage that cannot be read gives a reason instead."""
    try:
        return learner_projection(service, cancel=cancel)
    except Unavailable as exc:
        from learning_bot.engine.projection_report import Projection

        return Projection(0, 0, reason=f"its runs could not be read ({exc})")


def achieved_line(service: LearningService, summary: Summary) -> str | None:
    """What was projected at the switch to active beside what status measures now, or None
    when no projection was kept."""
    kept = kept_projection(service)
    if kept is None:
        return None
    setting, runs, _ = kept
    projected = f"{setting.recall * 100:.0f}% kept, {_cut(setting)}"
    achieved = []
    if summary.estimated_recall is not None:
        achieved.append(f"{summary.estimated_recall * 100:.0f}% kept")
    cost = summary.prompt_cost_savings
    if cost is not None and cost.percent is not None:
        achieved.append(f"{cost.percent:.0f}% cut")
    now = ", ".join(achieved) if achieved else "not measured yet"
    return (
        f"Projected at the switch to active (budget {setting.token_budget:,}, from {runs:,} "
        f"runs): {projected}. Achieved: {now}."
    )


def achieved_data(service: LearningService) -> dict[str, Any] | None:
    """The kept projection's current setting as JSON, with when it was kept."""
    kept = kept_projection(service)
    if kept is None:
        return None
    setting, runs, at = kept
    return {**setting.to_json(), "runs": runs, "at": at}
