"""The status reply's pieces: the headline numbers and lines, the compact (phone) status,
the sessions and starved-arm lines."""

from __future__ import annotations

from collections.abc import Sequence

from learning_bot.bot.formatting import command_prefix, fmt_int
from learning_bot.bot.replies import CompactList, CompactStatus
from learning_bot.engine.config import LearningConfig
from learning_bot.engine.session_sets import SessionDecisions
from learning_bot.engine.starvation import StarvedArm
from learning_bot.engine.views import ArmView, Status, Summary

DEFAULT_TOP = 5
"""Arms per list in a status that asks for no number."""


def value_headline(s: Summary, target: float | None = None) -> list[str]:
    """The status headline: what the user pays, the prompt cost saved against full-prompt
    (baseline) sessions when it can be measured (or why not); then the estimated share of the
    components the model used that selection kept (beside the learner's recall `target` when
    it has one), and prompt tokens saved against sending every component."""
    lines: list[str] = []
    cost = s.prompt_cost_savings
    if cost is not None and cost.percent is not None:
        assert cost.low is not None
        assert cost.high is not None
        lines.append(
            f"Saved {cost.percent:.0f}% of prompt cost against full-prompt sessions "
            f"(95%: {cost.low:.0f} to {cost.high:.0f}%, {cost.sessions:,} sessions)"
        )
    elif cost is not None and cost.reason and s.selected_runs:
        lines.append(f"Prompt cost saving not measured: {cost.reason}")
    if s.estimated_recall is not None:
        lines.append(
            f"Kept about {s.estimated_recall * 100:.0f}% of the components the model used"
            + (f" (recall target {target * 100:g}%)" if target is not None else "")
        )
    if s.prompt_savings_percent is not None:
        assert s.offered_avg_tokens is not None
        assert s.selected_prompt_avg_tokens is not None
        lines.append(
            f"Saved {s.prompt_savings_percent:.0f}% of prompt tokens compared with sending "
            f"every component (avg {fmt_int(s.selected_prompt_avg_tokens)} of "
            f"{fmt_int(s.offered_avg_tokens)} tokens per selected run)"
        )
    decisions = s.session_decisions
    if decisions is not None and decisions.sessions:
        lines.append(sessions_line(decisions))
    return lines


def recall_target_field(config: LearningConfig, s: Summary) -> tuple[tuple[str, str], ...]:
    """The recall target beside the recall the learner estimates it achieves (none without a
    target)."""
    target = config.recall_target
    if target is None:
        return ()
    achieved = (
        "not estimated yet"
        if s.estimated_recall is None
        else f"estimated {s.estimated_recall * 100:.0f}% kept"
    )
    return (("Recall target", f"{target * 100:g}% ({achieved}; token budget a cap)"),)


def sessions_line(d: SessionDecisions) -> str:
    """How many sessions drew their set again while live, and why (engine.session_review),
    and how many took on tools outside their cached prefix."""
    head = f"Sessions (last day): {d.sessions:,}, {d.redrawn:,} redrawn"
    if d.redrawn:
        reasons = ", ".join(f"{reason} ({count:,})" for reason, count in d.by_reason[:4])
        plural = "" if d.redraws == 1 else "s"
        head = f"{head} ({d.redraws:,} redraw{plural}; sessions by latest reason: {reasons})"
    if d.grown:
        its = "its" if d.grown == 1 else "their"
        head = f"{head}, {d.grown:,} took on tools outside {its} cached prefix"
    return head


def starved_line(starved: Sequence[StarvedArm], most: int = 5) -> str:
    """One line naming the starved arms (engine.starvation), the least included first."""
    parts = [
        f"{s.label or s.arm_id} (in {s.included} of {s.offered} recent runs"
        + (f", {s.accuracy * 100:.0f}% of its pulls rewarded)" if s.accuracy is not None else ")")
        for s in starved[:most]
    ]
    more = f" and {len(starved) - most} more" if len(starved) > most else ""
    return (
        f"Starved: {', '.join(parts)}{more} — useful before, now left out of nearly every run. "
        "Check the rewards, or reset these arms."
    )


COMPACT_ITEMS = 3
"""Arms in each list of the compact status (phones); `status top N` shows the full tables."""


def headline(status: Status) -> tuple[tuple[str, str], ...]:
    """The numbers a status leads with: phase, traces, prompt cost saved, estimated recall (with
    the recall target beside it when the learner has one), prompt tokens saved."""
    s = status.summary
    out = [("Phase", status.phase.value.upper()), ("Traces", fmt_int(s.trace_count))]
    cost = s.prompt_cost_savings
    if cost is not None and cost.percent is not None:
        out.append(("Cost savings", f"{cost.percent:.0f}%"))
    target = status.config.recall_target
    if s.estimated_recall is not None:
        recall = f"{s.estimated_recall * 100:.0f}%"
        if target is not None:
            recall = f"{recall} (target {target * 100:g}%)"
        out.append(("Estimated recall", recall))
    elif target is not None:
        out.append(("Recall target", f"{target * 100:g}% (not estimated yet)"))
    if s.prompt_savings_percent is not None:
        out.append(("Prompt savings", f"{s.prompt_savings_percent:.0f}%"))
    return tuple(out)


def compact_status(status: Status, surface: str = "") -> CompactStatus:
    """The status as a phone shows it: the headline numbers, then short "label · mean" lists;
    the full tables are one command (or the dashboard) away."""

    def items(views: tuple[ArmView, ...] | list[ArmView]) -> tuple[tuple[str, str], ...]:
        return tuple((v.label or v.arm_id, f"{v.mean:.2f}") for v in views[:COMPACT_ITEMS])

    lists = [CompactList("Best arms", items(status.top))]
    if status.bottom:
        lists.append(CompactList("Candidates for exclusion", items(status.bottom)))
    if status.starved:
        starved = tuple(
            (s.label or s.arm_id, f"in {s.included}/{s.offered} runs")
            for s in status.starved[:COMPACT_ITEMS]
        )
        lists.append(CompactList("Starved: useful, now left out", starved))
    return CompactStatus(
        headline(status),
        tuple(lists),
        f"Full tables: {command_prefix(surface)} status top 10, or the dashboard.",
    )
