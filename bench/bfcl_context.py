"""The BFCL multi-turn sessions replayed with their real user messages and gold calls through
the context study (engine.context_simulation): tool tokens, prompt cost under the prefix cache
(tool searches priced as their extra round trip and appended definitions) and recall of gold
calls, for every tool, today's default, BM25 over the message alone, the context-aware policy
with and without deferral, provider tool search at its best (every tool deferred, every search
finding the needed tools at once), and the oracle.

The inventory is the 128 functions of the eight API classes as one list, each an arm
`tool:bfcl:Class.function` with its definition's description; its cost is its definition's
compact JSON / 4 (bench/bfcl.py). The 800 sessions of the four categories run in one seeded
random order through one learner per policy. A turn's gold calls are counted once per distinct
tool (a turn needing `cd` twice needs `cd`). Every learning row runs at the same budget under
the product's defaults (minPulls 5, baseline sessions 10%: every tool, all session long); the
table states each row's budget, minPulls and baseline rate. One row says otherwise: BM25 at
the budget whose tool tokens per turn reach the context-aware set's over its selected sessions.

    pip install --no-deps bfcl-eval
    .venv/bin/python bench/bfcl_context.py [--package-dir DIR] [--seed N] [--budget SHARE]
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import time  # noqa: E402
from collections.abc import Sequence  # noqa: E402

import numpy as np  # noqa: E402

from bench.bfcl import load_sessions, load_tools, package_dir  # noqa: E402
from learning_bot.engine import Arm, LearningConfig, Phase  # noqa: E402
from learning_bot.engine.bm25 import BM25Index  # noqa: E402
from learning_bot.engine.config import DEFAULT_POLICY  # noqa: E402
from learning_bot.engine.context import words  # noqa: E402
from learning_bot.engine.context_simulation import (  # noqa: E402
    ContextSession,
    ContextTurn,
    StudyRun,
    run_study,
)


def bfcl_study_inputs(root: Path, seed: int) -> tuple[list[Arm], list[ContextSession]]:
    """The 128 tools as arms with descriptions, and the 800 sessions in a seeded order."""
    tools = load_tools(root)
    arms = [
        Arm(f"tool:bfcl:{name}", t.tokens, description=searchable(t.definition))
        for name, t in tools.items()
    ]
    position = {name: i for i, name in enumerate(tools)}
    bfcl = load_sessions(root, tools)
    order = np.random.default_rng(seed).permutation(len(bfcl))
    sessions = []
    for j in order.tolist():
        s = bfcl[j]
        turns = tuple(
            ContextTurn(t.message, tuple(sorted({position[c] for c in t.calls}))) for t in s.turns
        )
        sessions.append(ContextSession(s.id, turns, group=s.category))
    return arms, sessions


def searchable(definition: dict[str, object]) -> str:
    """What tool search reads of a definition: its description, and its parameters' names and
    descriptions (as the providers' BM25 tool search indexes them)."""
    parts = [str(definition.get("description", ""))]
    params = definition.get("parameters")
    props = params.get("properties", {}) if isinstance(params, dict) else {}
    for name, spec in props.items() if isinstance(props, dict) else ():
        parts.append(str(name))
        if isinstance(spec, dict):
            parts.append(str(spec.get("description", "")))
    return " ".join(p for p in parts if p)[:4000]


def bm25_reference(arms: Sequence[Arm], sessions: Sequence[ContextSession]) -> dict[int, float]:
    """Share of gold calls BM25 over the turn's message alone ranks in its top k (names and
    descriptions of all 128 tools)."""
    index = BM25Index.of_texts([f"{a.name} {a.description or ''}" for a in arms])
    out = {}
    for k in (5, 10, 20):
        hit = total = 0
        for s in sessions:
            for t in s.turns:
                top = set(index.top(words(t.message), k))
                hit += len(set(t.used) & top)
                total += len(t.used)
        out[k] = hit / total
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package-dir", type=Path, help="the installed bfcl_eval folder")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget", type=float, default=0.2, help="share of the inventory's tokens")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    root = package_dir(args.package_dir)
    arms, sessions = bfcl_study_inputs(root, args.seed)
    total = sum(a.token_cost for a in arms)
    ref = bm25_reference(arms, sessions)
    print(
        f"BFCL multi-turn: {len(sessions)} sessions, {sum(len(s.turns) for s in sessions):,} "
        f"turns, {len(arms)} tools ({total:,} tokens) as one inventory; seed {args.seed}"
    )
    print(
        "BM25 over the turn's message alone (names + descriptions) keeps "
        + ", ".join(f"{v:.0%} of gold calls in its top {k}" for k, v in ref.items())
    )
    base = product_config()
    budgets = {
        "every": 1.0,
        "default": args.budget,
        "bm25": args.budget,
        "context": args.budget,
        "context per turn": args.budget,
        "context+deferral": args.budget,
        "search at best": 0.0,
        "oracle": 1.0,
    }
    runs: dict[str, StudyRun] = {}
    for policy, share in budgets.items():
        config = base.merged({"token_budget": max(1, round(share * total))})
        runs[policy] = run_study(arms, sessions, policy, config, seed=args.seed)
    # BM25 at the session-stable context-aware set's tool tokens per turn over its selected
    # (not baseline) sessions: the budget, in steps of a percent, whose tokens per turn first
    # reach that set's
    target = tokens_per_turn(runs["context"], selected=True)
    share = args.budget
    while True:
        config = base.merged({"token_budget": max(1, round(share * total))})
        same = run_study(arms, sessions, "bm25", config, seed=args.seed)
        if tokens_per_turn(same) >= target or share >= 1.0:
            break
        share = round(share + 0.01, 2)
    runs["bm25, tokens of context"] = same
    budgets["bm25, tokens of context"] = share
    table(runs, sessions, budgets, base)
    print(f"({time.perf_counter() - began:.0f} s)")
    return 0


def product_config() -> LearningConfig:
    """The default policy under the product's defaults (minPulls 5, baseline rate 0.10); the
    default seed tools are not in this inventory."""
    return LearningConfig.for_policy(DEFAULT_POLICY, phase=Phase.ACTIVE, seed_arm_ids=())


LEARNING = ("default", "context", "context per turn", "context+deferral")
"""The rows whose policy learns (and so runs with minPulls and baseline sessions)."""


def settings_of(name: str, share: float, config: LearningConfig) -> tuple[str, str, str]:
    """A row's budget, minPulls and baseline rate, as the table shows them."""
    if name in ("every", "oracle", "search at best"):
        return ("-", "-", "-")
    if name not in LEARNING:
        return (f"{share:.0%}", "-", "-")
    return (f"{share:.0%}", str(config.min_pulls), f"{config.baseline_rate:.0%}")


def tokens_per_turn(run: StudyRun, *, selected: bool = False) -> float:
    """Tool tokens per turn, over every session or over the selected (not baseline) ones."""
    mask = ~np.array(run.baseline, dtype=bool) if selected and run.baseline else slice(None)
    return float(run.tool_tokens[mask].sum() / run.turns[mask].sum())


def table(
    runs: dict[str, StudyRun],
    sessions: Sequence[ContextSession],
    budgets: dict[str, float],
    config: LearningConfig,
) -> None:
    groups = np.array([s.group for s in sessions])
    full = runs["every"]
    header = ("sessions", "policy", "budget", "minPulls", "baseline", "cost vs every tool",
              "tool tokens/turn", "searches/session", "round trips/session",
              "recall of gold calls")  # fmt: skip
    rows = []
    for group in (*sorted(set(groups.tolist())), "all"):
        mask = groups == group if group != "all" else np.ones(len(sessions), dtype=bool)
        for name, run in runs.items():
            rows.append(
                (
                    group.removeprefix("multi_turn_"),
                    name,
                    *settings_of(name, budgets[name], config),
                    f"{run.prompt_cost[mask].sum() / full.prompt_cost[mask].sum():.3f}",
                    f"{run.tool_tokens[mask].sum() / run.turns[mask].sum():,.0f}",
                    f"{run.searches[mask].mean():.2f}",
                    f"{run.round_trips[mask].mean():.2f}",
                    f"{run.kept[mask].sum() / max(1.0, run.used[mask].sum()):.3f}",
                )
            )
    widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))]
    for row in (header, *rows):
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    raise SystemExit(main())
