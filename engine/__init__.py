"""The learning layer: arms, Beta posteriors, Thompson selection, reference detection, rewards.

Pure Python and numpy; no I/O and no import of any other package of this project.
"""

from typing import TYPE_CHECKING

from learning_bot.engine.lazy import lazy_getattr, lazy_names

# Every name is imported from its module on first use: a tool that needs one module (the
# command line's settings need engine.config) does not pay for the others, and numpy waits for
# selection.
_EXPORTS = {
    "learning_bot.engine.arms": (
        "MAX_ARM_ID_LENGTH",
        "Arm",
        "ArmId",
        "ArmType",
        "build_arm_id",
        "estimate_tokens",
        "parse_arm_id",
    ),
    "learning_bot.engine.config": ("DEFAULT_SEED_ARM_IDS", "LearningConfig", "Phase"),
    "learning_bot.engine.errors": (
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
    "learning_bot.engine.metrics": ("recommended_baseline_rate", "token_savings_percent"),
    "learning_bot.engine.observation": (
        "MAX_ARMS_PER_RUN",
        "MAX_TEXT_CHARS",
        "ReportedArm",
        "RunOutcome",
        "RunReport",
        "RunText",
        "SkipReason",
        "ToolCall",
        "detect_reference",
        "observation_guard",
        "referenced_arms",
        "rewards_for_run",
    ),
    "learning_bot.engine.posterior": (
        "Confidence",
        "Posterior",
        "check_reward",
        "confidence_for_pulls",
        "initial_prior",
        "now_ms",
    ),
    "learning_bot.engine.guidance": ("excluded_tools_guidance",),
    "learning_bot.engine.inventory": ("ArmSet", "align_posteriors", "PosteriorArrays"),
    "learning_bot.engine.selection": ("Selection", "include_everything", "select_arms"),
    "learning_bot.engine.usage": ("Usage",),
}
_LAZY = lazy_names(_EXPORTS)

if TYPE_CHECKING:
    from learning_bot.engine.arms import (
        MAX_ARM_ID_LENGTH,
        Arm,
        ArmId,
        ArmType,
        build_arm_id,
        estimate_tokens,
        parse_arm_id,
    )
    from learning_bot.engine.config import DEFAULT_SEED_ARM_IDS, LearningConfig, Phase
    from learning_bot.engine.errors import (
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
    from learning_bot.engine.guidance import excluded_tools_guidance
    from learning_bot.engine.inventory import ArmSet, PosteriorArrays, align_posteriors
    from learning_bot.engine.metrics import recommended_baseline_rate, token_savings_percent
    from learning_bot.engine.observation import (
        MAX_ARMS_PER_RUN,
        MAX_TEXT_CHARS,
        ReportedArm,
        RunOutcome,
        RunReport,
        RunText,
        SkipReason,
        ToolCall,
        detect_reference,
        observation_guard,
        referenced_arms,
        rewards_for_run,
    )
    from learning_bot.engine.posterior import (
        Confidence,
        Posterior,
        check_reward,
        confidence_for_pulls,
        initial_prior,
        now_ms,
    )
    from learning_bot.engine.selection import Selection, include_everything, select_arms
    from learning_bot.engine.usage import Usage


__getattr__ = lazy_getattr(__name__, globals(), _LAZY)


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
