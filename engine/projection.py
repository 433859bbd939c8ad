"""What going active would have kept and saved, from recorded runs (README.md,
"Knowing before you switch").

A passive learner includes every component in every run, and each recorded run says which
components the model used (referenced): full feedback. `project` replays the active policy over
such runs, oldest first, with a fresh in-memory learner that learns as it goes as the service
does: each run's selection is made by the service's own session code (engine.session_selection's
SessionSelector over an in-memory store: sets kept, grown, reviewed and redrawn as the service
does, idle windows counted in the runs' own time) drawing with engine.selection and the
exploration bound on the replay's posteriors; each included arm of an unguarded run is
rewarded 1 when the model used it, else 0, forgetting by the settings' half-life; and the run
is reported back to the session code with the usage the replay priced (a cache miss, a tool
the model needed). It reports, per token budget:

- recall: the share of the components the model used that the replayed prompt had;
- prompt tokens and prompt cost saved against the same runs with every component, the cost
  under the provider's prompt cache: each run's prompt is its tools in the session's order,
  then the rest of the prompt (its recorded prompt tokens less the recorded tools' tokens),
  which grows turn by turn as a conversation does; a run within `cache_ttl_seconds` of its
  session's previous one reads the prefix the two share and writes the rest (the model of
  engine.prompt_cache), priced per provider and model (engine.cost) as engine.savings prices
  sessions; when no run reports cache usage, every token is priced as uncached input;

each with a 95% interval over sessions (the unit the study randomises: a ratio of sums with its
variance by linearisation). Figures are those of the replay's selected sessions: its baseline
sessions (the `baselineRate` share) offer every component, as status leaves them out of what
it reports as kept.

Which runs: only runs that name a session (the saving is measured per session), and only
full-feedback ones: runs of the passive phase and runs of the baseline group (a selected run of
an active learner says nothing of the components it left out). Runs before the last full reset
are left out; a reset of some arms starts their posteriors again when the replay reaches it.
The latest `limit` runs are read, a session cut by that bound losing its runs up to its next
idle gap (its cached prefix would not be known). Reads nothing but its arguments and writes
nothing; memory is bounded by `limit` runs; `cancel` and `deadline` are checked per session.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from learning_bot.engine.arms import Arm
from learning_bot.engine.config import LearningConfig, Phase
from learning_bot.engine.cost import PriceTable
from learning_bot.engine.errors import InvalidInput
from learning_bot.engine.projection_replay import replay_policy
from learning_bot.engine.projection_report import DEFAULT_RUNS, Projection, figures
from learning_bot.engine.projection_runs import LEFT_OUT_WHY, RunInventory, prepare
from learning_bot.engine.records import RunRecord
from learning_bot.engine.store_records import ResetRecord

MAX_RUNS = 100_000
MIN_RUNS = 100
MIN_SESSIONS = 20
"""Runs and sessions a projection needs before it gives figures."""
RECALL_GOAL = 0.95
"""The recall the suggested setting reaches."""
BUDGET_FACTORS = (0.5, 0.75, 1.5, 2.0)
"""The alternative budgets, as multiples of the current one."""


class _Stopped(Exception):
    """The projection was cancelled or passed its deadline."""


def _nice(value: float) -> int:
    """A budget near `value` that reads well: to 2 significant figures."""
    if value < 10:
        return max(1, round(value))
    step = 10 ** (int(math.log10(value)) - 1)
    return int(round(value / step) * step)


def alternative_budgets(current: int, largest_offer: int) -> list[int]:
    """The budgets a projection compares: the current one and BUDGET_FACTORS of it, less
    those above the largest offer (they keep everything, as the largest one below does)."""
    out = {current}
    for factor in BUDGET_FACTORS:
        budget = _nice(current * factor)
        if budget >= 1 and (budget <= largest_offer or factor < 1):
            out.add(budget)
    return sorted(out)


def project(
    runs: Iterable[RunRecord],
    arms: Sequence[Arm] | None,
    config: LearningConfig,
    *,
    budgets: Sequence[int] | None = None,
    prices: PriceTable | None = None,
    resets: Sequence[ResetRecord] = (),
    limit: int = DEFAULT_RUNS,
    seed: int = 0,
    cache_ttl_seconds: float = 300.0,
    cancel: threading.Event | None = None,
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Projection:
    """Replay the active policy of `config` over `runs` (oldest first) at its token budget
    and at `budgets` (None: BUDGET_FACTORS of it), each replay with the same `seed`.

    `arms`: the inventory (None: the arms the runs offered, as recorded); `prices`: the price
    table (None: the built-in one); `resets`: the learner's resets (the last full one drops the
    runs before it, the others restart their arms' posteriors when reached); `limit`: the
    latest runs read; `cache_ttl_seconds`: the provider's cache lifetime. Stops, giving a
    `reason`, when `cancel` is set or `clock()` passes `deadline` (checked per session)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_RUNS:
        raise InvalidInput(f"limit must be a whole number from 1 to {MAX_RUNS:,}")
    if not cache_ttl_seconds >= 0:
        raise InvalidInput("cache_ttl_seconds must be >= 0")
    for b in budgets or ():
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise InvalidInput(f"budgets must be whole numbers >= 1, got {b!r}")
    prices = prices if prices is not None else PriceTable()
    inventory = RunInventory(arms)
    usable, counts, cached, partial = prepare(runs, inventory, config, prices, resets, limit)
    left_out = tuple(sorted(counts.items()))
    keys = {run.key for run in usable}
    if len(usable) < MIN_RUNS or len(keys) < MIN_SESSIONS:
        why = "; ".join(f"{n:,} {LEFT_OUT_WHY[k]}" for k, n in left_out)
        return Projection(
            len(usable),
            len(keys),
            reason=(
                f"only {len(usable):,} usable runs in {len(keys):,} sessions so far; a "
                f"projection needs {MIN_RUNS} runs in {MIN_SESSIONS} sessions recorded with "
                "every component (passive phase or baseline sessions)"
                + (f" (left out: {why})" if why else "")
            ),
            left_out=left_out,
        )

    def check() -> None:
        if cancel is not None and cancel.is_set():
            raise _Stopped("cancelled")
        if deadline is not None and clock() > deadline:
            raise _Stopped("stopped at its time limit")

    active = replace(config, phase=Phase.ACTIVE, enabled=True)
    current = config.token_budget
    largest = max(run.arm_set.total_cost for run in usable)
    chosen = sorted({current, *budgets} if budgets else alternative_budgets(current, largest))
    priced = any(run.rest for run in usable)
    settings = []
    try:
        for budget in chosen:
            totals = replay_policy(
                usable,
                inventory,
                replace(active, token_budget=budget),
                partial,
                seed=seed,
                ttl_seconds=cache_ttl_seconds,
                caching=cached,
                check=check,
                prices=prices,
            )
            settings.append(figures(budget, totals.values(), budget == current, priced))
    except _Stopped as stop:
        return Projection(
            len(usable), len(keys), reason=f"the projection was {stop}", left_out=left_out
        )
    reaching = [s for s in settings if s.recall >= RECALL_GOAL]
    suggested = max(
        reaching,
        key=lambda s: (
            s.cost_savings_percent
            if s.cost_savings_percent is not None
            else s.token_savings_percent
        ),
        default=None,
    )
    return Projection(len(usable), len(keys), tuple(settings), suggested, left_out=left_out)
