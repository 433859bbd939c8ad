"""The learner's arm ids and labels, for a surface's autocomplete (never typed)."""

from __future__ import annotations

from dataclasses import dataclass

from learning_bot.bot.commands.base import CommandSpec, Context, anyone
from learning_bot.bot.invocation import Command
from learning_bot.bot.replies import Reply, ReplyKind


@dataclass(frozen=True, slots=True)
class ArmNamesQuery(Command):
    """The learner's arm ids and labels, for a surface's autocomplete (never typed)."""


def run(ctx: Context, command: ArmNamesQuery) -> Reply:
    names = tuple((v.arm_id, v.label) for v in ctx.service().posteriors())
    return Reply(ReplyKind.INFO, (), f"{len(names)} arms", arm_names=names)


SPEC = CommandSpec(name="arm_names", type=ArmNamesQuery, run=run, order=3000, access=anyone)
