"""What the service's use cases check and clean before they act: reward values, free texts,
pages of traces, and the request context a select or a run carries (never its message text
once stored)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from learning_bot.engine.bounds import MAX_ACTOR_CHARS, MAX_PAGE
from learning_bot.engine.errors import InvalidInput
from learning_bot.engine.posterior import check_reward
from learning_bot.engine.reward_words import reward_of_word
from learning_bot.engine.text import strip_controls

if TYPE_CHECKING:
    from learning_bot.engine.context import RequestContext
    from learning_bot.engine.observation import RunReport


def reward_value(value: str | float | int) -> float:
    """1 / 0 / good / bad / accepted / rejected, or a number in [0, 1]."""
    if isinstance(value, str):
        word = value.strip().lower()
        known = reward_of_word(word)
        if known is not None:
            return known
        try:
            number = float(word)
        except ValueError:
            raise InvalidInput(
                f"reward value {value[:40]!r} is not 1, 0, good, bad or a number in [0, 1]"
            ) from None
        return check_reward(number)
    return check_reward(value)


def clean_text(name: str, value: str | None, limit: int) -> str | None:
    """A free text (actor, reason) with control characters made spaces; None when empty."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string")
    cleaned = strip_controls(value).strip()
    if len(cleaned) > limit:
        raise InvalidInput(f"{name} is longer than {limit} characters")
    return cleaned or None


def recorded_actor(actor: str | None) -> str:
    """Who made a change, as it is recorded: cleaned as `clean_text` cleans, "unknown" when
    empty."""
    return clean_text("actor", actor, MAX_ACTOR_CHARS) or "unknown"


def check_page(limit: int, offset: int) -> None:
    """A page of traces: limit 1 to MAX_PAGE, offset from 0."""
    for name, value, low, high in (
        ("limit", limit, 1, MAX_PAGE),
        ("offset", offset, 0, 10**12),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise InvalidInput(f"{name} must be a whole number from {low} to {high}")


def request_of(context: Mapping[str, Any] | None) -> RequestContext | None:
    """The request context a select carries (checked), or None without one."""
    if not context:
        return None
    from learning_bot.engine.context import RequestContext

    return RequestContext.of(context)


def stored(context: Mapping[str, Any]) -> dict[str, Any]:
    """A context as a run keeps it: never the message text (engine.context)."""
    if "message" not in context:
        return dict(context)
    from learning_bot.engine.context import stored_context

    return stored_context(context)


def with_loaded(report: RunReport) -> RunReport:
    """The report as observed: the deferred arms the model loaded through tool search
    (`context.loaded`) count as included, so a loaded arm the model used is referenced, and the
    message text is not stored."""
    context = report.context
    if not context:
        return report
    from learning_bot.engine.context import loaded_arms

    loaded = set(loaded_arms(context))
    arms = report.arms
    if loaded:
        arms = tuple(
            replace(item, included=True)
            if not item.included and (item.arm.id in loaded or item.arm.name in loaded)
            else item
            for item in arms
        )
    if "message" not in context and arms is report.arms:
        return report
    return replace(report, arms=arms, context=stored(context))
