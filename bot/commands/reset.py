"""`/learning reset [all | <arm ids...>] [confirm]` and `reset undo [confirm]`: arms back to
Beta(1,1) with 0 pulls (nothing deleted), or the last reset undone; admins only, and it asks
for confirmation first."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from learning_bot.bot.commands.base import (
    MAX_ARM_CHARS,
    CommandSpec,
    Context,
    Form,
    Option,
    Terminal,
    UsageError,
    admins,
    always,
    ends_with,
    never,
    unexpected,
    with_confirm,
)
from learning_bot.bot.formatting import command_prefix, fmt_time
from learning_bot.bot.invocation import Command
from learning_bot.bot.replies import Reply, ReplyKind, Text
from learning_bot.engine.bounds import MAX_CHAT_RESET_ARMS
from learning_bot.engine.errors import InvalidInput

MAX_ARMS_TEXT = 4000

if TYPE_CHECKING:
    from learning_bot.engine.results import ResetResult
    from learning_bot.engine.service import LearningService


@dataclass(frozen=True, slots=True)
class ResetCommand(Command):
    arms: tuple[str, ...] | None = None
    """None resets every arm."""
    undo: bool = False
    confirm: bool = False


def parse(rest: list[str]) -> ResetCommand:
    confirm, rest = ends_with(rest, "confirm")
    if rest and rest[0].lower() == "undo":
        if len(rest) > 1:
            raise unexpected(rest[1], "reset undo", "reset")
        return ResetCommand(undo=True, confirm=confirm)
    if not rest or (len(rest) == 1 and rest[0].lower() == "all"):
        return ResetCommand(arms=None, confirm=confirm)
    if any(word.lower() in ("all", "undo", "confirm") for word in rest):
        raise UsageError("use 'reset all', 'reset undo' or 'reset <arm ids...>'", "reset")
    if len(rest) > MAX_CHAT_RESET_ARMS:
        raise UsageError(f"at most {MAX_CHAT_RESET_ARMS} arms per reset", "reset")
    return ResetCommand(arms=tuple(rest), confirm=confirm)


def confirmation(service: LearningService, command: ResetCommand, surface: str = "") -> Reply:
    """The question a reset asks before it runs (an error when there is nothing to undo)."""
    if command.undo:
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
    if command.arms is None:
        count = len(service.posteriors())
        if count == 0:
            text = f"Learner '{service.learner}' has no arms yet: there is nothing to reset."
            return Reply(ReplyKind.INFO, (Text(text),), text, data={"armCount": 0})
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


def run(ctx: Context, command: ResetCommand) -> Reply:
    service = ctx.service()
    if not command.confirm:
        return ctx.ask(confirmation(service, command, ctx.surface))
    if command.undo:
        undone = service.undo_reset(actor=ctx.actor.id)
        text = (
            f"Undid reset #{undone.reset_id}: {undone.reset_count} arm(s) have their "
            "posteriors back."
        )
        return _done(text, undone)
    result = service.reset(command.arms, actor=ctx.actor.id)
    what = "every arm" if result.all_arms else ", ".join(result.arm_ids)
    text = (
        f"Reset {what} ({result.reset_count} arm(s), reset #{result.reset_id}). "
        f"Undo with {command_prefix(ctx.surface)} reset undo."
    )
    return _done(text, result)


def _done(text: str, result: ResetResult) -> Reply:
    """A reset, or its undoing, done: the text, and the arms it set."""
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


def from_arms_option(values: Mapping[str, Any]) -> ResetCommand:
    """The `arms` option: `all`, `undo`, or arm ids/labels separated by spaces or commas
    (quote an id that holds a space). Never `confirm`: resetting always asks through the
    buttons."""
    text = values["arms"]
    lexer = shlex.shlex(text, posix=True)
    lexer.whitespace_split = True
    lexer.whitespace += ","
    lexer.commenters = ""
    lexer.escape = ""
    try:
        words = [w for w in lexer if w]
    except ValueError:
        raise InvalidInput("arms has an unbalanced quote") from None
    lowered = [w.lower() for w in words]
    if lowered == ["all"]:
        return ResetCommand(arms=None)
    if lowered == ["undo"]:
        return ResetCommand(undo=True)
    if not words or any(w in ("all", "undo", "confirm") for w in lowered):
        raise InvalidInput("arms takes all, undo, or arm ids or labels separated by spaces")
    if len(words) > MAX_CHAT_RESET_ARMS:
        raise InvalidInput(f"arms names {len(words)} arms; at most {MAX_CHAT_RESET_ARMS} per reset")
    for word in words:
        if len(word) > MAX_ARM_CHARS:
            raise InvalidInput(f"an arm id in arms is longer than {MAX_ARM_CHARS} characters")
    return ResetCommand(arms=tuple(dict.fromkeys(words)))


SPEC = CommandSpec(
    name="reset",
    type=ResetCommand,
    run=run,
    order=30,
    grammar=("reset [all | <arm ids...>] [confirm]", "reset undo [confirm]"),
    help=(
        "{cmd} reset [all | <arm ids...>] — puts arms back to Beta(1,1) with 0 pulls; "
        "nothing is deleted and {cmd} reset undo restores them. Admins only; asks "
        "for confirmation (or add 'confirm')."
    ),
    parse=parse,
    access=admins("reset posteriors"),
    mutating=always,
    creates=never,
    asks=lambda command: not command.confirm,
    confirmed=with_confirm,
    from_json=lambda d: ResetCommand(
        tuple(d["arms"]) if d.get("arms") is not None else None, d["undo"], d["confirm"]
    ),
    words=("all", "undo"),
    arms="any",
    terminal=Terminal(
        "reset — put arms back to Beta(1,1) with 0 pulls (nothing is deleted; `reset undo` "
        "restores them)",
        "[all | <arm ids or labels...>] | undo: which arms (default all), or undo the last reset",
        confirm=True,
    ),
    form=Form(
        "Put arms back to Beta(1,1) with 0 pulls (admins; asks to confirm)",
        (
            Option(
                "arms",
                str,
                "all, undo (the last reset), or arm ids or labels separated by spaces",
                required=True,
                low=1,
                high=MAX_ARMS_TEXT,
                autocomplete="arms",
            ),
        ),
        build=from_arms_option,
    ),
)
