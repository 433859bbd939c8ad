"""What each command does and how its answer reads: one wording for every surface."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from learning_bot.bot.commands import (
    COMMAND_NAMES,
    GRAMMAR,
    ArmNamesQuery,
    CancelCommand,
    Command,
    ConfigCommand,
    ConfirmCommand,
    HelpCommand,
    PhaseCommand,
    ResetCommand,
    RewardCommand,
    StatusCommand,
    UsageError,
)
from learning_bot.bot.phase_view import (
    achieved_data,
    achieved_line,
    projection_data,
    projection_lines,
    read_projection,
)
from learning_bot.bot.ports import PendingConfirmation
from learning_bot.bot.replies import (
    Action,
    Actions,
    Column,
    CompactList,
    CompactStatus,
    Fields,
    Heading,
    Reply,
    ReplyKind,
    Table,
    Text,
    Visibility,
    explanation_fields,
)
from learning_bot.bot.shapes import arm_json, explanation_json, reply_from_json, summary_json
from learning_bot.engine.config import LearningConfig, Phase
from learning_bot.engine.errors import InvalidConfig, InvalidInput
from learning_bot.engine.phase_projection import keep_projection
from learning_bot.engine.service import MIN_TRACES_FOR_ACTIVE, LearningService
from learning_bot.engine.session_sets import SessionDecisions
from learning_bot.engine.starvation import StarvedArm
from learning_bot.engine.views import ArmView, Status, Summary

TERMINAL_SURFACES = frozenset({"terminal", "console"})


def command_prefix(surface: str = "") -> str:
    """How a reply names a command on the surface it goes to: `learning-bot` in a terminal,
    `/learning` in chat. Every command hint in a reply goes through this."""
    return "learning-bot" if surface in TERMINAL_SURFACES else "/learning"


DEFAULT_TOP = 5
"""Arms per list in a status that asks for no number."""

HELP = {
    "status": (
        "{cmd} status [top N] [public] — phase, settings, traces, token savings, the best "
        "arms and the candidates for exclusion. 'status arm <id-or-label>' shows one arm. "
        "Replies are private unless you add 'public'."
    ),
    "reward": (
        "{cmd} reward [<arm>] [1|0|good|bad] [reason...] — manual (lagged) feedback. "
        "Without an arm, the arms the latest run in this conversation used get the reward. "
        "An arm is its full id (tool:fs:Read) or its label (Read)."
    ),
    "reset": (
        "{cmd} reset [all | <arm ids...>] — puts arms back to Beta(1,1) with 0 pulls; "
        "nothing is deleted and {cmd} reset undo restores them. Admins only; asks "
        "for confirmation (or add 'confirm')."
    ),
    "phase": (
        "{cmd} phase [passive|active] — shows or sets the phase. passive: every arm is "
        "included and nothing is learnt from; active: Thompson Sampling picks arms under "
        "the token budget. Changing it is for admins and asks for confirmation."
    ),
    "config": (
        "{cmd} config [<key> <value> [learner]] — shows the learner's stored settings, or "
        "changes one (e.g. config halfLife 50, config policy seed). Every replica takes the "
        "change at its next select. Changing settings is for admins."
    ),
    "subscribe": (
        "{cmd} subscribe [alerts|digest daily|digest weekly|changes] [learner] — this channel "
        "gets the learner's alerts (default), a daily or weekly digest, or its phase changes "
        "and resets. Admins only."
    ),
    "unsubscribe": (
        "{cmd} unsubscribe [alerts|digest daily|digest weekly|changes|all] [learner] — stops "
        "one subscription of this channel (or all of them). Admins only."
    ),
    "subscriptions": (
        "{cmd} subscriptions — what this channel is subscribed to, and whether the bot could "
        "not post here (a paused subscription)."
    ),
    "help": "{cmd} help [command] — this help.",
}
"""One paragraph per command; `{cmd}` is the surface's command prefix (see help_text)."""


def help_text(topic: str, surface: str = "") -> str:
    """The help paragraph of one command, as the surface types it. A topic that names no
    command (whatever way it arrived: typed, a tool argument, a stored command) is a usage
    error naming it, never a KeyError."""
    paragraph = HELP.get(topic.lower()) if isinstance(topic, str) else None
    if paragraph is None:
        raise UsageError(unknown_topic(topic), "help")
    return paragraph.format(cmd=command_prefix(surface))


def unknown_topic(topic: object) -> str:
    """The message for a help topic that names no command."""
    shown = str(topic)[:40]
    return f"no help for {shown!r}; commands: {', '.join(COMMAND_NAMES)}"


def help_entry(name: str, surface: str = "") -> dict[str, str]:
    """One command's help as data: {name, usage, summary} (the paragraph split at its dash)."""
    usage, _, summary = help_text(name, surface).partition(" — ")
    return {"name": name, "usage": usage, "summary": summary}


def help_reply(topic: str | None, surface: str = "") -> Reply:
    """The help: every command, or the one `topic` names (a usage error for a topic that
    names none). Its data, what `--json` prints: {commands: [help_entry...], grammar} or
    {command: help_entry}."""
    prefix = command_prefix(surface)
    if topic:
        name = topic.lower()
        if name not in HELP:
            return usage_reply(unknown_topic(topic), "help", surface)
        text = help_text(name, surface)
        data: dict[str, Any] = {"command": help_entry(name, surface)}
        return Reply(ReplyKind.INFO, (Text(text),), f"help {name}", data=data)
    lines = grammar(surface)
    blocks = (
        Heading(f"{prefix} — the learning layer's chat commands"),
        Text("\n".join(lines)),
        Text(f"{prefix} help <command> explains one command.", muted=True),
    )
    data = {"commands": [help_entry(name, surface) for name in HELP], "grammar": lines}
    return Reply(ReplyKind.INFO, blocks, f"{prefix} help", data=data)


def grammar(surface: str = "") -> list[str]:
    """The command grammar as the surface types it."""
    prefix = command_prefix(surface)
    return [prefix + line.removeprefix("/learning") for line in GRAMMAR]


def usage_reply(message: str, command: str | None = None, surface: str = "") -> Reply:
    lines = [help_text(command, surface)] if command in HELP else grammar(surface)
    return Reply(
        ReplyKind.ERROR,
        (Text(message), Text("Usage:\n" + "\n".join(lines), muted=True)),
        message,
        data={"error": message, "errorCode": "usage"},
        usage=tuple(lines),
    )


def usage_grammar(reply: Reply) -> str | None:
    """A usage error's grammar when it concerns one command: the words of its help paragraph
    (HELP), not the explanation after the dash; None for the whole grammar or no usage."""
    if reply.usage is None or len(reply.usage) != 1:
        return None
    return reply.usage[0].split(" — ", 1)[0]


def fmt_time(ms: int | None) -> str:
    if ms is None:
        return "never"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def fmt_int(n: float) -> str:
    return f"{n:,.0f}"


def fmt_pct(part: int, whole: int) -> str:
    return f"{part / whole * 100:.1f}%" if whole else "0.0%"


POSTERIOR_COLUMNS = (
    Column("Arm"),
    Column("Mean", "right"),
    Column("95% interval", "right"),
    Column("Pulls", "right"),
    Column("Confidence"),
    Column("Last updated"),
)


def posterior_row(view: ArmView) -> tuple[str, ...]:
    low, high = view.interval
    return (
        view.arm_id,
        f"{view.mean:.3f}",
        f"{low:.3f}-{high:.3f}",
        str(view.posterior.pulls),
        view.confidence.value,
        fmt_time(view.posterior.last_updated),
    )


def posterior_table(views: tuple[ArmView, ...] | list[ArmView], title: str) -> Table:
    return Table(POSTERIOR_COLUMNS, tuple(posterior_row(v) for v in views), title)


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
        reasons = ", ".join(f"{reason} {count:,}" for reason, count in d.by_reason[:4])
        head = f"{head} ({d.redraws:,} redraws; latest reason: {reasons})"
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


class Handlers:
    def __init__(self, settings: Any) -> None:
        self.settings = settings

    def run(
        self,
        service: LearningService,
        command: Command,
        actor: Any,
        conversation: str,
        surface: str = "",
    ) -> Reply:
        if isinstance(command, StatusCommand):
            if command.arm is not None:
                return self.arm_detail(service, command)
            return self.status(service, command, surface)
        if isinstance(command, RewardCommand):
            return self.reward(service, command, actor, conversation)
        if isinstance(command, ResetCommand):
            return self.reset(service, command, actor, surface)
        if isinstance(command, PhaseCommand):
            return self.phase(service, command, actor, surface)
        if isinstance(command, ConfigCommand):
            return self.config(service, command, actor, surface)
        if isinstance(command, HelpCommand):
            return self.help(command, surface)
        if isinstance(command, ArmNamesQuery):
            names = tuple((v.arm_id, v.label) for v in service.posteriors())
            return Reply(ReplyKind.INFO, (), f"{len(names)} arms", arm_names=names)
        if isinstance(command, ConfirmCommand | CancelCommand):
            raise ValueError("confirmations are handled by the bus")
        raise ValueError(f"unknown command {command!r}")

    # -- status ----------------------------------------------------------------------------

    def status(self, service: LearningService, command: StatusCommand, surface: str = "") -> Reply:
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
        data: dict[str, Any] = {"summary": summary_json(s), "phase": status.phase.value}
        if config.recall_target is not None:
            data["recallTarget"] = config.recall_target
        headline = value_headline(s, config.recall_target)
        blocks[1:1] = [Text(line) for line in headline]
        if status.empty:
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
            data["bottom"] = [arm_json(v) for v in status.bottom]
        data["top"] = [arm_json(v) for v in status.top]
        dashboard_url: str | None = self.settings.dashboard_url or None
        if dashboard_url:
            blocks.append(Text(f"Dashboard: {dashboard_url}", muted=True))
        compact = (
            None if status.empty or command.top is not None else compact_status(status, surface)
        )
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
            data,
            dashboard_url=dashboard_url,
            compact=compact,
        )

    def arm_detail(self, service: LearningService, command: StatusCommand) -> Reply:
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

    # -- reward ----------------------------------------------------------------------------

    def reward(
        self, service: LearningService, command: RewardCommand, actor: Any, conversation: str
    ) -> Reply:
        result = service.reward(
            command.arm,
            command.value,
            actor=actor.id,
            reason=command.reason,
            conversation=conversation or None,
        )
        views = {v.arm_id: v for v in result.arms}
        word = "good" if result.value >= 0.5 else "bad"
        target = (
            result.arm_ids[0]
            if command.arm is not None
            else f"{len(result.arm_ids)} arm(s) the latest run here used"
        )
        rows = tuple(posterior_row(views[a]) for a in result.arm_ids if a in views)
        blocks: list[Any] = [
            Text(f"Recorded a {word} reward ({result.value:g}) for {target}."),
            Table(POSTERIOR_COLUMNS, rows, "Now"),
        ]
        if result.reason:
            blocks.insert(1, Text(f"Reason: {result.reason}", muted=True))
        blocks.append(
            Text(
                f"Lagged feedback from {actor.display}; automatic observations are unaffected.",
                muted=True,
            )
        )
        visibility = Visibility.PUBLIC if command.public else Visibility.PRIVATE
        return Reply(
            ReplyKind.OK,
            tuple(blocks),
            f"Rewarded {', '.join(result.arm_ids)} with {result.value:g}",
            visibility,
            {
                "armIds": list(result.arm_ids),
                "value": result.value,
                "traceId": result.trace_id,
                "lagged": True,
                "arms": [arm_json(v) for v in result.arms],
            },
        )

    # -- reset -----------------------------------------------------------------------------

    def confirmation(self, service: LearningService, command: Command, surface: str = "") -> Reply:
        if isinstance(command, ResetCommand) and command.undo:
            last = service.last_reset()
            if last is None or last.undone:
                return Reply(
                    ReplyKind.ERROR,
                    (Text("There is no reset to undo."),),
                    "There is no reset to undo.",
                )
            what = "every arm" if last.all_arms else f"{len(last.arm_ids)} arm(s)"
            text = (
                f"Undo reset #{last.reset_id} by {last.actor} at {fmt_time(last.at)}? The "
                f"posteriors of {what} go back to what they were before it, plus anything "
                "learnt since."
            )
            return Reply(ReplyKind.CONFIRM, (Text(text),), text)
        if isinstance(command, ResetCommand):
            if command.arms is None:
                count = len(service.posteriors())
                what = f"all {count} arms"
            else:
                ids = sorted({service.resolve_arm(a) for a in command.arms})
                count = len(ids)
                what = ", ".join(ids)
            text = (
                f"Reset {what} of learner '{service.learner}' to Beta(1,1) with 0 pulls? "
                "Status will count traces from now on. Nothing is deleted: "
                f"{command_prefix(surface)} reset undo brings the current posteriors back."
            )
            return Reply(ReplyKind.CONFIRM, (Text(text),), text, data={"armCount": count})
        if isinstance(command, PhaseCommand) and command.phase is not None:
            current = service.phase()
            traces = service.status().summary.trace_count
            lines = [
                f"Switch learner '{service.learner}' from {current.value} to {command.phase.value}?"
            ]
            data: dict[str, Any] = {}
            projected: list[str] = []
            if command.phase is Phase.ACTIVE:
                lines.append(
                    "Thompson Sampling will start leaving unhelpful arms out of prompts, "
                    "and the traces recorded while passive are folded into the posteriors."
                )
                if traces < MIN_TRACES_FOR_ACTIVE:
                    lines.append(
                        f"Warning: only {traces} trace(s) so far; posteriors are mostly "
                        f"priors until about {MIN_TRACES_FOR_ACTIVE}."
                    )
                projection = read_projection(service)
                projected = projection_lines(projection, prefix=command_prefix(surface))
                data = projection_data(projection)
            else:
                lines.append("Every arm will be included again and nothing is learnt from runs.")
            text = " ".join(lines)
            blocks = (Text(text), *(Text(line) for line in projected))
            return Reply(ReplyKind.CONFIRM, blocks, lines[0], data=data)
        raise ValueError(f"{command!r} needs no confirmation")

    def with_actions(self, prompt: Reply, token: str) -> Reply:
        if prompt.kind is not ReplyKind.CONFIRM:
            return prompt
        actions = Actions(
            (
                Action(
                    "Confirm",
                    "confirm",
                    token,
                    "danger",
                    "This changes what the learning layer does for everyone it serves here.",
                ),
                Action("Cancel", "cancel", token, "default"),
            )
        )
        return replace(
            prompt, blocks=(*prompt.blocks, actions), data={**prompt.data, "token": token}
        )

    def reset(
        self, service: LearningService, command: ResetCommand, actor: Any, surface: str = ""
    ) -> Reply:
        if command.undo:
            result = service.undo_reset(actor=actor.id)
            text = (
                f"Undid reset #{result.reset_id}: {result.reset_count} arm(s) have their "
                "posteriors back."
            )
            return Reply(
                ReplyKind.OK,
                (Text(text),),
                text,
                data={
                    "learner": result.learner,
                    "reset_count": result.reset_count,
                    "arm_ids": list(result.arm_ids),
                },
            )
        result = service.reset(command.arms, actor=actor.id)
        what = "every arm" if result.all_arms else ", ".join(result.arm_ids)
        text = (
            f"Reset {what} ({result.reset_count} arm(s), reset #{result.reset_id}). "
            f"Undo with {command_prefix(surface)} reset undo."
        )
        return Reply(
            ReplyKind.OK,
            (Text(text),),
            text,
            data={
                "learner": result.learner,
                "reset_count": result.reset_count,
                "arm_ids": list(result.arm_ids),
            },
        )

    # -- phase -----------------------------------------------------------------------------

    def phase(
        self, service: LearningService, command: PhaseCommand, actor: Any, surface: str = ""
    ) -> Reply:
        if command.phase is None or command.phase is service.phase():
            current = service.phase()
            explain = (
                "every arm is included and runs are only recorded"
                if current is Phase.PASSIVE
                else "Thompson Sampling picks each prompt's arms under the token budget"
            )
            other = "active" if current is Phase.PASSIVE else "passive"
            text = f"Phase: {current.value.upper()} — {explain}."
            projection = read_projection(service)
            prefix = command_prefix(surface)
            return Reply(
                ReplyKind.INFO,
                (
                    Text(text),
                    *(
                        Text(line)
                        for line in projection_lines(projection, current is Phase.ACTIVE, prefix)
                    ),
                    Text(f"Switch with {prefix} phase {other}.", muted=True),
                ),
                text,
                data={
                    "phase": current.value,
                    "learner": service.learner,
                    **projection_data(projection),
                    **(
                        {"projectedAtSwitch": achieved_data(service)}
                        if current is Phase.ACTIVE
                        else {}
                    ),
                },
            )
        shown = read_projection(service) if command.phase is Phase.ACTIVE else None
        change = service.set_phase(command.phase, actor=actor.id)
        if shown is not None and change.changed:
            keep_projection(service, shown)
        lines = [f"Phase is now {change.phase.value.upper()} (was {change.previous.value})."]
        if change.bootstrapped_traces:
            lines.append(
                f"Folded {change.bootstrapped_traces:,} passive trace(s) into the posteriors."
            )
        blocks: list[Any] = [Text(lines[0])]
        blocks.extend(Text(line, muted=True) for line in lines[1:])
        if change.warning:
            blocks.append(Text(f"Warning: {change.warning}."))
        return Reply(
            ReplyKind.OK,
            tuple(blocks),
            lines[0],
            data={
                "phase": change.phase.value,
                "previous": change.previous.value,
                "warning": change.warning,
                "bootstrappedTraces": change.bootstrapped_traces,
            },
        )

    # -- config ----------------------------------------------------------------------------

    def config(
        self, service: LearningService, command: ConfigCommand, actor: Any, surface: str = ""
    ) -> Reply:
        """Show the learner's settings, or change them through LearningService.set_settings
        (the one validation, shared with `learning-bot learner set`). Setting what is already
        stored writes nothing and says so."""
        service.refresh(force=True)
        before = service.config.to_dict(complete=True)
        if not command.changes:
            return self._settings_reply(
                service, ReplyKind.INFO, f"Settings of learner '{service.learner}'.", surface
            )
        changes = dict(command.changes)
        if len(changes) != len(command.changes):
            raise InvalidInput("settings: a key is given twice")
        try:
            unchanged = (
                "phase" not in changes
                and service.config.merged(changes).to_dict(complete=True) == before
            )
        except InvalidConfig:
            unchanged = False  # set_settings refuses it with the field named
        if unchanged:
            return self._settings_reply(
                service,
                ReplyKind.INFO,
                f"Learner '{service.learner}' already has "
                + ", ".join(f"{k} = {json.dumps(v)}" for k, v in command.changes)
                + "; nothing changed.",
                surface,
                changed=(),
            )
        service.set_settings(changes, actor=actor.id)
        after = service.config.to_dict(complete=True)
        changed = tuple(k for k in sorted(after) if after[k] != before.get(k))
        text = f"Learner '{service.learner}' settings changed: " + ", ".join(
            f"{k} {json.dumps(before.get(k))} -> {json.dumps(after[k])}" for k in changed
        )
        return self._settings_reply(service, ReplyKind.OK, text, surface, changed=changed)

    def _settings_reply(
        self,
        service: LearningService,
        kind: ReplyKind,
        text: str,
        surface: str,
        changed: tuple[str, ...] | None = None,
    ) -> Reply:
        stored = service.config.to_dict(complete=True)
        stored.pop("phase", None)
        rows = tuple((key, json.dumps(stored[key])) for key in sorted(stored))
        data: dict[str, Any] = {"learner": service.learner, "settings": stored}
        if changed is not None:
            data["changed"] = list(changed)
        return Reply(
            kind,
            (
                Text(text),
                Fields(rows),
                Text(
                    f"Change one with {command_prefix(surface)} config <key> <value>.", muted=True
                ),
            ),
            text,
            data=data,
        )

    # -- help, confirmations -----------------------------------------------------------------

    def help(self, command: HelpCommand, surface: str = "") -> Reply:
        return help_reply(command.topic, surface)

    def outcome(self, reply: Reply, actor: Any) -> Reply:
        """The result of a confirmed command, as it replaces the confirmation prompt."""
        if not reply.ok:
            return reply
        note = Text(f"Confirmed by {actor.display}.", muted=True)
        return replace(
            reply,
            blocks=(*reply.blocks, note),
            replaces_prompt=True,
            confirmed_by=actor.display,
        )

    def already_done(self, pending: PendingConfirmation) -> Reply:
        if pending.outcome:
            previous = reply_from_json(json.loads(pending.outcome))
            text = f"Already done: {previous.summary}"
        else:
            text = "This was already confirmed or cancelled."
        return Reply(
            ReplyKind.INFO,
            (Text(text),),
            text,
            data={"alreadyDone": True, "by": pending.used_by},
        )

    def cancelled(self, pending: PendingConfirmation, actor: Any) -> Reply:
        text = f"Cancelled by {actor.display}; nothing changed."
        return Reply(ReplyKind.INFO, (Text(text),), text, cancelled=True, replaces_prompt=True)
