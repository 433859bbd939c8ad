"""`/learning phase [passive|active] [confirm]`: shows the phase, or switches it (admins;
asks for confirmation first, with what going active is projected to do)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from learning_bot.bot.commands.base import (
    CommandSpec,
    Context,
    Form,
    Option,
    Terminal,
    UsageError,
    admins,
    ends_with,
    shown,
    unexpected,
    with_confirm,
)
from learning_bot.bot.formatting import command_prefix
from learning_bot.bot.invocation import Actor, Command
from learning_bot.bot.phase_view import (
    achieved_data,
    projection_data,
    projection_lines,
    read_projection,
)
from learning_bot.bot.replies import Reply, ReplyKind, Text
from learning_bot.engine.config import Phase
from learning_bot.engine.phase_projection import keep_projection

PHASES = ("passive", "active")

if TYPE_CHECKING:
    from learning_bot.engine.service import LearningService


@dataclass(frozen=True, slots=True)
class PhaseCommand(Command):
    phase: Phase | None = None
    """None shows the current phase."""
    confirm: bool = False


def parse(rest: list[str]) -> PhaseCommand:
    confirm, rest = ends_with(rest, "confirm")
    if not rest:
        if confirm:
            raise UsageError("'confirm' needs a phase: phase active confirm", "phase")
        return PhaseCommand()
    if len(rest) > 1:
        raise unexpected(rest[1], "phase")
    word = rest[0].lower()
    if word not in PHASES:
        raise UsageError(f"unknown phase {shown(rest[0])!r}; use passive or active", "phase")
    return PhaseCommand(Phase(word), confirm)


def run(ctx: Context, command: PhaseCommand) -> Reply:
    service = ctx.service()
    if command.phase is not None and not command.confirm and command.phase is not service.phase():
        return ctx.ask(confirmation(service, command, ctx.surface))
    return show_or_set(service, command, ctx.actor, ctx.surface)


def confirmation(service: LearningService, command: PhaseCommand, surface: str = "") -> Reply:
    """The question a phase switch asks before it runs, with what going active projects."""
    assert command.phase is not None
    current = service.phase()
    traces = service.status().summary.trace_count
    lines = [f"Switch learner '{service.learner}' from {current.value} to {command.phase.value}?"]
    data: dict[str, Any] = {}
    projected: list[str] = []
    if command.phase is Phase.ACTIVE:
        from learning_bot.engine.changes import MIN_TRACES_FOR_ACTIVE

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


def show_or_set(
    service: LearningService, command: PhaseCommand, actor: Actor, surface: str = ""
) -> Reply:
    """The phase (when the command names none, or the current one), or the switch."""
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
                    {"projectedAtSwitch": achieved_data(service)} if current is Phase.ACTIVE else {}
                ),
            },
        )
    shown = read_projection(service) if command.phase is Phase.ACTIVE else None
    change = service.set_phase(command.phase, actor=actor.id)
    if shown is not None and change.changed:
        keep_projection(service, shown)
    lines = [f"Phase is now {change.phase.value.upper()} (was {change.previous.value})."]
    if change.bootstrapped_traces:
        lines.append(f"Folded {change.bootstrapped_traces:,} passive trace(s) into the posteriors.")
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


# -- the declaration -------------------------------------------------------------------


def _from_options(values: Mapping[str, Any]) -> PhaseCommand:
    word = values["phase"]
    return PhaseCommand(Phase(word) if word else None)


def _changes(command: PhaseCommand) -> bool:
    return command.phase is not None


SPEC = CommandSpec(
    name="phase",
    type=PhaseCommand,
    run=run,
    order=40,
    grammar=("phase [passive|active] [confirm]",),
    help=(
        "{cmd} phase [passive|active] — shows or sets the phase. passive: every arm is "
        "included and nothing is learnt from; active: Thompson Sampling picks arms under "
        "the token budget. Changing it is for admins and asks for confirmation."
    ),
    parse=parse,
    access=admins("change the phase"),
    mutating=_changes,
    asks=lambda command: command.phase is not None and not command.confirm,
    confirmed=with_confirm,
    from_json=lambda d: PhaseCommand(Phase(d["phase"]) if d["phase"] else None, d["confirm"]),
    words=PHASES,
    terminal=Terminal(
        "phase — show the phase, or set it: passive records only, active selects arms",
        "[passive|active]: the phase to switch to; without it, the current phase is shown",
        confirm=True,
    ),
    form=Form(
        "Show the phase, or set it (admins; asks to confirm)",
        (
            Option(
                "phase",
                str,
                "passive: include every arm, learn nothing; active: Thompson Sampling picks arms",
                choices=PHASES,
            ),
        ),
        build=_from_options,
    ),
)
