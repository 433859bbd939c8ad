"""LearningConfig: the learning layer's settings, validated, readable in either key style."""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from learning_bot.engine.arms import parse_arm_id
from learning_bot.engine.bounds import MAX_COUNT
from learning_bot.engine.errors import InvalidArmId, InvalidConfig


class Phase(enum.StrEnum):
    """passive: observe and record only; active: select arms and update posteriors."""

    PASSIVE = "passive"
    ACTIVE = "active"


DEFAULT_SEED_ARM_IDS: tuple[str, ...] = (
    "tool:fs:Read",
    "tool:fs:Write",
    "tool:fs:Edit",
    "tool:exec:Bash",
    "tool:fs:Glob",
    "tool:fs:Grep",
)
STRATEGIES = ("thompson",)
PACKINGS = ("score", "score_per_token")
"""How the arms that are not forced in are ranked for the greedy packing: by their sampled
score (SPEC section 4), or by sampled score per token of cost."""

# snake_case attribute -> the original camelCase key
_CAMEL = {
    "enabled": "enabled",
    "phase": "phase",
    "strategy": "strategy",
    "token_budget": "tokenBudget",
    "baseline_rate": "baselineRate",
    "min_pulls": "minPulls",
    "seed_arm_ids": "seedArmIds",
    "meta_tools": "metaTools",
    "packing": "packing",
    "min_score": "minScore",
    "exploration": "exploration",
    "pooled_prior": "pooledPrior",
    "half_life": "halfLife",
    "policy": "policy",
    "seed_boost": "seedBoost",
    "session_idle_seconds": "sessionIdleSeconds",
    "session_growth": "sessionGrowth",
    "recall_target": "recallTarget",
    "provider": "provider",
    "model": "model",
}
POLICIES: dict[str, dict[str, Any]] = {
    "seed": {
        "packing": "score",
        "min_score": 0.0,
        "exploration": 1.0,
        "pooled_prior": False,
        "half_life": 0.0,
    },
    "pooled-forgetting": {
        "packing": "score",
        "min_score": 0.0,
        "exploration": 1.0,
        "pooled_prior": True,
        "half_life": 100.0,
    },
    "pooled-forgetting-per-token": {
        "packing": "score_per_token",
        "min_score": 0.0,
        "exploration": 0.5,
        "pooled_prior": True,
        "half_life": 50.0,
    },
}
"""Named policies: the options each sets. "seed" is exactly the seed documents' algorithm
(SPEC sections 4-5); the others add an empirical-Bayes pooled prior and forgetting:
"pooled-forgetting" with a half-life of 100 observations of an arm, and
"pooled-forgetting-per-token" with per-token packing, draws narrowed to half the posterior's
width (exploration 0.5) and a half-life of 50 (bench/learning.py chose these values). Options
given next to `policy` override the preset's values."""

SESSION_GROWTHS = ("append", "off")
"""What a session does with a tool the model called but the session had left out: "append"
it to the session's set for the next run, or leave the set as it is ("off")."""

MAX_SESSION_IDLE_SECONDS = 86_400
"""The longest a session's set is kept without a select: a day (prompt caches last minutes)."""

DEFAULT_POLICY = "pooled-forgetting-per-token"
"""The policy of a configuration that names none. In the study (bench/learning.py,
BENCHMARKS.md) it is no worse than the seed algorithm within two standard errors in every
scenario and better on average, which is the bar a preset must clear to become the default;
`policy = "seed"` keeps the seed documents' algorithm exactly."""

# Options beyond the original learning layer's: written out by `to_dict` only when they differ
# from their defaults, so a default configuration serialises as the original's keys alone.
_OPTIONAL_DEFAULTS: dict[str, Any] = {
    **POLICIES[DEFAULT_POLICY],
    "policy": DEFAULT_POLICY,
    "seed_boost": None,
    "session_idle_seconds": 300,
    "session_growth": "off",
    "recall_target": None,
    "provider": "",
    "model": "",
}
_SNAKE = {camel: snake for snake, camel in _CAMEL.items()}


def _whole(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise InvalidConfig(name, f"must be a whole number, got {value!r}")
    if value < minimum:
        raise InvalidConfig(name, f"must be >= {minimum}, got {value}")
    if value > MAX_COUNT:
        shown = value if value < 10**30 else f"a {len(str(value))}-digit number"
        raise InvalidConfig(name, f"must be at most {MAX_COUNT}, got {shown}")
    return int(value)


@dataclass(frozen=True, slots=True)
class LearningConfig:
    """Settings of one learner. Invalid values raise InvalidConfig naming the field."""

    enabled: bool = True
    phase: Phase = Phase.PASSIVE
    strategy: str = "thompson"
    token_budget: int = 8000
    baseline_rate: float = 0.10
    min_pulls: int = 5
    seed_arm_ids: tuple[str, ...] = DEFAULT_SEED_ARM_IDS
    meta_tools: frozenset[str] = field(default_factory=lambda: frozenset({"message"}))
    packing: str = POLICIES[DEFAULT_POLICY]["packing"]
    """"score" (SPEC section 4) or "score_per_token": rank by sampled score / token cost."""
    min_score: float = POLICIES[DEFAULT_POLICY]["min_score"]
    """Arms whose sampled score falls below this are left out even when the budget has room
    (seeds and under-explored arms still go in; baseline runs ignore it). 0 disables it."""
    exploration: float = POLICIES[DEFAULT_POLICY]["exploration"]
    """Width of the Thompson draw: 1 samples each posterior as it is (SPEC section 4); e < 1
    samples Beta(alpha/e, beta/e), same mean and about e times the variance; 0 uses the mean."""
    pooled_prior: bool = POLICIES[DEFAULT_POLICY]["pooled_prior"]
    """Empirical-Bayes Thompson draws: each arm's score comes from its evidence under a prior
    fitted to the evidence of every arm of the selection (a distribution of usage
    probabilities on a grid, fitted by binomial marginal likelihood, with a uniform share
    kept), so an arm seen a few times is judged by how arms in general turned out rather than
    by a flat prior. `exploration` tempers that posterior. False: each arm's own posterior.
    The fit costs about 4 ms per selection at 1,000 arms (it grows with the inventory), so it
    suits inventories of up to a few thousand arms."""
    half_life: float = POLICIES[DEFAULT_POLICY]["half_life"]
    """Forgetting, in observations of an arm: each observation first scales the evidence the
    arm holds beyond its prior by 0.5 ** (1 / half_life) (engine.forgetting), so what was
    learnt half_life observations ago counts half. 0 never forgets (SPEC section 5)."""
    policy: str = DEFAULT_POLICY
    """The named preset the options came from (POLICIES; DEFAULT_POLICY when none is named);
    "seed" is the seed algorithm."""
    seed_boost: float | None = None
    """None (default): seed arms start at their type's prior. A number b > 0: a seed arm
    seen for the first time starts at Beta(b, 1) instead (a reset still returns it to
    Beta(1, 1))."""
    session_idle_seconds: int = 300
    """A select naming a session returns the set decided on its first select, in the same
    order, until the session has been idle this long (SPEC section 4a): the providers' default
    prompt-cache lifetime, so a kept set keeps the cached prefix. 3600 suits 1-hour caching;
    0 draws anew on every select, as a select without a session does."""
    session_growth: str = "off"
    """"off" (default): a session's set stays as decided; "append": a tool the model called
    but the session had left out joins the set at the end for its next run. One of
    SESSION_GROWTHS. Appending changes the tool definitions, the head of the cached prefix, so
    the next prompt writes the whole conversation to the cache again: in the study
    (bench/sessions.py, BENCHMARKS.md) "off" costs less in every scenario at about the same
    recall."""
    recall_target: float | None = None
    """None (default): each set is packed up to `token_budget` (SPEC section 4). A share in
    (0, 1]: each set is the least-cost set whose estimated recall (engine.recall_target: the
    posterior mean use of the arms kept over that of every arm, under the request's context
    when it carries one) reaches it, with `token_budget` as a cap. Not with the seed policy,
    which keeps the seed documents' budget packing exactly."""
    provider: str = ""
    """The provider the learner's runtime calls (anthropic, openai, bedrock...), for selects
    and runs that name none: what a change of tools costs there (engine.providers) and how
    its cache is priced (engine.cost). Empty: a change of tools rewrites the cached prefix."""
    model: str = ""
    """The model, likewise (a prefix such as claude-sonnet-4-5 or gpt-5.4)."""

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if not isinstance(self.enabled, bool):
            raise InvalidConfig("enabled", f"must be true or false, got {self.enabled!r}")
        try:
            set_(self, "phase", Phase(self.phase))
        except ValueError:
            raise InvalidConfig(
                "phase", f"must be 'passive' or 'active', got {self.phase!r}"
            ) from None
        if self.strategy not in STRATEGIES:
            raise InvalidConfig(
                "strategy", f"must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}"
            )
        set_(self, "token_budget", _whole("token_budget", self.token_budget, 0))
        set_(self, "baseline_rate", _fraction("baseline_rate", self.baseline_rate))
        set_(self, "min_pulls", _whole("min_pulls", self.min_pulls, 0))
        set_(self, "seed_arm_ids", _string_tuple("seed_arm_ids", self.seed_arm_ids))
        for arm_id in self.seed_arm_ids:
            try:
                parse_arm_id(arm_id)
            except InvalidArmId as exc:
                raise InvalidConfig("seed_arm_ids", str(exc)) from None
        set_(self, "meta_tools", frozenset(_string_tuple("meta_tools", self.meta_tools)))
        if self.packing not in PACKINGS:
            raise InvalidConfig(
                "packing", f"must be one of {', '.join(PACKINGS)}, got {self.packing!r}"
            )
        set_(self, "min_score", _fraction("min_score", self.min_score))
        set_(self, "exploration", _fraction("exploration", self.exploration))
        if not isinstance(self.pooled_prior, bool):
            raise InvalidConfig("pooled_prior", f"must be true or false, got {self.pooled_prior!r}")
        set_(self, "half_life", _half_life(self.half_life))
        if self.policy not in POLICIES:
            raise InvalidConfig(
                "policy", f"must be one of {', '.join(POLICIES)}, got {self.policy!r}"
            )
        boost = self.seed_boost
        if boost is not None:
            if isinstance(boost, bool) or not isinstance(boost, (int, float)):
                raise InvalidConfig("seed_boost", f"must be a number > 0 or null, got {boost!r}")
            if not math.isfinite(boost) or not 0 < boost <= 1e6:
                raise InvalidConfig("seed_boost", f"must be above 0 and at most 1e6, got {boost!r}")
            set_(self, "seed_boost", float(boost))
        set_(
            self,
            "session_idle_seconds",
            _whole("session_idle_seconds", self.session_idle_seconds, 0),
        )
        if self.session_idle_seconds > MAX_SESSION_IDLE_SECONDS:
            raise InvalidConfig(
                "session_idle_seconds",
                f"must be at most {MAX_SESSION_IDLE_SECONDS} (a day), "
                f"got {self.session_idle_seconds}",
            )
        if self.session_growth not in SESSION_GROWTHS:
            raise InvalidConfig(
                "session_growth",
                f"must be one of {', '.join(SESSION_GROWTHS)}, got {self.session_growth!r}",
            )
        target = self.recall_target
        if target is not None:
            if isinstance(target, bool) or not isinstance(target, (int, float)):
                raise InvalidConfig(
                    "recall_target", f"must be a number in (0, 1] or null, got {target!r}"
                )
            if not math.isfinite(target) or not 0.0 < target <= 1.0:
                raise InvalidConfig(
                    "recall_target", f"must be a number in (0, 1] or null, got {target!r}"
                )
            if self.policy == "seed":
                raise InvalidConfig(
                    "recall_target",
                    "the seed policy packs by tokenBudget alone (SPEC section 4): unset "
                    "recallTarget or choose another policy",
                )
            set_(self, "recall_target", float(target))
        for name in ("provider", "model"):
            value = getattr(self, name)
            if not isinstance(value, str) or len(value) > 256 or not value.isprintable():
                raise InvalidConfig(name, f"must be a name of at most 256 characters: {value!r}")
            set_(self, name, value.strip())

    @classmethod
    def for_policy(cls, policy: str, **options: Any) -> LearningConfig:
        """The named policy's configuration (POLICIES), with `options` (snake_case or the
        original camelCase keys) on top: `LearningConfig.for_policy("seed")` is the seed
        documents' algorithm. (Passing `policy=` to the constructor only labels the options
        given there; it does not expand the preset.)"""
        return cls().merged({"policy": policy, **options})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LearningConfig:
        """Build from a mapping with snake_case or the original camelCase keys."""
        return cls().merged(data)

    def merged(self, data: Mapping[str, Any]) -> LearningConfig:
        """A copy with the given keys (either style) changed; unknown keys are an error."""
        if not isinstance(data, Mapping):
            raise InvalidConfig("config", f"must be a mapping, got {type(data).__name__}")
        changes: dict[str, Any] = {}
        given: dict[str, str] = {}
        for key, value in data.items():
            snake = key if key in _CAMEL else _SNAKE.get(key)
            if snake is None:
                known = ", ".join(_CAMEL.values())
                raise InvalidConfig(str(key), f"unknown setting; known settings: {known}")
            if snake in changes:
                raise InvalidConfig(str(key), f"given twice (as {given[snake]!r} and {key!r})")
            changes[snake] = value
            given[snake] = key
        policy = changes.get("policy")
        if isinstance(policy, str):
            if policy not in POLICIES:
                raise InvalidConfig(
                    given["policy"], f"must be one of {', '.join(POLICIES)}, got {policy!r}"
                )
            for option, value in POLICIES[policy].items():
                changes.setdefault(option, value)
        try:
            return replace(self, **changes)
        except InvalidConfig as exc:
            raise InvalidConfig(given.get(exc.field, exc.field), exc.detail) from None

    def to_dict(self, camel: bool = True, *, complete: bool = False) -> dict[str, Any]:
        """Plain JSON-ready values, with the original camelCase keys by default.

        `policy` appears only when it is not DEFAULT_POLICY, and `packing`, `min_score`,
        `exploration`, `pooled_prior` and `half_life` only when they differ from what that
        policy sets; `from_dict` reads the result back to an equal config either way.
        `complete` writes every setting.
        """
        out: dict[str, Any] = {}
        preset = POLICIES.get(self.policy, {})
        for f in fields(self):
            value = getattr(self, f.name)
            if complete:
                pass
            elif f.name in preset:  # `from_dict` takes it from the policy named
                if value == preset[f.name]:
                    continue
            elif f.name in _OPTIONAL_DEFAULTS and value == _OPTIONAL_DEFAULTS[f.name]:
                continue
            if isinstance(value, Phase):
                value = value.value
            elif isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, frozenset):
                value = sorted(value)
            out[_CAMEL[f.name] if camel else f.name] = value
        return out

    def learner_settings(self) -> dict[str, Any]:
        """What a learner stores as its settings: `to_dict` without the phase (the phase is
        state of its own, changed by the phase command)."""
        out = self.to_dict()
        out.pop("phase", None)
        return out

    def with_learner_settings(self, stored: Mapping[str, Any], phase: Phase) -> LearningConfig:
        """The configuration of a learner whose stored settings are `stored`: the defaults
        with them on top (not this configuration's: a learner's settings are its own)."""
        return LearningConfig().merged({**stored, "phase": phase})

    @property
    def is_active(self) -> bool:
        return self.enabled and self.phase is Phase.ACTIVE


def _half_life(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidConfig("half_life", f"must be a number of observations >= 0, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise InvalidConfig("half_life", f"must be a number of observations >= 0, got {value!r}")
    return float(value)


def _fraction(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidConfig(name, f"must be a number in [0, 1], got {value!r}")
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise InvalidConfig(name, f"must be a number in [0, 1], got {value!r}")
    return float(value)


def _string_tuple(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InvalidConfig(name, f"must be a list of strings, got {value!r}")
    items = tuple(value)
    for item in items:
        if not isinstance(item, str) or not item:
            raise InvalidConfig(name, f"must be a list of non-empty strings, got {item!r}")
    return items
