"""OpenClaw's gateway over many turns of one conversation, as its learning bridge calls the
learning backend: for each run `session_start` (named after the conversation's session key),
`qortex_learning_select` with `context.session_key`, one `qortex_learning_observe` per
selected arm, all of a run's observes sent at once, then `session_end`. The model of each run
is scripted (a seeded generator decides which of the selected tools it calls), so a replay
knows exactly what it sent: the observes per arm, the rewards, and each select's answer with
the pulls every arm had when it was asked."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from . import openclaw_calls as oc

SESSION_KEY = "agent:main:slack:channel:c0a1b2c3d4"
RUNS = 50
TOKEN_BUDGET = 4000
MIN_PULLS = 2
TOOL_COST = 300
"""Every candidate's token cost: 30 candidates cost 9,000 tokens, over twice the budget."""

SEEDS = oc.SEED_ARMS
"""The gateway's default seed arms (8 tools, 2,400 tokens: 1,600 left for the others)."""
OTHERS = [f"tool:agent:tool_{i:02d}" for i in range(30 - len(SEEDS))]
CANDIDATE_IDS = [*SEEDS, *OTHERS]
CANDIDATES: list[dict[str, Any]] = [
    {
        "id": arm_id,
        "metadata": {
            "type": "tool",
            "category": arm_id.split(":")[1],
            "label": arm_id.split(":", 2)[2],
        },
        "token_cost": TOOL_COST,
    }
    for arm_id in CANDIDATE_IDS
]
FAVOURITES = ["tool:fs:Read", "tool:exec:Bash", OTHERS[0], OTHERS[1], OTHERS[2]]
"""The tools the scripted model calls most; the others it calls now and then."""

CONTEXT: dict[str, Any] = {
    "session_key": SESSION_KEY,
    "channel": "slack",
    "provider": "anthropic",
    "model": "claude-sonnet-4",
    "phase": "active",
}


@dataclass(frozen=True)
class Run:
    """One run: what its select answered, the pulls each arm had when it was asked, and the
    arms the scripted model used."""

    selected: tuple[str, ...]
    is_baseline: bool
    pulls_before: dict[str, int]
    used: frozenset[str]


@dataclass
class Replay:
    """What a replay sent and was answered."""

    runs: list[Run] = field(default_factory=list)
    observes: Counter[str] = field(default_factory=Counter)
    rewards: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)


def _used(rng: random.Random, selected: list[str]) -> frozenset[str]:
    """The tools the model calls in a run: each favourite at 60%, any other at 10%."""
    return frozenset(a for a in selected if rng.random() < (0.6 if a in FAVOURITES else 0.1))


def _checked(reply: oc.ToolReply, replay: Replay) -> dict[str, Any]:
    if reply.is_error or not isinstance(reply.data, dict):
        replay.errors.append(f"{reply.name}: {reply.text[:300]}")
        return {}
    return reply.data


async def replay(call: oc.CallTool, runs: int = RUNS, seed: int = 7) -> Replay:
    """The gateway's `runs` turns under one session key, from whatever the learner holds."""
    rng = random.Random(seed)
    out = Replay()
    for _ in range(runs):
        started = _checked(
            await call(
                "qortex_learning_session_start",
                {"learner": oc.LEARNER, "session_name": SESSION_KEY},
            ),
            out,
        )
        answer = _checked(
            await call(
                "qortex_learning_select",
                {
                    "learner": oc.LEARNER,
                    "candidates": CANDIDATES,
                    "context": CONTEXT,
                    "k": 0,
                    "token_budget": TOKEN_BUDGET,
                    "min_pulls": MIN_PULLS,
                    "seed_arms": SEEDS,
                },
            ),
            out,
        )
        selected = oc.arm_ids(answer.get("selected_arms", []))
        used = _used(rng, selected)
        out.runs.append(
            Run(
                tuple(selected),
                bool(answer.get("is_baseline")),
                {a: out.observes[a] for a in CANDIDATE_IDS},
                used,
            )
        )
        observes = [oc.observe(arm, arm in used, dict(CONTEXT)) for arm in selected]
        replies = await asyncio.gather(*(call(o.name, o.arguments) for o in observes))
        for o, reply in zip(observes, replies, strict=True):
            if _checked(reply, out):
                out.observes[o.arguments["arm_id"]] += 1
                out.rewards[o.arguments["arm_id"]] += int(o.arguments["reward"])
        if started:
            _checked(
                await call("qortex_learning_session_end", {"session_id": started["session_id"]}),
                out,
            )
    return out


async def learned(call: oc.CallTool) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """The learner's posteriors and metrics, read as the gateway reads them."""
    posteriors = await call(
        "qortex_learning_posteriors", {"learner": oc.LEARNER, "context": None, "arm_ids": None}
    )
    metrics = await call("qortex_learning_metrics", {"learner": oc.LEARNER, "window": None})
    return posteriors.result["posteriors"], metrics.result


def check_counts(
    done: Replay, posteriors: dict[str, dict[str, Any]], metrics: dict[str, Any]
) -> None:
    """Every arm's pulls are the observes sent for it, its total reward the rewards sent, and
    the learner's totals the sums of what was sent."""
    assert done.errors == []
    assert len(done.runs) == RUNS
    pulls = {arm: int(p["pulls"]) for arm, p in posteriors.items() if p["pulls"]}
    assert pulls == dict(done.observes), {
        arm: (pulls.get(arm), done.observes.get(arm))
        for arm in set(pulls) | set(done.observes)
        if pulls.get(arm) != done.observes.get(arm)
    }
    for arm in done.observes:
        assert posteriors[arm]["total_reward"] == float(done.rewards[arm]), arm
    assert metrics["total_pulls"] == sum(done.observes.values())
    assert metrics["total_reward"] == float(sum(done.rewards.values()))


def over_budget(done: Replay, start: int = 10) -> list[str]:
    """The runs from `start` on (counted from 1) whose selection does not keep to the budget
    once its forced arms are counted: seeds and arms observed fewer than MIN_PULLS times are
    always in; the rest must fit in what they leave of the budget."""
    costs = {c["id"]: int(c["token_cost"]) for c in CANDIDATES}
    problems = []
    for number, run in enumerate(done.runs, start=1):
        if number < start:
            continue
        forced = [a for a in run.selected if a in SEEDS or run.pulls_before[a] < MIN_PULLS]
        rest = [a for a in run.selected if a not in forced]
        room = max(0, TOKEN_BUDGET - sum(costs[a] for a in forced))
        spent = sum(costs[a] for a in rest)
        if spent > room:
            problems.append(
                f"run {number}: {len(run.selected)} arms, {len(forced)} forced, "
                f"{spent} tokens of others for {room} left"
            )
    return problems
