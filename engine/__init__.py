"""The learning layer: arms, Beta posteriors, Thompson selection, reference detection, rewards.

Pure Python and numpy; no I/O and no import of any other package of this project.
"""

from typing import TYPE_CHECKING, Any

# Every name is imported from its module on first use: a tool that needs one module (the
# command line's settings need engine.config) does not pay for the others, and numpy waits for
# selection.
_EXPORTS = {
    "engine.arms": (
        "MAX_ARM_ID_LENGTH",
        "Arm",
        "ArmId",
        "ArmType",
        "build_arm_id",
        "estimate_tokens",
        "parse_arm_id",
    ),
    "engine.config": ("DEFAULT_SEED_ARM_IDS", "LearningConfig", "Phase"),
    "engine.errors": (
        "Ambiguous",
        "Conflict",
        "Forbidden",
        "InvalidArmId",
        "InvalidConfig",
        "InvalidInput",
        "LearningError",
        "NotFound",
        "Unavailable",
    ),
    "engine.metrics": ("recommended_baseline_rate", "token_savings_percent"),
    "engine.observation": (
        "MAX_ARMS_PER_RUN",
        "MAX_TEXT_CHARS",
        "ReportedArm",
        "RunOutcome",
        "RunReport",
        "RunText",
        "SkipReason",
        "ToolCall",
        "Usage",
        "detect_reference",
        "observation_guard",
        "referenced_arms",
        "rewards_for_run",
    ),
    "engine.posterior": (
        "Confidence",
        "Posterior",
        "check_reward",
        "confidence_for_pulls",
        "initial_prior",
        "now_ms",
    ),
    "engine.guidance": ("excluded_tools_guidance",),
    "engine.inventory": ("ArmSet", "align_posteriors", "PosteriorArrays"),
    "engine.selection": ("Selection", "include_everything", "select_arms"),
}
_LAZY = {name: module for module, names in _EXPORTS.items() for name in names}

if TYPE_CHECKING:
    from engine.arms import (
        MAX_ARM_ID_LENGTH,
        Arm,
        ArmId,
        ArmType,
        build_arm_id,
        estimate_tokens,
        parse_arm_id,
    )
    from engine.config import DEFAULT_SEED_ARM_IDS, LearningConfig, Phase
    from engine.errors import (
        Ambiguous,
        Conflict,
        Forbidden,
        InvalidArmId,
        InvalidConfig,
        InvalidInput,
        LearningError,
        NotFound,
        Unavailable,
    )
    from engine.guidance import excluded_tools_guidance
    from engine.inventory import ArmSet, PosteriorArrays, align_posteriors
    from engine.metrics import recommended_baseline_rate, token_savings_percent
    from engine.observation import (
        MAX_ARMS_PER_RUN,
        MAX_TEXT_CHARS,
        ReportedArm,
        RunOutcome,
        RunReport,
        RunText,
        SkipReason,
        ToolCall,
        Usage,
        detect_reference,
        observation_guard,
        referenced_arms,
        rewards_for_run,
    )
    from engine.posterior import (
        Confidence,
        Posterior,
        check_reward,
        confidence_for_pulls,
        initial_prior,
        now_ms,
    )
    from engine.selection import Selection, include_everything, select_arms


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_SEED_ARM_IDS",
    "MAX_ARMS_PER_RUN",
    "MAX_ARM_ID_LENGTH",
    "MAX_TEXT_CHARS",
    "Ambiguous",
    "Arm",
    "ArmId",
    "ArmSet",
    "ArmType",
    "Confidence",
    "Conflict",
    "Forbidden",
    "InvalidArmId",
    "InvalidConfig",
    "InvalidInput",
    "LearningConfig",
    "LearningError",
    "NotFound",
    "Phase",
    "Posterior",
    "PosteriorArrays",
    "ReportedArm",
    "RunOutcome",
    "RunReport",
    "RunText",
    "Selection",
    "SkipReason",
    "ToolCall",
    "Unavailable",
    "Usage",
    "align_posteriors",
    "build_arm_id",
    "check_reward",
    "confidence_for_pulls",
    "detect_reference",
    "estimate_tokens",
    "excluded_tools_guidance",
    "include_everything",
    "initial_prior",
    "now_ms",
    "observation_guard",
    "parse_arm_id",
    "recommended_baseline_rate",
    "referenced_arms",
    "rewards_for_run",
    "select_arms",
    "token_savings_percent",
]
