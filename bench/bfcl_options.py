"""Which of the default policy's options decide its recall on the BFCL multi-turn sessions:
the real LearningService per session (sessionGrowth "off", the default), the same 800 sessions
in the same order as bench/bfcl_cost.py, once with the default policy and once with each
option changed alone.

    pip install --no-deps bfcl-eval
    .venv/bin/python bench/bfcl_options.py                       # about 5 minutes
    .venv/bin/python bench/bfcl_options.py halfLife=0 halfLife=200   # only these variants
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from bench.bfcl import load_sessions, load_tools, package_dir  # noqa: E402
from bench.bfcl_cost import (  # noqa: E402
    BFCL_SHAPE,
    BUDGET_SHARE,
    as_sessions,
    inventory,
    usage_shares,
)
from bench.sessions import VARIANTS, service_run  # noqa: E402
from learning_bot.engine import LearningConfig, Phase  # noqa: E402
from learning_bot.engine.config import DEFAULT_POLICY  # noqa: E402
from learning_bot.engine.simulation import Workload  # noqa: E402

VARIANTS_STUDIED = [
    "",
    "halfLife=0",
    "halfLife=100",
    "halfLife=200",
    "halfLife=500",
    "pooledPrior=false",
    "exploration=1.0",
    "packing=score",
]


def parse(variant: str) -> dict[str, Any]:
    """`key=value` (the config file's camelCase keys, JSON values) as LearningConfig options."""
    if not variant:
        return {}
    key, _, value = variant.partition("=")
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        parsed = value
    return {key: parsed}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variants", nargs="*", help="key=value options (default: the study's)")
    parser.add_argument("--package-dir", type=Path, help="the installed bfcl_eval folder")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    root = package_dir(args.package_dir)
    workload, position = inventory(root)
    n = len(workload.arms)
    bfcl = load_sessions(root, load_tools(root))
    order = np.random.default_rng(args.seed).permutation(len(bfcl))
    sessions = as_sessions([bfcl[i] for i in order], position, n)
    workload = Workload(workload.arms, usage_shares(sessions, n))
    budget = round(BUDGET_SHARE * int(workload.costs.sum()))
    print(f"policy {DEFAULT_POLICY}, per session (growth off), budget {budget:,} tokens")
    print("variant              recall  first 200  last 200  cost vs every tool")
    from bench.bfcl_cost import EveryArm, run_sessions

    full = run_sessions(workload, sessions, EveryArm(n), shape=BFCL_SHAPE).prompt_cost.sum()
    for variant in args.variants or VARIANTS_STUDIED:
        options = parse(variant)
        config = LearningConfig.for_policy(
            DEFAULT_POLICY,
            phase=Phase.ACTIVE,
            token_budget=budget,
            baseline_rate=0.10,
            **options,
        )
        began = time.perf_counter()
        run, _ = service_run(
            workload, sessions, config, args.seed, VARIANTS["per session, off"], BFCL_SHAPE
        )
        recall = run.kept.sum() / run.used.sum()
        early = run.kept[:200].sum() / max(1, run.used[:200].sum())
        late = run.kept[-200:].sum() / max(1, run.used[-200:].sum())
        print(
            f"{variant or '(default)':<20} {recall:.3f}   {early:.3f}      {late:.3f}     "
            f"{run.prompt_cost.sum() / full:.3f}   ({time.perf_counter() - began:.0f} s)",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
