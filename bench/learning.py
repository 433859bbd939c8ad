"""Does the learning layer learn? Selection policies on identical simulated workloads.

Every policy meets the same environments (inventory, hidden usage probabilities, the usage each
request draws for every arm, conversational turns, drift) and, as far as numpy's streams allow,
the same selection seeds. Policies:

- include everything: every arm on every run (the reference for token savings);
- seed algorithm:     Thompson selection with the default options (a draw from each posterior,
                      seeds and under-explored arms in, greedy packing by score);
- per token:          packing="score_per_token";
- forgetful:          the seed algorithm with half_life=100: each observation of an arm first
                      keeps 0.5 ** (1/100) of its evidence beyond its prior
                      (`engine.forgetting`, the arithmetic stored posteriors use);
- pooled prior:       per token, pooled_prior=True, exploration=0.7 (each score drawn under a
                      prior of usage probabilities fitted to every arm's evidence, the draw
                      tempered by 1/0.7; see `engine.draws._pooled_scores`);
- preset pooled-forgetting / preset pooled-forgetting-per-token: the named policies of
                      `engine.config.POLICIES` (pooled prior + half-life 100, packing by score
                      or by score per token);
- oracle:             knows every arm's usage probability and packs the exact knapsack
                      (`research.simulation.oracle_mask`), seeds in like every policy;
- pooled oracle:      (research scenarios only) knows the usage probability of every useful
                      arm (p >= 0.2) but values each rarely used arm at their average: the cost
                      of not telling rare arms apart, a floor no learner gets under quickly.

The learning policies run through `research.simulation.run_policy`: `select_arms` on an `ArmSet`
and `PosteriorArrays` one request at a time, the arrays updated in place exactly as the
service's rewards do (included and used: alpha += 1; included and unused: beta += 1; conversational
turns: no update), forgetting as the service does when the policy has a half-life.

Metrics, per policy, means over environments:

- savings:   1 - tokens the policy put in prompts / tokens of include everything, all runs;
- recall:    per run |included and used| / |used|, averaged over runs that used an arm;
- recall w/o baseline: the same over the runs that were not baseline runs (the oracle makes
             none, and a baseline run packs the inventory in order, whatever was learned);
- misses:    runs that needed an arm they did not get, per 100 runs;
- regret:    sum over runs of (expected used arms of the oracle's set - of the policy's set),
             baseline runs and conversational turns left out (± standard error over envs);
- est. recall / true recall: the estimate status shows (`engine.metrics.estimated_recall`:
             the uses of included arms observed in the working runs among the last 300
             selected runs, over those plus each left-out arm's usefulness estimate from the
             final posteriors (empirical Bayes over every arm's evidence,
             `engine.metrics.usefulness_estimates`) times the runs that left it out) and
             the simulator's recall over the same runs;
- good from: the first trace from which the policy's regret per trace, over a rolling
             window of 50 scored traces, stays within 10% of the oracle's expected used arms
             (median over envs; ">=" when only at the run's end): how long choosing well takes;
- stable at: the first trace from which no posterior mean moves by more than 0.1 for the rest
             of the run (means checked every max(1, traces // 200) traces; median over envs).
             A run ends stable by construction, so a figure near the run's length means "not
             before the end"; it is marked with ">=".

Scenarios: the research environment the targets come from (two-tier usefulness, every arm
starting from Beta(1, 1) as after a reset, 2 seed arms, minPulls 3, baselineRate 0.05, no
conversational turns, 40 environments) and a grid on the realistic workload (every arm type,
the default priors, minPulls 5, the recommended baseline rate, 30% conversational turns): 10,
30, 200 and 2,000 arms; budget 30% (tight) or 120% (loose) of the inventory's tokens; with or
without drift at half the run; 200, 1,000 and 10,000 traces.

    .venv/bin/python -m bench.learning [--quick] [--seed N] [--jobs N] [--plot PATH]
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from bench.table import print_table
from learning_bot.engine import ArmSet, LearningConfig, Phase
from learning_bot.engine.inventory import PosteriorArrays
from learning_bot.engine.metrics import recommended_baseline_rate, usefulness_estimates
from learning_bot.engine.service import RECALL_WINDOW
from learning_bot.research.simulation import make_workload, oracle_mask, run_policy, stable_from

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

STABLE_EPS = 0.1
CURVE_WINDOW = 50


@dataclass(frozen=True)
class Policy:
    name: str
    kind: str  # "all", "oracle" or "learn"
    options: tuple[tuple[str, Any], ...] = ()


SHARP = (("packing", "score_per_token"), ("exploration", 0.1))
POOLED = (("packing", "score_per_token"), ("exploration", 0.7), ("pooled_prior", True))
PRESETS = ("pooled-forgetting", "pooled-forgetting-per-token")
POLICIES = (
    Policy("include everything", "all"),
    Policy("seed algorithm", "learn"),
    Policy("per token", "learn", (("packing", "score_per_token"),)),
    Policy("forgetful", "learn", (("half_life", 100.0),)),
    Policy("pooled prior", "learn", POOLED),
    *(Policy(f"preset {name}", "learn", (("policy", name),)) for name in PRESETS),
    Policy("oracle", "oracle"),
)
GOOD_WITHIN = 0.10
"""`good from`: regret per trace within this share of the oracle's expected used arms."""
RARE_BELOW = 0.2


@dataclass(frozen=True)
class Scenario:
    name: str
    arms: int
    traces: int
    budget_share: float
    envs: int
    profile: str = "realistic"
    drift: bool = False
    conversational_rate: float = 0.3
    flat_prior: bool = False
    min_pulls: int = 5
    baseline_rate: float | None = None  # None: the recommended rate for the inventory size
    policies: tuple[Policy, ...] = POLICIES
    curves: bool = False

    @property
    def drift_at(self) -> int | None:
        return self.traces // 2 if self.drift else None

    def describe(self) -> str:
        rate = self.rate
        parts = [
            f"{self.arms:,} arms",
            f"{self.traces:,} traces",
            f"budget {self.budget_share:.0%} of the inventory's tokens",
            f"drift at trace {self.drift_at:,}" if self.drift_at is not None else "no drift",
            f"{self.profile} usefulness",
            f"minPulls {self.min_pulls}",
            f"baselineRate {rate:g}",
            f"{self.conversational_rate:.0%} conversational",
            "every arm from Beta(1,1)" if self.flat_prior else "default priors",
            f"{self.envs} environments",
        ]
        return ", ".join(parts)

    @property
    def rate(self) -> float:
        if self.baseline_rate is not None:
            return self.baseline_rate
        return recommended_baseline_rate(self.arms)


def research(name: str, arms: int, traces: int, share: float, **kw: Any) -> Scenario:
    """The environment behind the targets (see the module docstring)."""
    base: dict[str, Any] = {
        "envs": 40,
        "profile": "two-tier",
        "conversational_rate": 0.0,
        "flat_prior": True,
        "min_pulls": 3,
        "baseline_rate": 0.05,
        "policies": (*POLICIES, Policy("pooled oracle", "pooled")),
    }
    base.update(kw)
    return Scenario(name, arms, traces, share, **base)


# --- one environment ------------------------------------------------------------------------


@dataclass
class PolicyRun:
    """Per-environment figures of one policy."""

    savings: float
    recall: float
    recall_selected: float
    misses: float
    regret: float
    stable_at: int | None
    grain: int = 1
    est_recall: float = math.nan
    true_recall: float = math.nan
    good_from: int | None = None
    token_curve: FloatArray | None = None
    recall_curve: FloatArray | None = None


@dataclass
class EnvResult:
    runs: dict[str, PolicyRun] = field(default_factory=dict)
    seconds: float = 0.0


def pooled(p: FloatArray) -> FloatArray:
    """Usage probabilities as the pooled oracle sees them: rare arms at their average."""
    rare = p < RARE_BELOW
    out = p.copy()
    if rare.any():
        out[rare] = p[rare].mean()
    return out


def _seed(*parts: int) -> int:
    return int(np.random.SeedSequence(list(parts)).generate_state(1)[0])


PROFILE_KEYS = {"two-tier": 2, "realistic": 3}


def run_env(scenario: Scenario, env: int, seed: int) -> EnvResult:
    """All policies of a scenario on one environment."""
    started = time.perf_counter()
    key = PROFILE_KEYS[scenario.profile]
    workload = make_workload(
        scenario.arms,
        seed=_seed(seed, key, scenario.arms, env),
        profile=scenario.profile,
        conversational_rate=scenario.conversational_rate,
        drift_at=scenario.drift_at,
    )
    arm_set = ArmSet(workload.arms)
    costs = arm_set.costs
    total = arm_set.total_cost
    budget = round(scenario.budget_share * total)
    traces = scenario.traces
    conversational, used = workload.draw_run(
        traces, np.random.default_rng([seed, key, scenario.arms, env, 1])
    )
    base = LearningConfig.for_policy(
        "seed",
        phase=Phase.ACTIVE,
        token_budget=budget,
        min_pulls=scenario.min_pulls,
        baseline_rate=scenario.rate,
        seed_arm_ids=tuple(arm.id for arm in workload.arms[:2]),
    )
    seeds = arm_set.seed_mask(base.seed_arm_ids)
    # Usage probabilities per trace: before and (with drift) after the shift.
    p_before = workload.usefulness
    p_after = workload.usefulness_at(traces)
    switch = scenario.drift_at if scenario.drift_at is not None else traces
    oracle_before, grain = oracle_mask(p_before, costs, budget, seeds)
    oracle_after, grain_after = oracle_mask(p_after, costs, budget, seeds)
    oracle_value = np.empty(traces)
    oracle_value[:switch] = p_before[oracle_before].sum()
    oracle_value[switch:] = p_after[oracle_after].sum()
    working = ~conversational
    counted = used.sum(axis=1)

    def figures(
        masks: BoolArray,
        baseline: BoolArray,
        stable_at: int | None,
        final: PosteriorArrays | None = None,
    ) -> PolicyRun:
        tokens = masks @ costs
        hits = (masks & used).sum(axis=1)
        has_use = counted > 0
        recall_per = np.full(traces, np.nan)
        recall_per[has_use] = hits[has_use] / counted[has_use]
        value = np.empty(traces)
        value[:switch] = masks[:switch] @ p_before
        value[switch:] = masks[switch:] @ p_after
        scored = working & ~baseline
        run = PolicyRun(
            savings=1.0 - float(tokens.sum()) / (traces * total),
            recall=float(np.nanmean(recall_per)) if has_use.any() else math.nan,
            recall_selected=(
                float(np.nanmean(recall_per[~baseline]))
                if (has_use & ~baseline).any()
                else math.nan
            ),
            misses=100.0 * float(((used & ~masks).any(axis=1)).mean()),
            regret=float((oracle_value - value)[scored].sum()),
            stable_at=stable_at,
            grain=max(grain, grain_after),
        )
        gap = (oracle_value - value)[scored]
        if gap.size >= CURVE_WINDOW:
            share = rolling(gap, CURVE_WINDOW) / np.maximum(oracle_value[scored][0], 1e-9)
            bad = np.flatnonzero(share > GOOD_WITHIN)
            start = 0 if bad.size == 0 else int(bad[-1]) + 1
            traces_scored = np.flatnonzero(scored)
            run.good_from = int(traces_scored[min(start, traces_scored.size - 1)])
        if final is not None:
            run.est_recall, run.true_recall = recall_check(masks, baseline, final)
        if scenario.curves:
            run.token_curve = tokens / total
            run.recall_curve = recall_per
        return run

    # status reads the evidence beyond the prior each arm started from (Beta(1, 1) after a
    # reset, engine.forgetting.forgetting_prior)
    flat_start = (np.ones(len(costs)), np.ones(len(costs)))
    start_alpha, start_beta = (
        flat_start
        if scenario.flat_prior
        else (
            arm_set.prior_alpha,
            arm_set.prior_beta,
        )
    )

    def recall_check(
        masks: BoolArray, baseline: BoolArray, final: PosteriorArrays
    ) -> tuple[float, float]:
        """(estimated recall as status computes it, the simulator's recall), both over the
        working runs among the last RECALL_WINDOW selected runs."""
        window = np.flatnonzero(~baseline)[-RECALL_WINDOW:]
        window = window[working[window]]
        if window.size == 0:
            return math.nan, math.nan
        estimates = usefulness_estimates(
            {
                str(i): (float(a - pa), float(b - pb))
                for i, (a, b, pa, pb) in enumerate(
                    zip(final.alpha, final.beta, start_alpha, start_beta, strict=True)
                )
            }
        )
        p = np.array([estimates[str(i)] for i in range(len(final.alpha))])
        hits = float((masks[window] & used[window]).sum())
        left_out = (~masks[window]).sum(axis=0)
        missed = float((p * left_out).sum())
        est = hits / (hits + missed) if hits + missed > 0 else math.nan
        wanted = used[window].sum()
        return est, float(hits / wanted) if wanted else math.nan

    result = EnvResult()
    for policy in scenario.policies:
        if policy.kind == "all":
            masks = np.ones((traces, len(costs)), dtype=bool)
            result.runs[policy.name] = figures(masks, np.zeros(traces, bool), None)
        elif policy.kind in ("oracle", "pooled"):
            masks = np.empty((traces, len(costs)), dtype=bool)
            if policy.kind == "oracle":
                masks[:switch], masks[switch:] = oracle_before, oracle_after
            else:
                masks[:switch] = oracle_mask(pooled(p_before), costs, budget, seeds)[0]
                masks[switch:] = oracle_mask(pooled(p_after), costs, budget, seeds)[0]
            result.runs[policy.name] = figures(masks, np.zeros(traces, bool), None)
        else:
            options = dict(policy.options)
            name = options.pop("policy", None)
            config = base.merged({"policy": name}) if name is not None else base
            config = replace(config, **options)
            gen = np.random.default_rng([seed, key, scenario.arms, env, 2])
            flat = (np.ones(len(costs)), np.ones(len(costs)))
            run = run_policy(
                arm_set,
                config,
                conversational,
                used,
                gen,
                prior=flat if scenario.flat_prior else None,
                half_life=config.half_life or None,
            )
            stable_at = stable_from(run.means, run.every, STABLE_EPS)
            result.runs[policy.name] = figures(run.included, run.baseline, stable_at, run.final)
    result.seconds = time.perf_counter() - started
    return result


# --- aggregation and tables -----------------------------------------------------------------


@dataclass
class Row:
    policy: str
    savings: float
    recall: float
    recall_selected: float
    misses: float
    regret: float
    regret_se: float
    stable: str
    est_recall: float = math.nan
    true_recall: float = math.nan
    recall_gap: float = math.nan
    """The largest |estimated - true recall| over the environments."""
    good_from: str = ""


def aggregate(scenario: Scenario, envs: Sequence[EnvResult]) -> list[Row]:
    rows = []
    for policy in scenario.policies:
        runs = [env.runs[policy.name] for env in envs]
        regrets = np.array([r.regret for r in runs])
        se = float(regrets.std(ddof=1) / math.sqrt(len(regrets))) if len(regrets) > 1 else 0.0
        stable = good = ""
        est = true = gap = math.nan
        if policy.kind == "learn":
            at = float(np.median([r.stable_at for r in runs if r.stable_at is not None]))
            late = at >= 0.9 * scenario.traces
            stable = f"{'>=' if late else ''}{at:,.0f}"
            starts = [r.good_from for r in runs if r.good_from is not None]
            if starts:
                good_at = float(np.median(starts))
                good = f"{'>=' if good_at >= 0.9 * scenario.traces else ''}{good_at:,.0f}"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                est = float(np.nanmean([r.est_recall for r in runs]))
                true = float(np.nanmean([r.true_recall for r in runs]))
                gap = float(np.nanmax([abs(r.est_recall - r.true_recall) for r in runs]))
        rows.append(
            Row(
                policy.name,
                100.0 * float(np.mean([r.savings for r in runs])),
                float(np.nanmean([r.recall for r in runs])),
                float(np.nanmean([r.recall_selected for r in runs])),
                float(np.mean([r.misses for r in runs])),
                float(regrets.mean()),
                se,
                stable,
                est,
                true,
                gap,
                good,
            )
        )
    return rows


def scenario_table(scenario: Scenario, rows: Sequence[Row]) -> None:
    by_name = {r.policy: r for r in rows}
    oracle_recall = by_name["oracle"].recall if "oracle" in by_name else math.nan
    print_table(
        [
            "policy",
            "savings %",
            "recall",
            "recall / oracle",
            "w/o baseline / oracle",
            "misses /100 runs",
            "regret vs oracle",
            "good from",
            "stable at trace",
            "est. / true recall (max gap)",
        ],
        (
            [
                r.policy,
                f"{r.savings:.1f}",
                f"{r.recall:.3f}",
                f"{r.recall / oracle_recall:.3f}" if oracle_recall > 0 else "-",
                f"{r.recall_selected / oracle_recall:.3f}" if oracle_recall > 0 else "-",
                f"{r.misses:.1f}",
                f"{r.regret:,.1f} ± {r.regret_se:,.1f}"
                if scenario.envs > 1
                else f"{r.regret:,.1f}",
                r.good_from or "-",
                r.stable or "-",
                f"{r.est_recall:.3f} / {r.true_recall:.3f} ({r.recall_gap:.3f})"
                if not math.isnan(r.est_recall)
                else "-",
            ]
            for r in rows
        ),
    )


# --- scenarios ------------------------------------------------------------------------------

RESEARCH = (
    research("research A: 30 arms, 200 traces, budget 35%", 30, 200, 0.35),
    research("research B: 100 arms, 1,000 traces, budget 25%", 100, 1000, 0.25),
    research("research C: 30 arms, 1,000 traces, budget 35%, no shift", 30, 1000, 0.35),
    research(
        "research D: 30 arms, 1,000 traces, budget 35%, shift at 500", 30, 1000, 0.35, drift=True
    ),
    research("research E: 30 arms, 1,000 traces, loose budget 120%", 30, 1000, 1.20),
)

# Environments per grid scenario, by (arms, traces): fewer where one run is long.
GRID_ENVS = {
    (10, 200): 40, (10, 1000): 12, (10, 10000): 3,
    (30, 200): 40, (30, 1000): 12, (30, 10000): 3,
    (200, 200): 16, (200, 1000): 6, (200, 10000): 2,
    (2000, 200): 6, (2000, 1000): 2, (2000, 10000): 1,
}  # fmt: skip
QUICK_TRACES = (200, 1000)


LARGE = {(200, 10000), (2000, 1000), (2000, 10000)}
"""Grid cells `--skip-large` leaves out: the longest runs (pooled draws at 2,000 arms cost
about 8 ms a selection)."""


def grid(quick: bool, skip_large: bool = False) -> list[Scenario]:
    out = []
    for arms in (10, 30, 200, 2000):
        for traces in QUICK_TRACES if quick else (200, 1000, 10000):
            if skip_large and (arms, traces) in LARGE:
                continue
            for share, budget in ((0.30, "tight"), (1.20, "loose")):
                for drift in (False, True):
                    envs = GRID_ENVS[(arms, traces)]
                    if quick:
                        envs = max(1, envs // 4)
                    name = f"{arms:,} arms, {traces:,} traces, {budget} budget, " + (
                        "drift" if drift else "no drift"
                    )
                    curves = arms == 30 and traces == 1000 and not drift
                    out.append(
                        Scenario(name, arms, traces, share, envs, drift=drift, curves=curves)
                    )
    return out


def sweep(quick: bool) -> list[Scenario]:
    """min_score on the loose realistic 30-arm workload: how savings trade against recall."""
    out = []
    for threshold in (0.01, 0.02, 0.05, 0.1, 0.2):
        policies = (
            Policy("include everything", "all"),
            Policy(
                f"sharpened, min_score {threshold:g}", "learn", (*SHARP, ("min_score", threshold))
            ),
            Policy("oracle", "oracle"),
        )
        out.append(
            Scenario(
                f"threshold sweep: min_score {threshold:g}",
                30,
                1000,
                1.20,
                3 if quick else 12,
                policies=policies,
            )
        )
    return out


# --- running --------------------------------------------------------------------------------


def run_all(
    scenarios: Sequence[Scenario], seed: int, jobs: int, progress: Callable[[str], None]
) -> dict[str, list[EnvResult]]:
    tasks = [(s, env) for s in scenarios for env in range(s.envs)]
    # Long tasks first, so the last ones to finish are short.
    tasks.sort(key=lambda task: -task[0].traces * (task[0].arms + 50))
    results: dict[str, list[EnvResult]] = {s.name: [] for s in scenarios}
    if jobs <= 1:
        for scenario, env in tasks:
            results[scenario.name].append(run_env(scenario, env, seed))
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = [(s, pool.submit(run_env, s, env, seed)) for s, env in tasks]
            for done, (scenario, future) in enumerate(futures, start=1):
                results[scenario.name].append(future.result())
                if done % 50 == 0:
                    progress(f"{done}/{len(futures)} environment runs")
    return results


def rolling(values: FloatArray, window: int) -> FloatArray:
    """Mean over a sliding window, skipping NaN (traces where no arm was used)."""
    kernel = np.ones(window)
    present = ~np.isnan(values)
    total = np.convolve(np.where(present, values, 0.0), kernel, "valid")
    count = np.convolve(present.astype(np.float64), kernel, "valid")
    out = np.full(total.shape, np.nan)
    np.divide(total, count, out=out, where=count > 0)
    return out


def plot(panels: Sequence[tuple[Scenario, Sequence[EnvResult]]], path: Path) -> None:
    """Savings and recall over traces, one row per scenario, one line per policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        len(panels), 2, figsize=(12, 4 * len(panels)), squeeze=False, constrained_layout=True
    )
    for (scenario, envs), (left, right) in zip(panels, axes, strict=True):
        for policy in scenario.policies:
            runs = [e.runs[policy.name] for e in envs]
            tokens = np.mean([r.token_curve for r in runs], axis=0)
            with warnings.catch_warnings():  # a trace where no environment used an arm is NaN
                warnings.simplefilter("ignore", RuntimeWarning)
                recalls = np.nanmean(np.vstack([r.recall_curve for r in runs]), axis=0)
            x = np.arange(CURVE_WINDOW, len(tokens) + 1)
            style = "-" if policy.kind == "learn" else "--"
            left.plot(x, 100 * (1 - rolling(tokens, CURVE_WINDOW)), style, label=policy.name)
            right.plot(x, rolling(recalls, CURVE_WINDOW), style, label=policy.name)
        title = f"{scenario.name} ({scenario.envs} environments)"
        left.set(xlabel="trace", ylabel="token savings %, rolling 50 traces", title=title)
        right.set(xlabel="trace", ylabel="recall of used arms, rolling 50 traces", title=title)
        right.legend(loc="lower right", fontsize=8)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer environments, no 10,000")
    parser.add_argument(
        "--skip-large",
        action="store_true",
        help="leave out 200 arms x 10,000 traces and 2,000 arms x 1,000+ traces",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of every environment and draw")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes")
    parser.add_argument(
        "--context", action="store_true", help="only the request-aware study (context_study)"
    )
    parser.add_argument(
        "--context-service",
        metavar="DATABASE_URL",
        help="drive the task-type workload through LearningService on this database",
    )
    parser.add_argument("--sessions", type=int, default=10_000, help="with --context-service")
    parser.add_argument(
        "--recall-target",
        type=float,
        help="with --context-service: under this recall target (no budget cap, baseline "
        "sessions 10%%, a provider with tool search) instead of a 20%% budget",
    )
    parser.add_argument(
        "--max-cells", type=int, default=200_000, help="with --context-service: evidence bound"
    )
    parser.add_argument(
        "--plot", type=Path, default=Path(__file__).resolve().parent / "learning.png"
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    if args.context_service:
        context_service_run(
            args.context_service, args.sessions, args.seed, args.max_cells, args.recall_target
        )
        print(f"(run took {time.perf_counter() - started:.0f} s)")
        return 0
    if args.context:
        context_study(args.seed)
        print(f"(run took {time.perf_counter() - started:.0f} s)")
        return 0
    print(
        f"learning quality: Python {platform.python_version()}, numpy {np.__version__}, "
        f"seed {args.seed}, {args.jobs} processes{', quick' if args.quick else ''}"
        f"{', large grid cells skipped' if args.skip_large else ''}"
    )
    print()
    research_set = list(RESEARCH)
    if args.quick:
        research_set = [replace(s, envs=10) for s in research_set]
    scenarios = [*research_set, *grid(args.quick, args.skip_large), *sweep(args.quick)]
    results = run_all(
        scenarios, args.seed, args.jobs, lambda msg: print(f"  ... {msg}", file=sys.stderr)
    )
    rows = {s.name: aggregate(s, results[s.name]) for s in scenarios}
    for scenario in scenarios:
        print(f"### {scenario.name}")
        print(scenario.describe())
        grains = {r.grain for e in results[scenario.name] for r in e.runs.values()}
        if max(grains) > 1:
            print(f"(oracle knapsack on costs rounded up to {max(grains)} tokens)")
        print()
        scenario_table(scenario, rows[scenario.name])
        print()
    verdicts(research_set, rows, scenarios)
    shown = [s for s in scenarios if s.curves]
    plot([(s, results[s.name]) for s in shown], args.plot)
    print(f"plot: {args.plot} ({'; '.join(s.name for s in shown)})")
    cpu = sum(e.seconds for envs in results.values() for e in envs)
    print(f"(run took {time.perf_counter() - started:.0f} s wall, {cpu:.0f} s in simulations)")
    return 0


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def verdicts(
    research_set: Sequence[Scenario], rows: dict[str, list[Row]], scenarios: Sequence[Scenario]
) -> None:
    """The targets, each with the measured figure and met / NOT met, then the default."""

    def get(scenario: Scenario, policy: str) -> Row:
        return next(r for r in rows[scenario.name] if r.policy == policy)

    a, b, c, d, _ = research_set
    lines = []
    sa, sb = get(a, "seed algorithm"), get(b, "seed algorithm")
    lines.append(
        [
            "seed algorithm reproduces: 30/200/35% recall ~0.85, regret ~40",
            f"recall {sa.recall:.3f}, regret {sa.regret:.1f} ± {sa.regret_se:.1f}",
        ]
    )
    lines.append(
        [
            "seed algorithm reproduces: 100/1,000/25% regret ~680",
            f"regret {sb.regret:.1f} ± {sb.regret_se:.1f}",
        ]
    )
    for name in PRESETS:
        policy = f"preset {name}"
        rb, rc, rd = get(b, policy), get(c, policy), get(d, policy)
        lines.append(
            [
                f"{policy}: research D <= 200, C <= 65, B <= 160",
                f"D {rd.regret:.1f} ± {rd.regret_se:.1f}, C {rc.regret:.1f} ± "
                f"{rc.regret_se:.1f}, B {rb.regret:.1f} ± {rb.regret_se:.1f}: "
                + verdict(rd.regret <= 200 and rc.regret <= 65 and rb.regret <= 160),
            ]
        )
    learning = [p.name for p in POLICIES if p.kind == "learn"]
    compared = [s for s in scenarios if any(r.policy == "seed algorithm" for r in rows[s.name])]
    for policy in learning:
        gaps = [
            (abs(get(s, policy).est_recall - get(s, policy).true_recall), s.name)
            for s in compared
            if not math.isnan(get(s, policy).est_recall - get(s, policy).true_recall)
        ]
        within = sum(1 for gap, _ in gaps if gap <= 0.05)
        worst = max(gaps)
        lines.append(
            [
                f"{policy}: estimated recall within 0.05 of the true recall on every workload",
                f"{within}/{len(gaps)} workloads; largest gap {worst[0]:.3f} ({worst[1]}): "
                + verdict(within == len(gaps)),
            ]
        )
    print("### targets")
    print()
    print_table(["target", "measured"], lines)
    print()
    decide(compared, get)
    forgetting_table(scenarios, get)


def decide(scenarios: Sequence[Scenario], get: Callable[[Scenario, str], Row]) -> None:
    """Each preset against the seed algorithm over every scenario: no worse within two standard
    errors in >= 95% of them and better on average makes it the default."""
    print("### the default policy")
    print()
    table = []
    best: tuple[float, str] | None = None
    for name in PRESETS:
        policy = f"preset {name}"
        ok = 0
        changes = []
        for s in scenarios:
            seed, preset = get(s, "seed algorithm"), get(s, policy)
            margin = 2.0 * math.hypot(seed.regret_se, preset.regret_se)
            ok += preset.regret <= seed.regret + margin
            changes.append(preset.regret - seed.regret)
        share = ok / len(scenarios)
        mean_change = float(np.mean(changes))
        qualifies = share >= 0.95 and mean_change < 0
        table.append(
            [
                policy,
                f"{ok}/{len(scenarios)} ({share:.0%})",
                f"{mean_change:+,.1f}",
                "yes" if qualifies else "no",
            ]
        )
        if qualifies and (best is None or mean_change < best[0]):
            best = (mean_change, name)
    print_table(["preset", "no worse than seed (2 SE)", "mean regret change", "qualifies"], table)
    print()
    print(f"default policy: {best[1] if best else 'seed'}")
    print()


def forgetting_table(scenarios: Sequence[Scenario], get: Callable[[Scenario, str], Row]) -> None:
    """Regret of the seed algorithm, forgetting alone and the presets on the realistic grid,
    calm and with drift."""
    names = ["seed algorithm", "forgetful", *(f"preset {n}" for n in PRESETS)]
    table = []
    for s in scenarios:
        if not s.name[0].isdigit():
            continue
        table.append(
            [s.name]
            + [f"{get(s, n).regret:,.1f} ± {get(s, n).regret_se:,.1f}" for n in names]
            + [get(s, n).good_from or "-" for n in names[:1] + names[2:3]]
        )
    print("### realistic grid: regret of the seed algorithm, forgetting and the presets")
    print()
    print_table(["scenario", *names, "good from: seed", f"good from: preset {PRESETS[0]}"], table)
    print()


def context_study(seed: int) -> None:
    """Request-aware selection on task-type workloads (research.context_simulation): today's
    context-free default, the context-aware policy with and without the request's context,
    BM25 over the message alone, and the context oracle (the session's task type known,
    its usage rates packed under the same budget). The alphanumeric workloads write each
    task word as technical words are written (`k8s`, `ec2`, `gpt4o`: bench/context_words.py)."""
    from bench.context_words import alphanumeric
    from learning_bot.engine.config import DEFAULT_POLICY
    from learning_bot.research.context_simulation import run_study
    from learning_bot.research.task_types import task_type_workload

    print(
        "### context: task-type workloads (60 tools and 8 types of 2-5 tools unless named, "
        "1,000 sessions)"
    )
    header = ("workload", "budget", "minPulls", "baseline", "policy", "cost vs every tool",
              "tool tokens/turn", "recall")  # fmt: skip
    rows = []
    closure = []
    checks = []
    for name, options, written in (
        ("background 2%", {"background": 0.02}, False),
        ("background 5%", {"background": 0.05}, False),
        ("12 types", {"types": 12, "tools": 90}, False),
        ("alphanumeric, 40 tools", {"tools": 40}, True),
        ("alphanumeric, 120 tools, 16 types", {"types": 16, "tools": 120}, True),
    ):
        arms, sessions = task_type_workload(seed=seed, **options)
        if written:
            arms, sessions = alphanumeric(arms, sessions)
        total = sum(a.token_cost for a in arms)
        # the product's defaults: minPulls 5, baseline sessions 10%
        base = LearningConfig.for_policy(DEFAULT_POLICY, phase=Phase.ACTIVE, seed_arm_ids=())
        full = run_study(arms, sessions, "every", base.merged({"token_budget": total}), seed=seed)
        for share in (0.2, 0.3):
            config = base.merged({"token_budget": round(share * total)})
            runs = {
                "default": run_study(arms, sessions, "default", config, seed=seed),
                "context, no context sent": run_study(
                    arms, sessions, "context", config, seed=seed, use_context=False
                ),
                "bm25": run_study(arms, sessions, "bm25", config, seed=seed),
                "context": run_study(arms, sessions, "context", config, seed=seed),
                "context+deferral": run_study(
                    arms, sessions, "context+deferral", config, seed=seed
                ),
                "context oracle": run_study(arms, sessions, "oracle", config, seed=seed),
            }
            for policy, run in runs.items():
                learns = policy not in ("bm25", "context oracle")
                rows.append(
                    (
                        name,
                        f"{share:.0%}",
                        str(config.min_pulls) if learns else "-",
                        f"{config.baseline_rate:.0%}" if learns else "-",
                        policy,
                        f"{run.prompt_cost.sum() / full.prompt_cost.sum():.3f}",
                        f"{run.tool_tokens.sum() / run.turns.sum():,.0f}",
                        f"{run.recall:.3f}",
                    )
                )
            d, c, o = (runs[k].recall for k in ("default", "context", "context oracle"))
            same = runs["context, no context sent"].recall
            closure.append(
                f"{name}, budget {share:.0%}: context closes {(c - d) / (o - d):.0%} of the recall "
                f"gap between the default ({d:.3f}) and the context oracle ({o:.3f}); without "
                f"context it keeps {same:.3f} (default {d:.3f})"
            )
            checks.append(c >= same)
    print_table(header, rows)
    print()
    for line in closure:
        print("  " + line)
    print()
    print(
        f"  recall with the message never below recall without it: {verdict(all(checks))} "
        f"({sum(checks)} of {len(checks)} workload budgets)"
    )


def context_service_run(
    url: str, sessions_count: int, seed: int, max_cells: int, target: float | None = None
) -> None:
    """The task-type workload driven through LearningService on a real SqlStore at `url`
    (the context-aware policy with deferral): whether it makes the study's selections for the
    same seed, and what the learner stores. With a recall `target`: no budget cap, baseline
    sessions 10% and Anthropic's tool search (the calibration replays the search), and whether
    the service calibrates and prices it as the study does."""
    from sqlalchemy import func, select

    from learning_bot.engine.config import DEFAULT_POLICY
    from learning_bot.engine.context_policy import ContextSettings
    from learning_bot.engine.service import LearningService
    from learning_bot.research.context_simulation import run_study
    from learning_bot.research.task_types import task_type_workload
    from learning_bot.storage import SqlStore
    from learning_bot.storage.schema import context_evidence, traces

    arms, sessions = task_type_workload(sessions=sessions_count, seed=seed)
    total = sum(a.token_cost for a in arms)
    config = LearningConfig.for_policy(
        DEFAULT_POLICY,
        phase=Phase.ACTIVE,
        seed_arm_ids=(),
        min_pulls=0,
        baseline_rate=0.0,
        token_budget=round(0.2 * total),
    )
    if target is not None:
        config = replace(
            config,
            baseline_rate=0.1,
            token_budget=total,
            recall_target=target,
            provider="anthropic",
        )
    settings = ContextSettings(max_cells=max_cells)
    began = time.perf_counter()
    alone = run_study(arms, sessions, "context+deferral", config, seed=seed, settings=settings)
    study_s = time.perf_counter() - began
    store = SqlStore(url)
    learner = f"context-study-{seed}-{sessions_count}-{time.time_ns()}"
    service = LearningService(
        store, config, rng=seed, cache_ttl=60.0, learner=learner, context_settings=settings
    )
    began = time.perf_counter()
    served = run_study(arms, sessions, "context+deferral", config, seed=seed, service=service)
    service_s = time.perf_counter() - began
    same = sum(a == b for a, b in zip(alone.selections, served.selections, strict=True))
    lid = service.learner_id
    with store.engine.connect() as conn:
        cells = conn.execute(
            select(func.count())
            .select_from(context_evidence)
            .where(context_evidence.c.learner_id == lid)
        ).scalar_one()
        runs = conn.execute(
            select(func.count()).select_from(traces).where(traces.c.learner_id == lid)
        ).scalar_one()
    report = service.verify()
    if target is not None:
        from learning_bot.research.context_simulation import Learner

        mine = service._selector.target_levels.calibration
        theirs = alone.learner.calibration if isinstance(alone.learner, Learner) else None
        selected = ~np.array(served.baseline, dtype=bool)
        same_uses = theirs is not None and mine.recorded() == theirs.recorded()
        same_price = theirs is not None and mine.pricing == theirs.pricing
        print(
            f"target {target}: {int(np.sum(served.baseline)):,} baseline sessions; "
            f"calibration {len(mine):,} uses, {'the same as' if same_uses else 'unlike'} the "
            f"study's ({sum(u.level < u.own for u in mine.recorded()):,} found below their own "
            f"level); pricing {'the same' if same_price else 'unlike the study'} "
            f"({mine.pricing}); selected sessions: recall {_recall(served, selected):.3f} "
            f"(study {_recall(alone, selected):.3f}), searches a session "
            f"{served.searches[selected].mean():.2f} (study {alone.searches[selected].mean():.2f})"
        )
    print(
        f"{store.dialect}: {len(sessions):,} sessions, {int(served.turns.sum()):,} turns; "
        f"same first-turn selection as the study in {same:,} of {len(sessions):,} sessions; "
        f"recall {served.recall:.3f} (study {alone.recall:.3f}); context_evidence rows "
        f"{cells:,} (bound: max_cells {max_cells:,} + 32 saves x cells per observe; in memory "
        f"{service.context_evidence().cells:,}); traces {runs:,}; db verify "
        f"{'ok' if report.ok else report.problems[:3]}; study {study_s:.0f} s, "
        f"service {service_s:.0f} s"
    )
    store.close()


def _recall(run: Any, sessions: Any) -> float:
    """The share of the used tools offered, over the `sessions` marked."""
    used = float(run.used[sessions].sum())
    return float(run.kept[sessions].sum()) / used if used else 1.0


if __name__ == "__main__":
    raise SystemExit(main())
