"""The shape of a projection of going active (engine.projection): per token budget, recall
and the prompt tokens and cost saved, each a ratio of sums over sessions (the unit the study
randomises) with its 95% interval by linearisation, and the JSON it is shown and stored as."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from learning_bot.engine.errors import InvalidInput

DEFAULT_RUNS = 2_000
"""Runs a projection reads at most: the latest this many, sessions kept together."""

Z95 = 1.959963984540054


@dataclass(frozen=True, slots=True)
class SettingProjection:
    """The figures of one setting: recall as a fraction, savings in percent, each with its 95%
    interval over sessions. `cost_savings_percent` and its interval are None when the runs
    report no prompt tokens."""

    token_budget: int
    recall: float
    recall_low: float
    recall_high: float
    cost_savings_percent: float | None
    cost_low: float | None
    cost_high: float | None
    token_savings_percent: float
    tokens_low: float
    tokens_high: float
    current: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "tokenBudget": self.token_budget,
            "recall": _round(self.recall, 4),
            "recallLow": _round(self.recall_low, 4),
            "recallHigh": _round(self.recall_high, 4),
            "promptCostSavingsPercent": _round(self.cost_savings_percent, 1),
            "costLow": _round(self.cost_low, 1),
            "costHigh": _round(self.cost_high, 1),
            "tokenSavingsPercent": _round(self.token_savings_percent, 1),
            "tokensLow": _round(self.tokens_low, 1),
            "tokensHigh": _round(self.tokens_high, 1),
        }
        if self.current:
            out["current"] = True
        return out

    @classmethod
    def from_json(cls, data: Any) -> SettingProjection:
        """A setting as `to_json` wrote it (a projection stored at the switch to active)."""
        if not isinstance(data, dict):
            raise InvalidInput("projection setting must be an object")

        def number(key: str) -> float | None:
            value = data.get(key)
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InvalidInput(f"projection setting {key} must be a number")
            return float(value)

        budget = data.get("tokenBudget")
        if isinstance(budget, bool) or not isinstance(budget, int):
            raise InvalidInput("projection setting tokenBudget must be a whole number")
        return cls(
            budget,
            number("recall") or 0.0,
            number("recallLow") or 0.0,
            number("recallHigh") or 0.0,
            number("promptCostSavingsPercent"),
            number("costLow"),
            number("costHigh"),
            number("tokenSavingsPercent") or 0.0,
            number("tokensLow") or 0.0,
            number("tokensHigh") or 0.0,
            bool(data.get("current", False)),
        )


@dataclass(frozen=True, slots=True)
class Projection:
    """The settings' figures over `runs` runs in `sessions` sessions (oldest first), or
    `reason` instead of them; `left_out` counts the runs read but not used, by why."""

    runs: int
    sessions: int
    settings: tuple[SettingProjection, ...] = ()
    suggested: SettingProjection | None = None
    reason: str | None = None
    left_out: tuple[tuple[str, int], ...] = ()

    @property
    def current(self) -> SettingProjection | None:
        return next((s for s in self.settings if s.current), None)

    def to_json(self) -> dict[str, Any]:
        """`{"runs", "sessions", "settings": [...], "suggested": {...} | null}` (the shape of
        `GET .../phase`'s `projection`), `leftOut` beside them."""
        return {
            "runs": self.runs,
            "sessions": self.sessions,
            "settings": [s.to_json() for s in self.settings],
            "suggested": self.suggested.to_json() if self.suggested is not None else None,
            "leftOut": dict(self.left_out),
        }


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


@dataclass(slots=True)
class SessionTotals:
    """What one session of a replay used, kept and cost, against the same runs with every
    component (`full_`); `baseline`: a baseline session (it offers every component, and is left
    out of the figures)."""

    used: int = 0
    kept: int = 0
    cost: float = 0.0
    full_cost: float = 0.0
    tokens: int = 0
    full_tokens: int = 0
    baseline: bool = False


def ratio_interval(num: Sequence[float], den: Sequence[float]) -> tuple[float, float, float]:
    """sum(num) / sum(den) over sessions, with its 95% interval (linearisation)."""
    total = sum(den)
    if not total:
        return 1.0, 1.0, 1.0
    r = sum(num) / total
    m = len(den)
    if m < 2:
        return r, r, r
    mean = total / m
    spread = sum(((x - r * d) / mean) ** 2 for x, d in zip(num, den, strict=True))
    se = math.sqrt(spread / (m * (m - 1)))
    return r, r - Z95 * se, r + Z95 * se


def figures(
    budget: int, totals: Iterable[SessionTotals], current: bool, priced: bool
) -> SettingProjection:
    """The figures of one budget from its replay's per-session totals, baseline sessions left
    out; the cost saved is None unless `priced` (some run reports prompt tokens)."""
    chosen = [t for t in totals if not t.baseline]
    recall, r_low, r_high = ratio_interval([t.kept for t in chosen], [t.used for t in chosen])
    cost, c_low, c_high = ratio_interval([t.cost for t in chosen], [t.full_cost for t in chosen])
    tokens, t_low, t_high = ratio_interval(
        [t.tokens for t in chosen], [t.full_tokens for t in chosen]
    )
    return SettingProjection(
        budget,
        recall,
        max(0.0, r_low),
        min(1.0, r_high),
        100.0 * (1.0 - cost) if priced else None,
        100.0 * (1.0 - c_high) if priced else None,
        100.0 * (1.0 - c_low) if priced else None,
        100.0 * (1.0 - tokens),
        100.0 * (1.0 - t_high),
        100.0 * (1.0 - t_low),
        current,
    )
