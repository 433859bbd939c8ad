"""The replies to `status` and `status arm <query>` from a SQLite file, as bot.handlers builds
them on engine.service (and bot.replies.Reply.to_dict writes them)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from storage.lite import LiteReader

    Row = tuple[Any, ...]
    Reply = dict[str, Any]

# The defaults of engine.config.LearningConfig that status shows, and the figures of
# engine.service, bot.handlers and engine.posterior that it is built with.
TOKEN_BUDGET = 8000
BASELINE_RATE = 0.10
MIN_PULLS = 5
SEED_ARM_IDS = (
    "tool:fs:Read",
    "tool:fs:Write",
    "tool:fs:Edit",
    "tool:exec:Bash",
    "tool:fs:Glob",
    "tool:fs:Grep",
)
RECALL_WINDOW = 300
DEFAULT_TOP = 5
COMPACT_ITEMS = 3
Z95 = 1.96
CURATED_PRIOR = (3.0, 1.0)
LEARNED_PRIOR = (1.0, 1.0)


class Settings:
    """What status needs of the settings."""

    __slots__ = (
        "baseline_rate",
        "dashboard_url",
        "database_url",
        "learner",
        "learners",
        "min_pulls",
        "seed_arm_ids",
        "token_budget",
    )

    def __init__(
        self,
        database_url: str | None,
        learner: str,
        *,
        token_budget: int = TOKEN_BUDGET,
        baseline_rate: float = BASELINE_RATE,
        min_pulls: int = MIN_PULLS,
        seed_arm_ids: Sequence[str] = SEED_ARM_IDS,
        dashboard_url: str | None = None,
        learners: Mapping[str, str] | None = None,
    ) -> None:
        self.database_url = database_url
        self.learner = learner
        self.token_budget = token_budget
        self.baseline_rate = baseline_rate
        self.min_pulls = min_pulls
        self.seed_arm_ids = tuple(seed_arm_ids)
        self.dashboard_url = dashboard_url
        self.learners = dict(learners or {})


def read_status(settings: Settings, top: int | None, *, public: bool = False) -> Reply | None:
    """The status reply of the settings' learner in a SQLite file, as the bus answers
    `status` on the terminal; None when the file cannot answer it read-only."""
    return _read(settings, lambda reader: _status(reader, settings, top, public))


def read_arm(settings: Settings, query: str, *, public: bool = False) -> Reply | None:
    """The reply to `status arm <query>`, as the bus answers it on the terminal; None when
    the file cannot answer it read-only, or the query names no single arm (the general path
    then says why)."""
    return _read(settings, lambda reader: _arm(reader, settings, query, public))


def _read(settings: Settings, work: Callable[[LiteReader], Reply | None]) -> Reply | None:
    import sqlite3

    from storage.lite import LiteReader, NotReadable, sqlite_path
    from storage.location import default_database_url

    path = sqlite_path(settings.database_url or default_database_url())
    if path is None:
        return None
    try:
        reader = LiteReader(path)
    except NotReadable:
        return None
    try:
        return work(reader)
    except sqlite3.Error:
        return None
    finally:
        reader.close()


def _status(reader: LiteReader, settings: Settings, top: int | None, public: bool) -> Reply | None:
    learner_id = reader.learner_id(settings.learner)
    if learner_id is None:
        return None
    stats_row = reader.run_stats_row(learner_id)
    state = reader.learner_row(learner_id)
    if stats_row is None or state is None:
        return None
    arms = reader.arm_rows(learner_id)
    stats = [None if x is None else int(x) for x in stats_row]
    selected_runs = stats[7] or 0
    recall = None
    if selected_runs:
        recall = _recall(arms, reader.inclusion_rows(learner_id, RECALL_WINDOW))
    summary = _summary(stats, arms, recall)
    return _reply(settings, str(state[2]), summary, arms, top, public)


def _arm(reader: LiteReader, settings: Settings, query: str, public: bool) -> Reply | None:
    """bot.handlers.Handlers.arm_detail on engine.service.LearningService.resolve_arm."""
    learner_id = reader.learner_id(settings.learner)
    if learner_id is None:
        return None
    arms = reader.arm_rows(learner_id)
    arm_id = resolve(query, {row[0]: row[1] for row in arms})
    if arm_id is None:
        return None
    view = next(
        ArmView(row, frozenset(settings.seed_arm_ids), settings.min_pulls)
        for row in arms
        if row[0] == arm_id
    )
    low, high = view.interval
    fields = [
        ["Label", view.label],
        ["Mean", f"{view.mean:.3f}"],
        ["95% interval", f"{low:.3f}-{high:.3f}"],
        ["Beta", f"alpha {view.alpha:.2f}, beta {view.beta:.2f}"],
        ["Pulls", str(view.pulls)],
        ["Confidence", view.confidence],
        ["Last updated", fmt_time(view.last)],
        ["Token cost", fmt_int(view.token_cost)],
        ["Seed arm", "yes (never excluded)" if view.is_seed else "no"],
        [
            "Under-explored",
            "yes (always included until min pulls)" if view.is_underexplored else "no",
        ],
    ]
    return {
        "kind": "info",
        "summary": f"{view.arm_id}: mean {view.mean:.3f} over {view.pulls} pulls",
        "visibility": "public" if public else "private",
        "blocks": [
            {"type": "heading", "text": view.arm_id, "badge": None},
            {"type": "fields", "items": fields},
        ],
        "data": {"arm": view.to_json()},
    }


def resolve(query: str, labels: Mapping[str, str]) -> str | None:
    """engine.resolve.resolve_arm_query where it finds one arm: the exact id, then an exact
    last segment or label (case-sensitive, then not), then a unique case-insensitive
    substring; None where it raises (several arms, none, or a substring of what looks like
    an arm id)."""
    if query in labels:
        return query
    exact = sorted(
        aid for aid, label in labels.items() if label == query or aid.rsplit(":", 1)[-1] == query
    )
    q = query.casefold()
    if not exact:
        exact = sorted(
            aid
            for aid, label in labels.items()
            if label.casefold() == q or aid.rsplit(":", 1)[-1].casefold() == q
        )
    if exact:
        return exact[0] if len(exact) == 1 else None
    if ":" in query:  # it may parse as an arm id, which only matches exactly
        return None
    partial = [aid for aid, label in labels.items() if q in aid.casefold() or q in label.casefold()]
    return partial[0] if len(partial) == 1 else None


def forgets_toward(row: Row) -> tuple[float, float]:
    """The prior an arm's evidence is read against, from its row (storage.queries.ARMS): what
    engine.forgetting.forgetting_prior gives the service's cache. Its base when that holds no
    evidence, Beta(1, 1) once it was reset, else its type's prior."""
    base_alpha, base_beta, base_pulls, reset_at = row[8], row[9], int(row[10]), int(row[11])
    if base_pulls == 0:
        return float(base_alpha), float(base_beta)
    if reset_at > 0:
        return 1.0, 1.0
    return LEARNED_PRIOR if row[0].startswith("file:") else CURATED_PRIOR


def _recall(arms: list[Row], inclusion: list[Row]) -> float | None:
    """LearningService.summary's estimated recall (engine.metrics, which imports no more than
    the engine's errors)."""
    from engine.metrics import estimated_recall, usefulness_estimates

    evidence = {}
    for arm in arms:
        prior_alpha, prior_beta = forgets_toward(arm)
        evidence[arm[0]] = (float(arm[3]) - prior_alpha, float(arm[4]) - prior_beta)
    counts = {row[0]: (int(row[1] or 0), int(row[2] or 0), int(row[3] or 0)) for row in inclusion}
    return estimated_recall(usefulness_estimates(evidence), counts)


def _avg(total: int, n: int) -> float | None:
    return total / n if n else None


def _summary(stats: list[int | None], arms: list[Row], recall: float | None) -> dict[str, Any]:
    """engine.views.summarise, as bot.shapes.summary_json writes it."""
    trace_count, total_tokens, min_ts, max_ts = stats[0] or 0, stats[1] or 0, stats[2], stats[3]
    baseline_runs, baseline_tokens, baseline_duration = stats[4] or 0, stats[5] or 0, stats[6] or 0
    selected_runs, selected_tokens, selected_duration = stats[7] or 0, stats[8] or 0, stats[9] or 0
    offered_tokens, kept_tokens = stats[11] or 0, stats[12] or 0
    pulls = sum(int(a[5]) for a in arms)
    reward = sum(float(a[12]) for a in arms)
    from engine.metrics import token_savings_percent

    b_avg = _avg(baseline_tokens, baseline_runs)
    s_avg = _avg(selected_tokens, selected_runs)
    savings = token_savings_percent(b_avg, s_avg)
    if savings is not None and not math.isfinite(savings):
        savings = None
    offered = _avg(offered_tokens, selected_runs)
    kept = _avg(kept_tokens, selected_runs)
    prompt_savings = 100.0 * (1.0 - kept / offered) if offered and kept is not None else None
    return {
        "traceCount": trace_count,
        "armCount": len(arms),
        "minTimestamp": min_ts,
        "maxTimestamp": max_ts,
        "totalTokens": total_tokens,
        "promptSavingsPercent": prompt_savings,
        "offeredAvgTokens": offered,
        "selectedPromptAvgTokens": kept,
        "estimatedRecall": recall,
        "accuracy": reward / pulls if pulls else None,
        "exploreRatio": _avg(baseline_runs, baseline_runs + selected_runs),
        "totalReward": reward,
        "baseline": {
            "baselineRuns": baseline_runs,
            "selectedRuns": selected_runs,
            "baselineAvgTokens": b_avg,
            "selectedAvgTokens": s_avg,
            "tokenSavingsPercent": savings,
            "baselineAvgDuration": _avg(baseline_duration, baseline_runs),
            "selectedAvgDuration": _avg(selected_duration, selected_runs),
        },
    }


class ArmView:
    """An arm's posterior as status shows it (engine.views.ArmView)."""

    __slots__ = (
        "alpha",
        "arm_id",
        "beta",
        "is_seed",
        "is_underexplored",
        "label",
        "last",
        "pulls",
        "token_cost",
    )

    def __init__(self, row: Row, seeds: frozenset[str], min_pulls: int) -> None:
        self.arm_id: str = row[0]
        self.label: str = row[1]
        self.token_cost = int(row[2])
        self.alpha = float(row[3])
        self.beta = float(row[4])
        self.pulls = int(row[5])
        self.last: int | None = None if row[6] is None else int(row[6])
        self.is_seed = self.arm_id in seeds
        self.is_underexplored = self.pulls < min_pulls

    @property
    def mean(self) -> float:
        return self.alpha / (self.alpha + self.beta)

    @property
    def interval(self) -> tuple[float, float]:
        total = self.alpha + self.beta
        variance = (self.alpha * self.beta) / (total * total * (total + 1.0))
        half = Z95 * math.sqrt(variance)
        mean = self.mean
        return max(0.0, mean - half), min(1.0, mean + half)

    @property
    def confidence(self) -> str:
        pulls = self.pulls
        if pulls <= 0:
            return "none"
        if pulls < 5:
            return "low"
        if pulls < 20:
            return "medium"
        if pulls < 50:
            return "high"
        return "very high"

    def to_json(self) -> dict[str, Any]:
        """bot.shapes.arm_json."""
        low, high = self.interval
        band = self.confidence
        return {
            "armId": self.arm_id,
            "alpha": self.alpha,
            "beta": self.beta,
            "mean": self.mean,
            "pulls": self.pulls,
            "lastUpdated": self.last,
            "isSeed": self.is_seed,
            "isUnderexplored": self.is_underexplored,
            "credibleInterval": {"lower": low, "upper": high},
            "confidence": _ORIGINAL_CONFIDENCE[band],
            "confidenceBand": band,
        }

    def row(self) -> list[str]:
        low, high = self.interval
        return [
            self.arm_id,
            f"{self.mean:.3f}",
            f"{low:.3f}-{high:.3f}",
            str(self.pulls),
            self.confidence,
            fmt_time(self.last),
        ]


_ORIGINAL_CONFIDENCE = {
    "none": "low",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "very high": "high",
}


def _order(row: Row) -> tuple[float, str]:
    alpha, beta = float(row[3]), float(row[4])
    return (-(alpha / (alpha + beta)), row[0])


def fmt_time(ms: int | None) -> str:
    if ms is None:
        return "never"
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def fmt_int(n: float) -> str:
    return f"{n:,.0f}"


def fmt_pct(part: int, whole: int) -> str:
    return f"{part / whole * 100:.1f}%" if whole else "0.0%"


_POSTERIOR_COLUMNS = [
    {"name": "Arm", "align": "left"},
    {"name": "Mean", "align": "right"},
    {"name": "95% interval", "align": "right"},
    {"name": "Pulls", "align": "right"},
    {"name": "Confidence", "align": "left"},
    {"name": "Last updated", "align": "left"},
]


def _table(views: Sequence[ArmView], title: str) -> dict[str, Any]:
    return {
        "type": "table",
        "title": title,
        "columns": [dict(c) for c in _POSTERIOR_COLUMNS],
        "rows": [v.row() for v in views],
    }


def _text(text: str, muted: bool = False) -> dict[str, Any]:
    return {"type": "text", "text": text, "muted": muted}


def _reply(
    settings: Settings,
    phase: str,
    s: dict[str, Any],
    arms: list[Row],
    top: int | None,
    public: bool,
) -> Reply:
    """bot.handlers.Handlers.status on engine.service.LearningService.status, as
    bot.replies.Reply.to_dict writes it."""
    import heapq

    seeds = frozenset(settings.seed_arm_ids)
    count = top or DEFAULT_TOP
    best = [ArmView(r, seeds, settings.min_pulls) for r in heapq.nsmallest(count, arms, _order)]
    worst: list[ArmView] = []
    left_out = 0
    if len(arms) > count:
        candidates = [r for r in arms if r[0] not in seeds]
        left_out = len(arms) - len(candidates)
        worst = [
            ArmView(r, seeds, settings.min_pulls) for r in heapq.nlargest(count, candidates, _order)
        ]
    b = s["baseline"]
    traces = s["traceCount"]
    empty = traces == 0
    blocks: list[dict[str, Any]] = [
        {
            "type": "heading",
            "text": f"Learning status — {settings.learner}",
            "badge": phase.upper(),
        },
        {
            "type": "fields",
            "items": [
                ["Phase", phase],
                ["Token budget", fmt_int(settings.token_budget)],
                ["Baseline rate", f"{settings.baseline_rate * 100:g}%"],
                ["Min pulls", str(settings.min_pulls)],
                ["Traces", fmt_int(traces)],
                ["Arms", fmt_int(s["armCount"])],
                ["Total tokens", fmt_int(s["totalTokens"])],
                [
                    "Date range",
                    f"{fmt_time(s['minTimestamp'])} – {fmt_time(s['maxTimestamp'])}"
                    if traces
                    else "–",
                ],
            ],
        },
    ]
    headline: list[str] = []
    if s["promptSavingsPercent"] is not None:
        headline.append(
            f"Saved {s['promptSavingsPercent']:.0f}% of prompt tokens compared with sending "
            f"every component (avg {fmt_int(s['selectedPromptAvgTokens'])} of "
            f"{fmt_int(s['offeredAvgTokens'])} tokens per selected run)"
        )
    if s["estimatedRecall"] is not None:
        headline.append(
            f"Kept about {s['estimatedRecall'] * 100:.0f}% of the components the model used"
        )
    blocks[1:1] = [_text(line) for line in headline]
    if empty:
        blocks.append(_text("No traces recorded yet."))
        blocks.append(
            _text(
                "Traces appear when your agent reports runs (LearningService.observe or "
                "POST observe). To see it work, run: learning-bot simulate",
                muted=True,
            )
        )
    else:
        runs = b["baselineRuns"] + b["selectedRuns"]
        blocks.append(
            {
                "type": "fields",
                "items": [
                    [
                        "Baseline runs",
                        f"{b['baselineRuns']:,} ({fmt_pct(b['baselineRuns'], runs)})",
                    ],
                    [
                        "Selected runs",
                        f"{b['selectedRuns']:,} ({fmt_pct(b['selectedRuns'], runs)})",
                    ],
                ],
            }
        )
        if b["tokenSavingsPercent"] is not None:
            blocks.append(
                _text(
                    f"Token savings: {b['tokenSavingsPercent']:.1f}% (baseline avg "
                    f"{fmt_int(b['baselineAvgTokens'])} tokens, selected avg "
                    f"{fmt_int(b['selectedAvgTokens'])} tokens)"
                )
            )
            blocks.append(
                _text(
                    "Token savings compares baseline with selected runs; both are capped "
                    "by the same token budget, so it stays near zero however well "
                    "selection learns.",
                    muted=True,
                )
            )
    data: dict[str, Any] = {"summary": s, "phase": phase}
    if best:
        blocks.append(_table(best, f"Top {len(best)} arms by mean"))
    if worst:
        blocks.append(_table(worst, f"Bottom {len(worst)} arms — candidates for exclusion"))
        if left_out:
            blocks.append(
                _text(
                    f"Seed arms are never excluded, so the {left_out} seed "
                    "arm(s) are not listed as candidates.",
                    muted=True,
                )
            )
        data["bottom"] = [v.to_json() for v in worst]
    data["top"] = [v.to_json() for v in best]
    if settings.dashboard_url:
        blocks.append(_text(f"Dashboard: {settings.dashboard_url}", muted=True))
        data["dashboardUrl"] = settings.dashboard_url
    if not empty and top is None:
        data["compact"] = _compact(phase, s, best, worst)
    summary = f"{phase} phase, {traces:,} traces, {s['armCount']:,} arms" + (
        f", saved {s['promptSavingsPercent']:.0f}% of prompt tokens"
        if s["promptSavingsPercent"] is not None
        else ""
    )
    return {
        "kind": "info",
        "summary": summary,
        "visibility": "public" if public else "private",
        "blocks": blocks,
        "data": data,
    }


def _compact(
    phase: str, s: dict[str, Any], best: list[ArmView], worst: list[ArmView]
) -> dict[str, Any]:
    """bot.handlers.compact_status, on the terminal."""

    def items(views: list[ArmView]) -> list[list[str]]:
        return [[v.label or v.arm_id, f"{v.mean:.2f}"] for v in views[:COMPACT_ITEMS]]

    headline = [["Phase", phase.upper()], ["Traces", fmt_int(s["traceCount"])]]
    if s["promptSavingsPercent"] is not None:
        headline.append(["Prompt savings", f"{s['promptSavingsPercent']:.0f}%"])
    elif s["baseline"]["tokenSavingsPercent"] is not None:
        headline.append(["Token savings", f"{s['baseline']['tokenSavingsPercent']:.1f}%"])
    if s["estimatedRecall"] is not None:
        headline.append(["Estimated recall", f"{s['estimatedRecall'] * 100:.0f}%"])
    lists: list[dict[str, Any]] = [{"title": "Best arms", "items": items(best)}]
    if worst:
        lists.append({"title": "Candidates for exclusion", "items": items(worst)})
    return {
        "headline": headline,
        "lists": lists,
        "more": "Full tables: learning-bot status top 10, or the dashboard.",
    }
