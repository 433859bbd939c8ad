"""`/learning reward [<arm-id-or-label>] [<word>] [reason...] [public]`: manual (lagged)
feedback for an arm, or for the arms of this conversation's latest run. The words are
engine.reward_words' (1, 0, good, bad, accepted, rejected)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from learning_bot.bot.commands.base import (
    MAX_ARM_CHARS,
    PUBLIC,
    CommandSpec,
    Context,
    Form,
    Gate,
    Option,
    Terminal,
    UsageError,
    always,
    ends_with,
    members,
    never,
    shown,
)
from learning_bot.bot.formatting import POSTERIOR_COLUMNS, posterior_row
from learning_bot.bot.invocation import Command, Invocation
from learning_bot.bot.replies import Reply, ReplyKind, Table, Text, Visibility
from learning_bot.bot.shapes import arm_json
from learning_bot.engine.bounds import MAX_REASON_CHARS
from learning_bot.engine.errors import Forbidden
from learning_bot.engine.reward_words import REWARD_WORDS, reward_of_word

CHOICES = ("good", "bad")
"""The words Discord offers as the value's choices."""


@dataclass(frozen=True, slots=True)
class RewardCommand(Command):
    arm: str | None = None
    value: float = 1.0
    reason: str | None = None
    public: bool = False


def _looks_numeric(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def parse(rest: list[str]) -> RewardCommand:
    arm: str | None = None
    value = 1.0
    public, rest = ends_with(rest, "public")
    i = 0
    if i < len(rest) and rest[i].lower() not in REWARD_WORDS and not _looks_numeric(rest[i]):
        arm = rest[i]
        i += 1
    if i < len(rest):
        known = reward_of_word(rest[i])
        if known is not None:
            value = known
            i += 1
        elif _looks_numeric(rest[i]):
            raise UsageError(f"reward value {shown(rest[i])!r} is not 1, 0, good or bad", "reward")
    reason = " ".join(rest[i:]).strip() or None
    if reason is not None and len(reason) > MAX_REASON_CHARS:
        raise UsageError(f"the reason is longer than {MAX_REASON_CHARS} characters", "reward")
    return RewardCommand(arm=arm, value=value, reason=reason, public=public)


def access(gate: Gate, invocation: Invocation, command: RewardCommand) -> None:
    """Everyone but guests; only admins where rewards are for admins."""
    members(gate, invocation, command)
    if gate.reward_admins_only and not gate.is_admin(invocation):
        raise Forbidden("Only admins can give rewards in this workspace.")


def run(ctx: Context, command: RewardCommand) -> Reply:
    service, actor, conversation = ctx.service(), ctx.actor, ctx.conversation
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


# -- the declaration -------------------------------------------------------------------


def _from_options(values: Mapping[str, Any]) -> RewardCommand:
    return RewardCommand(
        arm=values["arm"],
        value=REWARD_WORDS[values["value"] or "good"],
        reason=values["reason"],
        public=values["public"],
    )


SPEC = CommandSpec(
    name="reward",
    type=RewardCommand,
    run=run,
    order=20,
    grammar=("reward [<arm-id-or-label>] [1|0|good|bad] [reason...]",),
    help=(
        "{cmd} reward [<arm>] [1|0|good|bad] [reason...] — manual (lagged) feedback. "
        "Without an arm, the arms the latest run in this conversation used get the reward. "
        "An arm is its full id (tool:fs:Read) or its label (Read)."
    ),
    parse=parse,
    access=access,
    mutating=always,
    creates=never,
    from_json=lambda d: RewardCommand(d["arm"], d["value"], d["reason"], d["public"]),
    words=("good", "bad", "1", "0"),
    arms="first",
    terminal=Terminal(
        "reward — manual (lagged) feedback for an arm, or for the arms of a conversation's "
        "latest run",
        "[<arm>] [1|0|good|bad] [reason...]: the arm by id (tool:fs:Read) or label (Read); "
        "without an arm, --conversation names the run; then the value (default good) and an "
        "optional reason",
        conversation=True,
    ),
    form=Form(
        "Manual feedback for an arm, or for the arms this channel's latest run used",
        (
            Option(
                "arm",
                str,
                "The arm's id or label (leave out to reward this channel's latest run)",
                limit=MAX_ARM_CHARS,
                autocomplete="arm",
            ),
            Option(
                "value", str, "good (1) or bad (0); default good", default="good", choices=CHOICES
            ),
            Option(
                "reason",
                str,
                "Why, kept with the reward (at most 500 characters)",
                low=1,
                high=MAX_REASON_CHARS,
            ),
            PUBLIC,
        ),
        build=_from_options,
        public=lambda command: command.public,
    ),
)
