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
                on every turn without a session key: a new draw and baseline coin per request;
- per session:  the same service asked with the session key on every turn (SPEC 4a): the
                session's first select decides, the baseline coin included (a baseline
                session offers every tool), later selects answer the same tools in the same
                order; the idle window is counted in the sessions' time. A tool a turn needed
                but lacked is asked for by the model (a tool call of its name); then, in three
                variants: the service appends it to the session's set for the next turn
                (`sessionGrowth` "append"), the runtime loads it into the conversation after
                that turn, as a runtime with tool search does (growth "off" + "load"), or it
                stays out for the rest of the session (growth "off", the default).
- oracle:       the knapsack of the true usage probabilities, the same set on every turn.

Both service policies observe every turn through `service.observe`, the report carrying the
session key and the simulated cache usage (engine.session_simulation.ServiceTurns). Figures
are means over environments (each its own tool inventory, usage and sessions) with their
standard errors: prompt cost per session relative to the full-prompt sessions (all sessions,
and the selected ones against the same sessions with every tool), tool tokens per turn,
prompt tokens per session, recall (the share of the tools the turns used that their prompts
had), and what the service's status reports afterwards (estimated recall; the measured saving
of selected sessions against baseline sessions per run). `--study` compares the session
settings (STUDY_CANDIDATES) over scenarios of history per turn, turns and gaps.

    .venv/bin/python bench/sessions.py [--envs N] [--sessions N] [--seed N] [--study]
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
from dataclasses import dataclass, replace  # noqa: E402

import numpy as np  # noqa: E402

from learning_bot.engine import LearningConfig, Phase  # noqa: E402
from learning_bot.engine.service import LearningService  # noqa: E402
from learning_bot.engine.session_simulation import (  # noqa: E402
    EveryArm,
    OracleArms,
    ServiceTurns,
    Session,
    SessionRun,
    SessionShape,
    SimulatedClock,
    draw_sessions,
    run_sessions,
)
from learning_bot.engine.simulation import Workload, make_tool_workload  # noqa: E402
from learning_bot.storage import SqlStore  # noqa: E402

TOOLS = 40
TOOL_TOKENS = 16_000
BUDGET_SHARE = 0.35
SHAPE = SessionShape(mean_turns=8.0, history_tokens=2_500)


@dataclass(frozen=True)
class Variant:
    """How the service is asked: per request (no session key) or per session, with the
    session settings and whether the runtime loads a lacked tool into the conversation."""

    per_session: bool
    growth: str = "append"
    idle_seconds: int = 300
    load: bool = False
    redecide: bool = True
    """False: a live session keeps the set its first select drew (no priced or provisional
    redraw, no redraw on a cache break): the rule before sessions were re-decided, for
    comparison."""


VARIANTS = {
    "per request": Variant(per_session=False),
    "per session, append": Variant(per_session=True, growth="append"),
    "per session, load": Variant(per_session=True, growth="off", load=True),
    "per session, off": Variant(per_session=True, growth="off"),
}


@dataclass(frozen=True)
class Reported:
    """What a service's status reports after the sessions."""

    estimated_recall: float | None
    cost_savings_percent: float | None
    """Selected sessions' prompt cost per run against baseline sessions' (engine.savings)."""


def keep_every_set(service: LearningService) -> None:
    """Make `service` keep each live session's set as drawn (the comparison's "never" rule):
    its session reviews always answer "keep"."""

    def keep(*_: object, **__: object) -> tuple[str, None]:
        return "", None

    service._session_sets._review = keep  # type: ignore[method-assign]


def service_run(
    workload: Workload,
    sessions: Sequence[Session],
    config: LearningConfig,
    seed: int,
    variant: Variant,
    shape: SessionShape,
) -> tuple[SessionRun, Reported]:
    """The sessions through a new learner of a real service on a SQLite file, its session
    idle windows counted in the sessions' time; and what its status reports after them."""
    config = replace(
        config, session_growth=variant.growth, session_idle_seconds=variant.idle_seconds
    )
    with tempfile.TemporaryDirectory() as folder:
        store = SqlStore(f"sqlite:///{folder}/learning.sqlite")
        try:
            clock = SimulatedClock()
            service = LearningService(store, config, rng=seed, cache_ttl=0, wall_clock=clock)
            if not variant.redecide:
                keep_every_set(service)
            start_ms = int(time.time() * 1000) - int(sessions[-1].times[-1] * 1000) - 60_000
            policy = ServiceTurns(
                service,
                workload,
                clock,
                start_ms=start_ms,
                per_session=variant.per_session,
                load=variant.load,
            )
            run = run_sessions(workload, sessions, policy, shape=shape)
            summary = service.summary()
            savings = summary.prompt_cost_savings
            return run, Reported(
                summary.estimated_recall, savings.percent if savings is not None else None
            )
        finally:
            store.close()


def environment(
    env: int,
    sessions: int,
    seed: int,
    shape: SessionShape = SHAPE,
    variants: Mapping[str, Variant] = VARIANTS,
) -> tuple[dict[str, SessionRun], dict[str, Reported]]:
    """Every tool, each service variant and the oracle on one environment's sessions, and what
    each variant's status reports."""
    workload = make_tool_workload(TOOLS, TOOL_TOKENS, seed=seed * 1_000 + env)
    drawn = draw_sessions(workload, sessions, np.random.default_rng([seed, env, 1]), shape)
    config = LearningConfig(
        phase=Phase.ACTIVE, token_budget=round(BUDGET_SHARE * TOOL_TOKENS), baseline_rate=0.10
    )
    select_seed = seed * 1_000 + env
    out = {"every tool": run_sessions(workload, drawn, EveryArm(TOOLS), shape=shape)}
    reported = {}
    for name, variant in variants.items():
        out[name], reported[name] = service_run(
            workload, drawn, config, select_seed, variant, shape
        )
    out["oracle"] = run_sessions(workload, drawn, OracleArms(workload, config), shape=shape)
    return out, reported


def relative_cost(result: Mapping[str, SessionRun], name: str) -> float:
    """Prompt cost per session of `name` against the full-prompt sessions."""
    return float(result[name].prompt_cost.mean() / result["every tool"].prompt_cost.mean())


def selected_cost(result: Mapping[str, SessionRun], name: str) -> float:
    """The prompt cost of `name`'s selected (not baseline) sessions against the same sessions
    sent with every tool: what the measured saving in status estimates."""
    run = result[name]
    chosen = ~run.baseline
    full = result["every tool"].prompt_cost[chosen].sum()
    return float(run.prompt_cost[chosen].sum() / full) if full else 1.0


def mean_se(values: Sequence[float]) -> str:
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return f"{mean:.3f}"
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return f"{mean:.3f} ± {sd / math.sqrt(n):.3f}"


def _mean(values: Sequence[float | None]) -> str:
    known = [v for v in values if v is not None]
    return mean_se(known) if len(known) == len(values) and known else "-"


def table(
    results: Sequence[Mapping[str, SessionRun]],
    reported: Sequence[Mapping[str, Reported]] = (),
) -> list[str]:
    """One line per policy: cost against every tool (all sessions, then the selected ones
    against the same sessions with every tool), tool tokens per turn, prompt tokens per
    session, recall, and what the service's status reports (estimated recall, the measured
    saving against baseline sessions), each a mean over environments (± its standard error)."""
    header = (
        "policy",
        "cost vs every tool",
        "selected sessions",
        "tool tokens/turn",
        "prompt tokens/session",
        "recall",
        "est. recall",
        "status saving %",
    )
    rows = []
    for name in results[0]:
        est = [r[name].estimated_recall if name in r else None for r in reported]
        saving = [r[name].cost_savings_percent if name in r else None for r in reported]
        cost = [relative_cost(r, name) for r in results]
        chosen = [selected_cost(r, name) for r in results]
        tools = [r[name].tool_tokens.sum() / r[name].turns.sum() for r in results]
        tokens = [float(r[name].prompt_tokens.mean()) for r in results]
        recall = [r[name].recall for r in results]
        rows.append(
            (
                name,
                mean_se(cost),
                mean_se(chosen),
                f"{np.mean(tools):,.0f}",
                f"{np.mean(tokens):,.0f}",
                mean_se(recall),
                _mean(est) if reported else "-",
                _mean(saving) if reported else "-",
            )
        )
    widths = [max(len(str(row[i])) for row in (header, *rows)) for i in range(len(header))]
    return [
        "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True))
        for row in (header, *rows)
    ]


STUDY_CANDIDATES = {
    "append, 300 s (before)": Variant(per_session=True, growth="append", idle_seconds=300),
    "off, 300 s": Variant(per_session=True, growth="off", idle_seconds=300),
    "off, 3600 s": Variant(per_session=True, growth="off", idle_seconds=3600),
}
"""The session settings the study compares; the first is the previous default."""


def study(envs: int, sessions: int, seed: int) -> None:
    """Each candidate's cost against the previous default, paired per environment, in every
    scenario: history per turn 500 / 2,500, mean turns 4 / 8 / 16, gaps inside the cache
    window only or three in ten outside it."""
    names = list(STUDY_CANDIDATES)
    before = names[0]
    diffs: dict[str, list[tuple[float, float]]] = {n: [] for n in names[1:]}
    print("scenario                         " + "  ".join(f"{n:>24s}" for n in names))
    for history in (500, 2_500):
        for turns in (4.0, 8.0, 16.0):
            for long_rate in (0.0, 0.3):
                shape = SessionShape(
                    mean_turns=turns, history_tokens=history, long_gap_rate=long_rate
                )
                results = [
                    environment(env, sessions, seed, shape, STUDY_CANDIDATES)[0]
                    for env in range(envs)
                ]
                cells = []
                for name in names:
                    cost = [relative_cost(r, name) for r in results]
                    recall = [r[name].recall for r in results]
                    cells.append(f"{np.mean(cost):.3f} r{np.mean(recall):.3f}")
                    if name != before:
                        d = [relative_cost(r, name) - relative_cost(r, before) for r in results]
                        se = float(np.std(d, ddof=1) / math.sqrt(len(d))) if len(d) > 1 else 0.0
                        diffs[name].append((float(np.mean(d)), se))
                label = f"history {history:>5,}, turns {turns:>4.0f}, long gaps {long_rate:.1f}"
                print(f"{label:33s}" + "  ".join(f"{c:>24s}" for c in cells), flush=True)
    for name, ds in diffs.items():
        no_worse = sum(1 for m, se in ds if m <= 2 * se)
        mean = float(np.mean([m for m, _ in ds]))
        print(
            f"{name}: no worse than '{before}' within 2 SE in {no_worse}/{len(ds)} scenarios; "
            f"mean cost difference {mean:+.4f} (negative: cheaper)"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, default=5, help="environments (inventories)")
    parser.add_argument("--sessions", type=int, default=200, help="sessions per environment")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--study", action="store_true", help="compare the session settings over scenarios"
    )
    args = parser.parse_args(argv)
    began = time.perf_counter()
    if args.study:
        study(args.envs, args.sessions, args.seed)
        print(f"({time.perf_counter() - began:.0f} s)")
        return 0
    both = [environment(env, args.sessions, args.seed) for env in range(args.envs)]
    results = [runs for runs, _ in both]
    print(
        f"{TOOLS} tools, {TOOL_TOKENS:,} tool tokens, budget {BUDGET_SHARE:.0%}; "
        f"{args.envs} environments x {args.sessions} sessions, mean "
        f"{np.mean([r['every tool'].turns.mean() for r in results]):.1f} turns; "
        f"{SHAPE.history_tokens:,} history tokens per turn; Anthropic cache prices"
    )
    for line in table(results, [reported for _, reported in both]):
        print(line)
    print(f"({time.perf_counter() - began:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
