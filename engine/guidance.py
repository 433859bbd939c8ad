"""The guidance sentence: the line of the system prompt that names the tools left out of a
prompt, so that the model can say a capability is unavailable instead of inventing it."""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from learning_bot.engine.arms import ArmType, parse_arm_id
from learning_bot.engine.errors import InvalidArmId
from learning_bot.engine.text import strip_controls

MAX_GUIDANCE_NAME = 64


def clean_name(name: str) -> str:
    """A tool's name as the sentence shows it: control characters stripped, at most
    MAX_GUIDANCE_NAME characters."""
    return strip_controls(name, "").strip()[:MAX_GUIDANCE_NAME]


@lru_cache(maxsize=16384)
def _excluded_tool_name(arm_id: str) -> str | None:
    """The name the guidance shows for an excluded id, or None when it is not a tool's."""
    try:
        parsed = parse_arm_id(strip_controls(arm_id, ""))
    except InvalidArmId:
        return None
    if parsed.type is not ArmType.TOOL:
        return None
    return clean_name(parsed.name) or None


def guidance_sentence(names: Iterable[str | None]) -> str | None:
    """The sentence naming `names` (each once, in order; None and empty names left out), or
    None when no name is left."""
    shown = [name for name in dict.fromkeys(names) if name]
    if not shown:
        return None
    listed = ", ".join(shown)
    return (
        f"The following tools are not available for this request: {listed}. "
        "If the user asks for something that needs one of them, explain that the capability "
        "is temporarily unavailable and suggest an alternative."
    )


def excluded_tools_guidance(excluded_ids: Iterable[str]) -> str | None:
    """A sentence for the system prompt naming unavailable tools, or None when none is excluded."""
    return guidance_sentence(
        _excluded_tool_name(arm_id) for arm_id in excluded_ids if isinstance(arm_id, str)
    )
