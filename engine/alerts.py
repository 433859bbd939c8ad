"""Alert rules and the alert state machine: what a learner's numbers say is wrong, and whether
that is news (a new episode), still true, or over. Pure: the numbers come in, findings and
transitions go out; bot.alerting reads the numbers, stores the states and sends the messages.

The rules and their thresholds (README "Alerts and digests" repeats them):

- **starvation** (one alert per arm): engine.starvation — a useful arm included in at most 5%
  of the >= 20 recent runs that offered it.
- **accuracy**: the share of rewarded outcomes among the included arms of the latest
  `RECENT_RUNS` rated runs falls to at most `COLLAPSE_RATIO` of the `REFERENCE_RUNS` runs before
  them (which must have been at least `MIN_REFERENCE_RATE`); resolved when the recent level is
  back to `RECOVER_RATIO` of the level it fell from.
- **savings**: the measured prompt-cost saving's whole 95% interval is below zero (selection
  costs more than sending everything), or, without a cost measurement, the prompt-token saving
  is negative.
- **dead letters**: the spool holds dead-lettered runs; **spool**: more than `SPOOL_PENDING`
  runs wait in the spool, or it is full.
- **changes** (the `changes` subscription): the phase changed, a reset was made or undone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from learning_bot.engine.alert_records import AlertState
from learning_bot.engine.records import RunRecord
from learning_bot.engine.savings import CostSavings
from learning_bot.engine.starvation import StarvedArm

RECENT_RUNS = 50
REFERENCE_RUNS = 200
MIN_RECENT_RUNS = 20
MIN_REFERENCE_RUNS = 50
MIN_REFERENCE_RATE = 0.2
COLLAPSE_RATIO = 0.5
RECOVER_RATIO = 0.75
SPOOL_PENDING = 1000

FIRING = "firing"
RESOLVED = "resolved"
STILL = "still"
NOTE = "note"
"""A one-off message (a change): no episode to resolve."""

CHANGES = "changes"


@dataclass(frozen=True, slots=True)
class RewardLevels:
    """The share of rewarded outcomes in the latest rated runs and in the runs before them."""

    recent: float | None
    recent_runs: int
    reference: float | None
    reference_runs: int


def reward_levels(runs_newest_first: Iterable[RunRecord]) -> RewardLevels:
    """Each rated run's share of rewarded included arms, averaged over the latest
    RECENT_RUNS rated runs and over the REFERENCE_RUNS rated runs before them. A run is rated
    when it updated at least one included arm (no guard, active selection)."""
    recent: list[float] = []
    reference: list[float] = []
    for run in runs_newest_first:
        if run.guard is not None:
            continue
        rewards = [a.reward for a in run.arms if a.included and a.reward is not None]
        if not rewards:
            continue
        rate = sum(rewards) / len(rewards)
        if len(recent) < RECENT_RUNS:
            recent.append(rate)
        elif len(reference) < REFERENCE_RUNS:
            reference.append(rate)
        else:
            break
    return RewardLevels(
        sum(recent) / len(recent) if recent else None,
        len(recent),
        sum(reference) / len(reference) if reference else None,
        len(reference),
    )


@dataclass(frozen=True, slots=True)
class Signals:
    """What the rules read of one learner at one time."""

    learner: str
    starved: Sequence[StarvedArm] = ()
    levels: RewardLevels | None = None
    cost: CostSavings | None = None
    prompt_savings_percent: float | None = None
    spool: Mapping[str, Any] | None = None
    phase: str | None = None
    last_reset: tuple[int, bool] | None = None
    """The latest reset's id and whether it was undone."""
    dashboard_url: str | None = None


@dataclass(frozen=True, slots=True)
class Finding:
    """One alert that is true now (or one change to announce)."""

    alert: str
    """Its key: the rule, and the subject for rules with one (starvation:tool:web)."""
    kind: str
    title: str
    facts: tuple[tuple[str, str], ...]
    advice: str
    detail: Mapping[str, Any] = field(default_factory=dict)
    """Stored with the state (and what a later evaluation compares with)."""

    @property
    def is_change(self) -> bool:
        return self.kind == CHANGES


def _pct(x: float) -> str:
    return f"{x * 100:.1f}%"


def findings(signals: Signals, firing: Mapping[str, Mapping[str, Any]]) -> list[Finding]:
    """The alerts true now; `firing` maps the alerts already firing to their stored detail
    (the accuracy rule resolves against the level it fell from)."""
    out: list[Finding] = []
    for arm in signals.starved:
        accuracy = "unknown" if arm.accuracy is None else _pct(arm.accuracy)
        out.append(
            Finding(
                f"starvation:{arm.arm_id}",
                "starvation",
                f"Starved arm: {arm.label or arm.arm_id}",
                (
                    ("Arm", arm.arm_id),
                    ("Included", f"{arm.included} of {arm.offered} recent runs"),
                    ("Rewarded", f"{accuracy} of {arm.pulls} pulls since its reset"),
                ),
                "It was useful and selection now leaves it out of nearly every run, so it can "
                "no longer prove otherwise. Check the rewards it got (a broken reference "
                f"detector or a model change), then /learning reset {arm.arm_id}.",
                {"included": arm.included, "offered": arm.offered},
            )
        )
    levels = signals.levels
    key = "accuracy"
    if levels is not None and levels.recent is not None and levels.reference is not None:
        previous = firing.get(key)
        if previous is not None:
            level = float(previous.get("level", levels.reference))
            still = levels.recent < RECOVER_RATIO * level
        else:
            level = levels.reference
            still = (
                levels.recent_runs >= MIN_RECENT_RUNS
                and levels.reference_runs >= MIN_REFERENCE_RUNS
                and level >= MIN_REFERENCE_RATE
                and levels.recent <= COLLAPSE_RATIO * level
            )
        if still:
            out.append(
                Finding(
                    key,
                    "accuracy",
                    "Reward rate collapsed",
                    (
                        ("Latest runs", f"{_pct(levels.recent)} over {levels.recent_runs} runs"),
                        ("Before", f"{_pct(level)} over {levels.reference_runs} runs"),
                    ),
                    "The share of included arms that earn a reward fell to at most half its "
                    "recent level: a poisoned reward signal, a broken reference detector or a "
                    "model change. Look at the latest traces; switch to /learning phase "
                    "passive while you investigate.",
                    {"level": level, "recent": levels.recent},
                )
            )
    cost = signals.cost
    if cost is not None and cost.percent is not None and cost.high is not None and cost.high < 0:
        out.append(
            Finding(
                "savings",
                "savings",
                "Selection costs more than sending everything",
                (
                    (
                        "Cost saving",
                        f"{cost.percent:.0f}% (95%: {cost.low:.0f} to {cost.high:.0f}%)",
                    ),
                    ("Sessions", f"{cost.sessions:,}"),
                ),
                "Selected sessions cost more per run than full-prompt ones (cache misses "
                "after a model or prompt change?). Consider /learning phase passive.",
                {"percent": cost.percent},
            )
        )
    elif (cost is None or cost.percent is None) and (signals.prompt_savings_percent or 0) < 0:
        percent = float(signals.prompt_savings_percent or 0)
        out.append(
            Finding(
                "savings",
                "savings",
                "Selection sends more tokens than it saves",
                (("Prompt token saving", f"{percent:.0f}%"),),
                "Selected prompts are larger than sending every component would be. Check "
                "the token budget and the arms' token costs.",
                {"percent": percent},
            )
        )
    spool = signals.spool or {}
    dead = int(spool.get("deadLetters") or 0)
    if dead > 0:
        out.append(
            Finding(
                "dead-letters",
                "dead-letters",
                "Runs were dead-lettered",
                (("Dead letters", f"{dead:,}"), ("File", str(spool.get("deadLetterFile") or ""))),
                "These runs could not be stored and will not be retried: read the file for "
                "the reason, fix it, and replay them with the observe endpoint.",
                {"dead": dead},
            )
        )
    pending = int(spool.get("pending") or 0)
    if pending > SPOOL_PENDING or spool.get("full"):
        out.append(
            Finding(
                "spool",
                "spool",
                "The spool is growing" if not spool.get("full") else "The spool is full",
                (("Pending runs", f"{pending:,}"), ("Bytes", f"{int(spool.get('bytes') or 0):,}")),
                "Storage is not taking runs: check the database (learning-bot db url, healthz).",
                {"pending": pending},
            )
        )
    if signals.phase is not None:  # changes are read with the phase (no reset yet: None)
        out.append(_change(signals, "phase"))
        out.append(_change(signals, "reset"))
    return out


def _change(signals: Signals, what: str) -> Finding:
    """A change finding: its detail is the current value; bot.alerting announces it when the
    stored value differs (and never for the first value it sees)."""
    if what == "phase":
        value: Any = signals.phase
        title = f"Phase is now {str(value).upper()}"
        advice = "passive: every arm is included; active: Thompson Sampling selects."
        facts: tuple[tuple[str, str], ...] = (("Learner", signals.learner),)
    elif signals.last_reset is None:
        value, title = None, "No reset yet"
        advice, facts = "", (("Learner", signals.learner),)
    else:
        reset_id, undone = signals.last_reset
        value = [reset_id, undone]
        title = f"Reset #{reset_id} was undone" if undone else f"Reset #{reset_id} was made"
        advice = "Undo a reset with /learning reset undo."
        facts = (("Learner", signals.learner),)
    return Finding(f"change:{what}", CHANGES, title, facts, advice, {"value": value})


@dataclass(frozen=True, slots=True)
class Transition:
    """What happened to one alert in one evaluation: the state to store and the message owed
    (`stage` FIRING, RESOLVED, NOTE, or STILL: nothing to send)."""

    state: AlertState
    stage: str
    finding: Finding | None


def advance(
    learner: str, stored: Sequence[AlertState], found: Sequence[Finding], now: int
) -> list[Transition]:
    """Move each alert's state machine one step: a finding not firing starts a new episode;
    a firing alert without a finding resolves; a change finding is a NOTE when its value
    differs from the stored one (its first value is only recorded)."""
    by_key = {s.alert: s for s in stored}
    seen: set[str] = set()
    out: list[Transition] = []
    for finding in found:
        seen.add(finding.alert)
        detail = card_detail(finding)
        state = by_key.get(finding.alert)
        if finding.is_change:
            if state is None:
                new = AlertState(learner, finding.alert, RESOLVED, 0, now, now, now, detail)
                out.append(Transition(new, STILL, finding))
            elif state.detail != detail:
                episode = state.episode + 1
                new = AlertState(learner, finding.alert, RESOLVED, episode, now, now, now, detail)
                out.append(Transition(new, NOTE, finding))
            continue
        if state is None or state.state != FIRING:
            episode = 1 if state is None else state.episode + 1
            new = AlertState(learner, finding.alert, FIRING, episode, now, now, None, detail)
            out.append(Transition(new, FIRING, finding))
        else:
            new = AlertState(
                learner, finding.alert, FIRING, state.episode, state.first_seen, now, None, detail
            )
            out.append(Transition(new, STILL, finding))
    for state in stored:
        if state.state == FIRING and state.alert not in seen:
            new = AlertState(
                learner,
                state.alert,
                RESOLVED,
                state.episode,
                state.first_seen,
                now,
                now,
                state.detail,
            )
            out.append(Transition(new, RESOLVED, None))
    return out


def card_detail(finding: Finding) -> str:
    """What a state stores of its finding: the card (title, facts, advice) and its data."""
    return json.dumps(
        {
            "kind": finding.kind,
            "title": finding.title,
            "facts": [list(f) for f in finding.facts],
            "advice": finding.advice,
            "data": dict(finding.detail),
        },
        sort_keys=True,
    )


def stored_finding(state: AlertState) -> Finding:
    """The finding a state stored (card_detail), to show its card again."""
    try:
        data = json.loads(state.detail)
        return Finding(
            state.alert,
            str(data["kind"]),
            str(data["title"]),
            tuple((str(k), str(v)) for k, v in data["facts"]),
            str(data["advice"]),
            dict(data["data"]),
        )
    except (ValueError, TypeError, KeyError):
        return Finding(state.alert, state.alert.split(":", 1)[0], state.alert, (), "")


def firing_details(stored: Iterable[AlertState]) -> dict[str, dict[str, Any]]:
    """The stored data of each firing alert and of each change (findings' `firing`)."""
    return {
        state.alert: dict(stored_finding(state).detail)
        for state in stored
        if state.state == FIRING or state.alert.startswith("change:")
    }


__all__ = [
    "Finding",
    "RewardLevels",
    "Signals",
    "Transition",
    "advance",
    "card_detail",
    "findings",
    "firing_details",
    "reward_levels",
    "stored_finding",
]
