"""`/learning status [top N] [public]` and `status arm <id-or-label> [public]`: the phase,
settings, traces, savings, the best arms and the candidates for exclusion, or one arm."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from learning_bot.bot.commands.base import (
    MAX_ARM_CHARS,
    PUBLIC,
    CommandSpec,
    Context,
    Form,
    Option,
    Terminal,
    UsageError,
    anyone,
    shown,
    unexpected,
)
from learning_bot.bot.formatting import (
    command_prefix,
    fmt_int,
    fmt_pct,
    fmt_time,
    posterior_table,
)
from learning_bot.bot.invocation import Command
from learning_bot.bot.phase_view import achieved_data, achieved_line
from learning_bot.bot.replies import (
    Fields,
    Heading,
    LazyData,
    Reply,
    ReplyKind,
    Text,
    Visibility,
    explanation_fields,
)
from learning_bot.bot.shapes import arm_json, explanation_json, summary_json
from learning_bot.bot.status_view import (
    DEFAULT_TOP,
    compact_status,
    recall_target_field,
    starved_line,
    value_headline,
)

MAX_TOP = 25

if TYPE_CHECKING:
    from learning_bot.engine.service import LearningService


@dataclass(frozen=True, slots=True)
class StatusCommand(Command):
    top: int | None = None
    """How many arms each list shows; None: the compact status (headline numbers, short
    lists), as a plain `/learning` or `status` asks."""
    public: bool = False
    arm: str | None = None


def parse(rest: list[str]) -> StatusCommand:
    top: int | None = None
    public, arm = False, None
    i = 0
    while i < len(rest):
        word = rest[i].lower()
        if word == "public":
            public = True
        elif word == "top":
            if i + 1 >= len(rest):
                raise UsageError("'top' needs a number, e.g. status top 10", "status")
            value = rest[i + 1]
            if not value.isdigit() or not 1 <= int(value) <= MAX_TOP:
                raise UsageError(
                    f"top must be a whole number from 1 to {MAX_TOP}, got {shown(value)!r}",
                    "status",
                )
            top = int(value)
            i += 1
        elif word == "arm":
            if arm is not None or i + 1 >= len(rest):
                raise UsageError("'arm' needs one arm id or label", "status")
            arm = rest[i + 1]
            i += 1
        else:
            raise unexpected(rest[i], "status")
        i += 1
    return StatusCommand(top=top, public=public, arm=arm)


def run(ctx: Context, command: StatusCommand) -> Reply:
    service = ctx.service()
    if command.arm is not None:
        return arm_detail(service, command)
    reply = status_reply(service, command, ctx.surface, ctx.dashboard_url)
    return ctx.paused_notice(reply)


def status_reply(
    service: LearningService,
    command: StatusCommand,
    surface: str = "",
    dashboard_url: str | None = None,
) -> Reply:
    """The status: headline, settings, runs, starved arms and the best and worst arms."""
    status = service.status(top=command.top or DEFAULT_TOP)
    config = status.config
    s = status.summary
    blocks: list[Any] = [
        Heading(f"Learning status — {status.learner}", status.phase.value.upper()),
        Fields(
            (
                ("Phase", status.phase.value),
                *recall_target_field(config, s),
                ("Token budget", fmt_int(config.token_budget)),
                ("Baseline rate", f"{config.baseline_rate * 100:g}%"),
                ("Min pulls", str(config.min_pulls)),
                ("Traces", fmt_int(s.trace_count)),
                ("Arms", fmt_int(s.arm_count)),
                ("Total tokens", fmt_int(s.total_tokens)),
                (
                    "Date range",
                    f"{fmt_time(s.min_timestamp)} – {fmt_time(s.max_timestamp)}"
                    if s.trace_count
                    else "–",
                ),
            )
        ),
    ]
    # the JSON details (the wire types' shapes) are made when a surface sends them
    data: dict[str, Any] = {"phase": status.phase.value}
    if config.recall_target is not None:
        data["recallTarget"] = config.recall_target
    headline = value_headline(s, config.recall_target)
    blocks[1:1] = [Text(line) for line in headline]
    reset = status.last_reset
    if status.empty and reset is not None and reset.all_arms and not reset.undone:
        blocks.append(Text(f"No traces since every arm was reset ({fmt_time(reset.at)})."))
        blocks.append(
            Text(
                "Status counts the runs after a full reset; the traces before it are kept "
                f"(export, GET traces), and {command_prefix(surface)} reset undo brings the "
                "arms back.",
                muted=True,
            )
        )
    elif status.empty:
        blocks.append(Text("No traces recorded yet."))
        blocks.append(
            Text(
                "Traces appear when your agent reports runs (LearningService.observe or "
                "POST observe). To see it work, run: learning-bot simulate",
                muted=True,
            )
        )
    else:
        runs = s.baseline_runs + s.selected_runs
        blocks.append(
            Fields(
                (
                    (
                        "Baseline runs",
                        f"{s.baseline_runs:,} ({fmt_pct(s.baseline_runs, runs)})",
                    ),
                    (
                        "Selected runs",
                        f"{s.selected_runs:,} ({fmt_pct(s.selected_runs, runs)})",
                    ),
                )
            )
        )
        if s.token_savings_percent is not None:
            assert s.baseline_avg_tokens is not None
            assert s.selected_avg_tokens is not None
            blocks.append(
                Text(
                    f"Tokens per run, selected against baseline runs: "
                    f"{s.token_savings_percent:.1f}% fewer (avg "
                    f"{fmt_int(s.selected_avg_tokens)} against "
                    f"{fmt_int(s.baseline_avg_tokens)}; a baseline session sends every "
                    "component, a baseline run without a session fills the same budget).",
                    muted=True,
                )
            )
    achieved = achieved_line(service, s)
    if achieved is not None:
        blocks.insert(1 + len(headline), Text(achieved))
        data["projectedAtSwitch"] = achieved_data(service)
    if status.starved:
        blocks.append(Text(starved_line(status.starved)))
        data["starved"] = [s.arm_id for s in status.starved]
    if status.top:
        blocks.append(posterior_table(status.top, f"Top {len(status.top)} arms by mean"))
    if status.bottom:
        blocks.append(
            posterior_table(
                status.bottom,
                f"Bottom {len(status.bottom)} arms — candidates for exclusion",
            )
        )
        if status.seeds_left_out:
            blocks.append(
                Text(
                    f"Seed arms are never excluded, so the {status.seeds_left_out} seed "
                    "arm(s) are not listed as candidates.",
                    muted=True,
                )
            )

    def details() -> dict[str, Any]:
        out = {"summary": summary_json(s), **data}
        if status.bottom:
            out["bottom"] = [arm_json(v) for v in status.bottom]
        out["top"] = [arm_json(v) for v in status.top]
        return out

    dashboard_url = dashboard_url or None
    if dashboard_url:
        blocks.append(Text(f"Dashboard: {dashboard_url}", muted=True))
    compact = None if status.empty or command.top is not None else compact_status(status, surface)
    cost = s.prompt_cost_savings
    summary = f"{status.phase.value} phase, {s.trace_count:,} traces, {s.arm_count:,} arms" + (
        f", saved {cost.percent:.0f}% of prompt cost"
        if cost is not None and cost.percent is not None
        else f", saved {s.prompt_savings_percent:.0f}% of prompt tokens"
        if s.prompt_savings_percent is not None
        else ""
    )
    visibility = Visibility.PUBLIC if command.public else Visibility.PRIVATE
    return Reply(
        ReplyKind.INFO,
        tuple(blocks),
        summary,
        visibility,
        LazyData(details),
        dashboard_url=dashboard_url,
        compact=compact,
    )


def arm_detail(service: LearningService, command: StatusCommand) -> Reply:
    """One arm: its posterior, cost, flags and what context says about it."""
    assert command.arm is not None
    arm_id = service.resolve_arm(command.arm)
    view = service.view(arm_id)
    low, high = view.interval
    p = view.posterior
    explanation = service.context_explanation(arm_id)
    blocks = (
        Heading(view.arm_id),
        Fields(
            (
                ("Label", view.label),
                ("Mean", f"{view.mean:.3f}"),
                ("95% interval", f"{low:.3f}-{high:.3f}"),
                ("Beta", f"alpha {p.alpha:.2f}, beta {p.beta:.2f}"),
                ("Pulls", str(p.pulls)),
                ("Confidence", view.confidence.value),
                ("Last updated", fmt_time(p.last_updated)),
                ("Token cost", fmt_int(view.token_cost)),
                ("Seed arm", "yes (never excluded)" if view.is_seed else "no"),
                (
                    "Under-explored",
                    "yes (always included until min pulls)" if view.is_underexplored else "no",
                ),
                *explanation_fields(explanation),
            )
        ),
    )
    visibility = Visibility.PUBLIC if command.public else Visibility.PRIVATE
    return Reply(
        ReplyKind.INFO,
        blocks,
        f"{view.arm_id}: mean {view.mean:.3f} over {p.pulls} pulls",
        visibility,
        {"arm": arm_json(view), "explanation": explanation_json(explanation, p.pulls)},
    )


# -- the declaration -------------------------------------------------------------------


def _from_options(values: Mapping[str, Any]) -> StatusCommand:
    return StatusCommand(top=values["top"], public=values["public"], arm=values["arm"])


SPEC = CommandSpec(
    name="status",
    type=StatusCommand,
    run=run,
    order=10,
    grammar=("[status [top N] [public]]", "status arm <id-or-label> [public]"),
    help=(
        "{cmd} status [top N] [public] — phase, settings, traces, token savings, the best "
        "arms and the candidates for exclusion. 'status arm <id-or-label>' shows one arm. "
        "Replies are private unless you add 'public'."
    ),
    parse=parse,
    access=anyone,
    from_json=lambda d: StatusCommand(d["top"], d["public"], d["arm"]),
    words=("top", "arm", "public"),
    arms="after-arm",
    terminal=Terminal(
        "status — phase, settings, traces, token savings, the best arms and the candidates "
        "for exclusion",
        "[top N] [public] | arm <id-or-label>: 'top N' lists N arms (1-25) in each table; "
        "'arm Read' shows one arm by id or label; 'public' matters only in chat",
        reads_only=True,
    ),
    form=Form(
        "Phase, traces, token savings, the best and worst arms",
        (
            Option(
                "top",
                int,
                "Arms per list, 1-25 (leave out for the short status)",
                low=1,
                high=MAX_TOP,
            ),
            Option(
                "arm",
                str,
                "Show one arm instead: its id or label",
                limit=MAX_ARM_CHARS,
                autocomplete="arm",
            ),
            PUBLIC,
        ),
        build=_from_options,
        public=lambda command: command.public,
    ),
)
