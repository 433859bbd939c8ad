"""How a confirmation prompt, and what comes of it, read: its buttons, the confirmed
outcome, a second click, a cancel."""

from __future__ import annotations

import json
from dataclasses import replace

from learning_bot.bot.invocation import Actor
from learning_bot.bot.ports import PendingConfirmation
from learning_bot.bot.replies import Action, Actions, Reply, ReplyKind, Text
from learning_bot.bot.shapes import reply_from_json


def with_actions(prompt: Reply, token: str) -> Reply:
    """A confirmation prompt with its confirm and cancel buttons (any other reply as it is)."""
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
    return replace(prompt, blocks=(*prompt.blocks, actions), data={**prompt.data, "token": token})


def outcome(reply: Reply, actor: Actor) -> Reply:
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


def already_done(pending: PendingConfirmation) -> Reply:
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


def cancelled(pending: PendingConfirmation, actor: Actor) -> Reply:
    text = f"Cancelled by {actor.display}; nothing changed."
    return Reply(ReplyKind.INFO, (Text(text),), text, cancelled=True, replaces_prompt=True)
