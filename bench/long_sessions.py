"""Long-lived session keys: when is a session's set worth drawing again? (README, "Sessions
and cost")

An OpenClaw channel's session key names the channel's whole conversation, and turns keep
arriving inside the cache lifetime, so a set drawn once is kept for hundreds of turns. Three
rules for such sessions, through the real LearningService (SqlStore on SQLite in a temporary
directory) on the same sessions, every prompt billed through the model of the provider's
prefix cache (engine.prompt_cache) at Anthropic's prices:

- priced:      the product's rule (engine.session_review): the set is drawn again when the
               cache is broken anyway, when it was provisional (drawn while arms under
               `minPulls` were forced in) and their pulls are in, and when a new set saves more
               than twice the rewrite over the session's expected remaining turns;
- never:       the set the session's first select drew is kept while the session stays live
               (the rule before 4b);
- every turn:  a new draw on every turn (the service asked without a session key);

beside every tool (the reference, cost 1.00) and the oracle (the knapsack of the true usage
probabilities under the 35% budget, one set for every turn). The learner starts cold with the
product's defaults (`minPulls` 5, baseline sessions 10%); with `--recall-target`, under that
recall target (engine.recall_target) and no budget cap, as bench/recall_target.py runs it.

Workloads:

- synthetic: bench/sessions.py's environments (40 tools, 16,000 tokens, budget 35%), one key
  per environment with LONG_TURNS turns 30 s apart, each adding 400 tokens of conversation;
- BFCL: the Berkeley Function Calling Leaderboard's multi-turn sessions (bench/bfcl.py; 128
  tools, budget 35%), each conversation 10x longer than BFCL's own (its turns repeated ten
  times under one key, 30 s apart), the first BFCL_SESSIONS of them in a seeded order through
  one learner.

    .venv/bin/python -m bench.long_sessions [--envs N] [--turns N] [--bfcl-sessions N]
        [--package-dir .../site-packages/bfcl_eval] [--seed N] [--recall-target T]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from bench.sessions import (
    BUDGET_SHARE,
    TOOL_TOKENS,
    TOOLS,
    Variant,
    mean_se,
    service_run,
)
from bench.table import print_table
from learning_bot.engine import LearningConfig, Phase
from learning_bot.research.session_simulation import (
    EveryArm,
    OracleArms,
    Session,
    SessionRun,
    SessionShape,
    run_sessions,
)
from learning_bot.research.simulation import Workload, make_tool_workload

LONG_TURNS = 200
TURN_GAP_SECONDS = 30.0
LONG_SHAPE = SessionShape(history_tokens=400, message_tokens=80)
BFCL_SESSIONS = 200
BFCL_REPEAT = 10

RULES = {
    "priced": Variant(per_session=True, growth="off"),
    "never": Variant(per_session=True, growth="off", redecide=False),
    "every turn": Variant(per_session=False, growth="off"),
}


def long_session(workload: Workload, turns: int, rng: np.random.Generator) -> Session:
    """One key's conversation: `turns` turns 30 s apart, their usage drawn by the workload."""
    conversational, used = workload.draw_run(turns, rng)
    times = TURN_GAP_SECONDS * np.arange(turns, dtype=np.float64)
    return Session("agent:main:slack:channel:c0", times, conversational, used)


def compare(
    workload: Workload,
    sessions: Sequence[Session],
    config: LearningConfig,
    seed: int,
    shape: SessionShape,
) -> dict[str, SessionRun]:
    """Every tool, the three rules and the oracle (at BUDGET_SHARE of the tokens, under a
    recall target too) on the same sessions."""
    out = {
        "every tool": run_sessions(workload, sessions, EveryArm(len(workload.arms)), shape=shape)
    }
    for name, rule in RULES.items():
        out[name], _ = service_run(workload, sessions, config, seed, rule, shape)
    capped = replace(config, token_budget=token_budget(int(workload.costs.sum()), None))
    out["oracle"] = run_sessions(workload, sessions, OracleArms(workload, capped), shape=shape)
    return out


def rows(results: Sequence[Mapping[str, SessionRun]]) -> list[tuple[str, ...]]:
    """Per policy: prompt cost per session against every tool, cost per session in input-token
    units, tool tokens per turn and recall (means over the results, ± standard error)."""
    out = []
    for name in results[0]:
        cost = [
            float(r[name].prompt_cost.mean() / r["every tool"].prompt_cost.mean()) for r in results
        ]
        units = [float(r[name].prompt_cost.mean()) for r in results]
        tools = [float(r[name].tool_tokens.sum() / r[name].turns.sum()) for r in results]
        recall = [r[name].recall for r in results]
        out.append(
            (
                name,
                mean_se(cost),
                f"{np.mean(units):,.0f}",
                f"{np.mean(tools):,.0f}",
                mean_se(recall),
            )
        )
    return out


def print_results(title: str, table: Sequence[tuple[str, ...]]) -> None:
    header = ("rule", "cost vs every tool", "cost/session", "tool tokens/turn", "recall")
    print(title)
    print_table(header, table)
    print()


def token_budget(tokens: int, target: float | None) -> int:
    """BUDGET_SHARE of an inventory's `tokens`; all of them (no cap) under a recall target."""
    return tokens if target is not None else round(BUDGET_SHARE * tokens)


def synthetic(
    envs: int, turns: int, seed: int, target: float | None = None
) -> list[dict[str, SessionRun]]:
    config = LearningConfig(
        phase=Phase.ACTIVE,
        token_budget=token_budget(TOOL_TOKENS, target),
        baseline_rate=0.10,
        recall_target=target,
    )
    results = []
    for env in range(envs):
        workload = make_tool_workload(TOOLS, TOOL_TOKENS, seed=seed * 1_000 + env)
        session = long_session(workload, turns, np.random.default_rng([seed, env, 7]))
        results.append(compare(workload, [session], config, seed * 1_000 + env, LONG_SHAPE))
    return results


def bfcl(
    package: Path | None, count: int, seed: int, target: float | None = None
) -> dict[str, SessionRun]:
    from bench.bfcl import load_sessions, load_tools, package_dir
    from bench.bfcl_cost import BFCL_SHAPE, as_sessions, inventory, usage_shares

    root = package_dir(package)
    workload, position = inventory(root)
    n = len(workload.arms)
    loaded = load_sessions(root, load_tools(root))
    order = np.random.default_rng(seed).permutation(len(loaded))[:count]
    short = as_sessions([loaded[i] for i in order], position, n)
    sessions = []
    at = 0.0
    for s in short:  # each conversation ten times as long: its turns again and again
        turns = s.turns * BFCL_REPEAT
        times = at + TURN_GAP_SECONDS * np.arange(turns, dtype=np.float64)
        sessions.append(
            Session(
                s.key,
                times,
                np.tile(s.conversational, BFCL_REPEAT),
                np.tile(s.used, (BFCL_REPEAT, 1)),
            )
        )
        at = float(times[-1]) + 3_600.0
    workload = Workload(workload.arms, usage_shares(sessions, n))
    config = LearningConfig(
        phase=Phase.ACTIVE,
        token_budget=token_budget(int(workload.costs.sum()), target),
        baseline_rate=0.10,
        recall_target=target,
    )
    return compare(workload, sessions, config, seed, BFCL_SHAPE)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, default=5)
    parser.add_argument("--turns", type=int, default=LONG_TURNS)
    parser.add_argument("--bfcl-sessions", type=int, default=BFCL_SESSIONS)
    parser.add_argument("--package-dir", type=Path, help="the installed bfcl_eval folder")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--recall-target", type=float, help="select under this recall target, no budget cap"
    )
    args = parser.parse_args(argv)
    target = args.recall_target
    cap = f"budget {BUDGET_SHARE:.0%}" if target is None else f"recall target {target}, no cap"
    began = time.perf_counter()
    if args.envs:
        print_results(
            f"Synthetic: one key of {args.turns} turns, {TURN_GAP_SECONDS:.0f} s apart, per "
            f"environment ({args.envs} environments; {TOOLS} tools, {TOOL_TOKENS:,} tokens, "
            f"{cap}, minPulls 5, baseline 10%, cold learner)",
            rows(synthetic(args.envs, args.turns, args.seed, target)),
        )
    if args.bfcl_sessions:
        print_results(
            f"BFCL multi-turn, {args.bfcl_sessions} sessions, each {BFCL_REPEAT}x its length "
            f"(128 tools, {cap}, minPulls 5, baseline 10%, one learner)",
            rows([bfcl(args.package_dir, args.bfcl_sessions, args.seed, target)]),
        )
    print(f"({time.perf_counter() - began:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
