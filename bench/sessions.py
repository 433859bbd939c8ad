"""What a session's prompts cost when tools are chosen per request or per session (SPEC 4a).

The cached multi-turn workload: 40 tools whose definitions add up to 16,000 tokens, a token
budget of 35% of them, sessions of 8 turns on average (geometric), each turn adding 2,500
tokens of conversation, most gaps between turns inside the 5-minute cache window and one in
ten outside it. Every prompt goes through a model of the provider's prefix cache
(engine.prompt_cache: tools first, then the system prompt and the conversation) and is priced
with Anthropic's ratios (engine.cost: cache read 0.1, cache write 1.25).

Policies, on the same sessions:

- every tool:   the full prompt on every turn (the reference: cost 1.00);
- per request:  the real LearningService (SqlStore on SQLite in a temporary directory) asked
                on every turn: a new draw and baseline coin per request;
- per session:  the same service asked on a session's first turn only; that Selection's arms,
                in its order, are sent on every later turn; the baseline coin is tossed per
                session. (The harness keeps the set until the service does it itself.) A tool
                a turn needed but lacked is, in three variants (engine.session_simulation
                .Missing): appended to the tools for the next turn (SPEC 4a; "append"), loaded
                into the conversation after that turn, as a runtime with tool search does
                ("load"), or left out for the rest of the session ("never").
- oracle:       the knapsack of the true usage probabilities, the same set on every turn.

Both service policies observe every turn through `service.observe`, the report carrying the
simulated cache usage. Figures are means over environments (each its own tool inventory,
usage and sessions) with their standard errors: prompt cost per session relative to the
full-prompt sessions, tool tokens per turn, prompt tokens per session, recall (the share of
the tools the turns used that their prompts had).

    .venv/bin/python bench/sessions.py [--envs N] [--sessions N] [--seed N]
"""

from __future__ import annotations

import sys
from pathlib import Path

# bench/ holds select.py, named like a stdlib module: take this folder off the import path and
# put the project root on it instead.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import math  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Mapping, Sequence  # noqa: E402
from dataclasses import replace  # noqa: E402

import numpy as np  # noqa: E402

from engine import ArmSet, LearningConfig, Phase  # noqa: E402
from engine.observation import Usage  # noqa: E402
from engine.selection import Selection  # noqa: E402
from engine.service import LearningService  # noqa: E402
from engine.session_simulation import (  # noqa: E402
    EveryArm,
    Missing,
    OracleArms,
    Session,
    SessionRun,
    SessionShape,
    SessionStable,
    TurnPolicy,
    draw_sessions,
    run_sessions,
)
from engine.simulation import Workload, make_tool_workload  # noqa: E402
from storage import SqlStore  # noqa: E402

TOOLS = 40
TOOL_TOKENS = 16_000
BUDGET_SHARE = 0.35
SHAPE = SessionShape(mean_turns=8.0, history_tokens=2_500)


class ServicePolicy:
    """A TurnPolicy backed by a real LearningService: `choose` is `service.select`, `observe`
    sends the turn's run report (with the simulated cache usage) to `service.observe`."""

    def __init__(self, service: LearningService, workload: Workload, start_ms: int) -> None:
        self.service = service
        self.workload = workload
        self.arm_set = ArmSet(workload.arms)
        self.position = {arm.id: i for i, arm in enumerate(workload.arms)}
        self.start_ms = start_ms
        self.selection: Selection | None = None
        self.runs = 0

    def choose(self, session: Session, turn: int) -> list[int]:
        self.selection = self.service.select(self.arm_set)
        return [self.position[arm_id] for arm_id in self.selection.selected]

    def observe(self, session: Session, turn: int, included: Sequence[int], usage: Usage) -> None:
        arms = self.workload.arms
        report = self.workload.report(
            f"{session.key}-{turn}",
            [arms[i].id for i in included],
            session.used[turn],
            bool(session.conversational[turn]),
            is_baseline=self.is_baseline(),
            conversation=session.key,
            timestamp=self.start_ms + int(session.times[turn] * 1000),
        )
        self.service.observe(replace(report, usage=usage, provider="anthropic", model="claude"))
        self.runs += 1

    def is_baseline(self) -> bool:
        return self.selection is not None and self.selection.is_baseline

    def loaded(self, session: Session) -> Mapping[int, Sequence[int]]:
        return {}


def service_run(
    workload: Workload,
    sessions: Sequence[Session],
    config: LearningConfig,
    seed: int,
    missing: Missing | None,
) -> SessionRun:
    """The sessions through a new learner of a real service on a SQLite file: per request, or
    per session (`missing` says what becomes of a lacked tool)."""
    with tempfile.TemporaryDirectory() as folder:
        store = SqlStore(f"sqlite:///{folder}/learning.sqlite")
        try:
            service = LearningService(store, config, rng=seed, cache_ttl=0)
            start_ms = int(time.time() * 1000) - int(sessions[-1].times[-1] * 1000) - 60_000
            inner = ServicePolicy(service, workload, start_ms)
            policy: TurnPolicy = inner if missing is None else SessionStable(inner, missing)
            return run_sessions(workload, sessions, policy, shape=SHAPE)
        finally:
            store.close()


def environment(env: int, sessions: int, seed: int) -> dict[str, SessionRun]:
    workload = make_tool_workload(TOOLS, TOOL_TOKENS, seed=seed * 1_000 + env)
    drawn = draw_sessions(workload, sessions, np.random.default_rng([seed, env, 1]), SHAPE)
    config = LearningConfig(
        phase=Phase.ACTIVE, token_budget=round(BUDGET_SHARE * TOOL_TOKENS), baseline_rate=0.10
    )
    select_seed = seed * 1_000 + env
    return {
        "every tool": run_sessions(workload, drawn, EveryArm(TOOLS), shape=SHAPE),
        "per request": service_run(workload, drawn, config, select_seed, None),
        "per session, append": service_run(workload, drawn, config, select_seed, "append"),
        "per session, load": service_run(workload, drawn, config, select_seed, "load"),
        "per session, never": service_run(workload, drawn, config, select_seed, "never"),
        "oracle": run_sessions(workload, drawn, OracleArms(workload, config), shape=SHAPE),
    }


def mean_se(values: Sequence[float]) -> str:
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return f"{mean:.3f}"
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return f"{mean:.3f} ± {sd / math.sqrt(n):.3f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, default=5, help="environments (inventories)")
    parser.add_argument("--sessions", type=int, default=200, help="sessions per environment")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    began = time.perf_counter()
    results = [environment(env, args.sessions, args.seed) for env in range(args.envs)]
    names = list(results[0])
    print(
        f"{TOOLS} tools, {TOOL_TOKENS:,} tool tokens, budget {BUDGET_SHARE:.0%}; "
        f"{args.envs} environments x {args.sessions} sessions, mean "
        f"{np.mean([r['every tool'].turns.mean() for r in results]):.1f} turns; "
        f"{SHAPE.history_tokens:,} history tokens per turn; Anthropic cache prices"
    )
    header = ("policy", "cost vs every tool", "tool tokens/turn", "prompt tokens/session", "recall")
    rows = []
    for name in names:
        cost = [r[name].prompt_cost.mean() / r["every tool"].prompt_cost.mean() for r in results]
        tools = [r[name].tool_tokens.sum() / r[name].turns.sum() for r in results]
        tokens = [float(r[name].prompt_tokens.mean()) for r in results]
        recall = [r[name].recall for r in results]
        rows.append(
            (
                name,
                mean_se(cost),
                f"{np.mean(tools):,.0f}",
                f"{np.mean(tokens):,.0f}",
                mean_se(recall),
            )
        )
    widths = [max(len(str(row[i])) for row in (header, *rows)) for i in range(len(header))]
    for row in (header, *rows):
        print("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)))
    print(f"({time.perf_counter() - began:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
