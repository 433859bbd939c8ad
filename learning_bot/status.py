"""`learning-bot status` answered without the command bus, so that the command starts at once.

A plain SQLite file is read through storage.lite and the reply built here as the bus builds it
(engine.service's status and resolve_arm, bot.handlers' replies); with --url, a running
server's /command route answers. Either reply is printed as the terminal surface prints
replies (adapters.terminal.commands and .render). This module and storage.lite import only the
standard library: the engine, the bus and SQLAlchemy take about 100 ms to import, five times
the interpreter's own start-up.

What this path does not answer as it stands, `quick_status` leaves to the general command line
(learning_bot.command_line) by returning None: other commands and options, another database, a
file that does not exist yet or is at another schema revision, an unknown learner, an arm
query that names no single arm, a server that answers with anything but a reply. Settings
beyond the database and the learner are read by learning_bot.settings, as the general path
reads them. tests/terminal/test_quick_status.py holds the two paths to the same replies, text
and exit codes."""

from __future__ import annotations

import json
import math
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from typing import Any, TextIO

    from storage.lite import LiteReader

    Row = tuple[Any, ...]
    Reply = dict[str, Any]

ENV = "LEARNING_BOT_"
READ_ENV = frozenset({"DATABASE_URL", "LEARNER"})
"""The settings this module reads itself, as learning_bot.settings reads them."""
UNREAD_ENV = frozenset(
    {
        "API_TOKEN",
        "ARTIFACTS",
        "CONSOLE_HISTORY",
        "CORS_ORIGINS",
        "DEBUG",
        "LOG_LEVEL",
        "MAX_BODY_BYTES",
        "QORTEX",
        "QORTEX_PYTHON",
        "REQUIRE_TESTS",
        "SPOOL_DIR",
        "TEST_CACHE",
        "TEST_DATABASE_URL",
        "WORKERS",
    }
)
"""LEARNING_BOT_* variables that learning_bot.settings does not read (the server's, the spool's,
the tests'). Any other one, or --config, has the settings read by learning_bot.settings."""

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
RECALL_WINDOW = 1000
DEFAULT_TOP = 5
MAX_TOP = 25
COMPACT_ITEMS = 3
Z95 = 1.96
CURATED_PRIOR = (3.0, 1.0)
LEARNED_PRIOR = (1.0, 1.0)
API_BASE = "/__openclaw__/api/learning"


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


def read_settings(
    database_url: str | None,
    learner: str | None,
    config_path: str | None,
    env: Mapping[str, str],
) -> Settings:
    """The settings as learning_bot.settings.load_settings reads them (and refuses them)."""
    names = {key[len(ENV) :] for key in env if key.startswith(ENV)}
    if config_path is None and names <= READ_ENV | UNREAD_ENV:
        return Settings(
            database_url or env.get(f"{ENV}DATABASE_URL") or None,
            learner or env.get(f"{ENV}LEARNER") or "default",
        )
    from learning_bot.settings import load_settings

    loaded = load_settings(env, database_url=database_url, learner=learner, config_path=config_path)
    config = loaded.config
    return Settings(
        loaded.database_url,
        loaded.learner,
        token_budget=config.token_budget,
        baseline_rate=config.baseline_rate,
        min_pulls=config.min_pulls,
        seed_arm_ids=config.seed_arm_ids,
        dashboard_url=loaded.dashboard_url,
        learners=loaded.learners,
    )


# -- the command line ------------------------------------------------------------------------


class Request:
    """`learning-bot [options] status [words] [--json]`, parsed."""

    __slots__ = (
        "arm",
        "as_json",
        "config",
        "database_url",
        "learner",
        "public",
        "top",
        "url",
        "words",
    )

    def __init__(self) -> None:
        self.database_url: str | None = None
        self.learner: str | None = None
        self.config: str | None = None
        self.url: str | None = None
        self.words: list[str] = []
        self.top: int | None = None
        self.arm: str | None = None
        self.public = False
        self.as_json = False

    @property
    def text(self) -> str:
        """The command as the terminal surface sends it to the bus."""
        return " ".join(["status", *self.words])


_OPTIONS = {"--database-url": "database_url", "--learner": "learner", "--config": "config"}


_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-")


def _plain_word(word: str) -> bool:
    """A word that argparse takes as a word and shlex (quoting it, then splitting it again
    for bot.commands) leaves as it is."""
    return 0 < len(word) <= 200 and not word.startswith("-") and _SAFE.issuperset(word)


def parse(argv: Sequence[str]) -> Request | None:
    """The request, when argv is a status this module serves and argparse reads alike."""
    request = Request()
    i = 0
    while i < len(argv) and argv[i] != "status":
        option, eq, value = argv[i].partition("=")
        if option not in (*_OPTIONS, "--url"):
            return None
        if not eq:
            if i + 1 >= len(argv) or argv[i + 1].startswith("-"):
                return None
            value = argv[i + 1]
            i += 1
        setattr(request, _OPTIONS.get(option, "url"), value)
        i += 1
    rest = list(argv[i + 1 :]) if i < len(argv) else None
    if rest is None:
        return None
    while rest and rest[0] == "--json":
        request.as_json = True
        rest.pop(0)
    while rest and rest[-1] == "--json":
        request.as_json = True
        rest.pop()
    if len(rest) > 8 or not all(_plain_word(word) for word in rest):
        return None
    request.words = rest
    # bot.commands' grammar for status, where it finds no mistake
    words = list(rest)
    while words:
        word = words.pop(0).lower()
        if word == "top" and words and words[0].isdigit() and 1 <= int(words[0]) <= MAX_TOP:
            request.top = int(words.pop(0))
        elif word == "public":
            request.public = True
        elif word == "arm" and words and request.arm is None:
            request.arm = words.pop(0)
        else:
            return None
    return request


def quick_status(argv: Sequence[str], env: Mapping[str, str] | None = None) -> int | None:
    """Answer `learning-bot status` and return its exit code; None when the general command
    line must answer it."""
    request = parse(argv)
    if request is None:
        return None
    env = os.environ if env is None else env
    # read (and refused) first, with --url too, as the general path does
    settings = read_settings(request.database_url, request.learner, request.config, env)
    if request.url:
        reply = fetch(request.url, request.learner, request.text, env)
        if reply is None:
            return None
        if not plain_reply(reply):
            return _general(reply, request)
    else:
        if "terminal:" in settings.learners:
            return None
        if request.arm is not None:
            reply = read_arm(settings, request.arm, public=request.public)
        else:
            reply = read_status(settings, request.top, public=request.public)
        if reply is None:
            return None
    if request.as_json:
        print(json.dumps(dict(reply.get("data") or {}), indent=2, ensure_ascii=False))
    else:
        print(render(reply, colour_wanted(sys.stdout, env)))
    return 0


def plain_reply(reply: Mapping[str, Any]) -> bool:
    """Whether a server's reply is an answer (not an error or a confirmation) in the shape
    bot.replies.Reply.from_dict reads, with the blocks a status has."""
    blocks = reply.get("blocks")
    data = reply.get("data")
    return (
        reply.get("kind") in ("info", "ok")
        and isinstance(reply.get("summary"), str)
        and reply.get("visibility") in ("private", "public")
        and (not data or isinstance(data, dict))
        and isinstance(blocks, list)
        and all(isinstance(block, dict) and _plain_block(block) for block in blocks)
    )


def _plain_block(block: Mapping[str, Any]) -> bool:
    kind = block.get("type")
    if kind == "heading":
        return isinstance(block.get("text"), str) and isinstance(block.get("badge"), str | None)
    if kind == "text":
        return isinstance(block.get("text"), str)
    if kind == "fields":
        items = block.get("items")
        return isinstance(items, list) and all(_strings(item, 2) for item in items)
    if kind == "table":
        columns, rows = block.get("columns"), block.get("rows")
        return (
            isinstance(columns, list)
            and all(
                isinstance(c, dict) and isinstance(c.get("name"), str) and "align" in c
                for c in columns
            )
            and isinstance(block.get("title"), str | None)
            and isinstance(rows, list)
            and all(_strings(row, len(columns)) for row in rows)
        )
    return False


def _strings(value: object, count: int) -> bool:
    return (
        isinstance(value, list)
        and len(value) == count
        and all(isinstance(item, str) for item in value)
    )


def _general(reply: Reply, request: Request) -> int:
    """A reply this module does not print (an error, or one of another shape): printed, or
    raised as the command's error, by the terminal surface, as the general path would."""
    from adapters.terminal.commands import run_chat_command
    from bot.replies import Reply as Parsed

    return run_chat_command(
        lambda _command: Parsed.from_dict(reply), request.text, as_json=request.as_json
    )


# -- the local read ---------------------------------------------------------------------------


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


def _recall(arms: list[Row], inclusion: list[Row]) -> float | None:
    """engine.metrics.estimated_recall of the arms' usefulness estimates."""
    usefulness = {}
    for arm in arms:
        arm_id, alpha, beta = arm[0], float(arm[3]), float(arm[4])
        prior_alpha, prior_beta = LEARNED_PRIOR if arm_id.startswith("file:") else CURATED_PRIOR
        used = max(alpha - prior_alpha, 0.0)
        unused = max(beta - prior_beta, 0.0)
        usefulness[arm_id] = (used + 0.5) / (used + unused + 1.0)
    hits = 0.0
    missed = 0.0
    runs = 0
    for row in inclusion:
        included, offered, used_count = (int(row[1] or 0), int(row[2] or 0), int(row[3] or 0))
        hits += used_count
        runs = max(runs, offered)
        left_out = offered - included
        if left_out > 0:
            missed += usefulness.get(row[0], 0.0) * left_out
    if runs == 0 or hits + missed <= 0.0:
        return None
    return hits / (hits + missed)


def _avg(total: int, n: int) -> float | None:
    return total / n if n else None


def _token_savings(baseline_avg: float | None, selected_avg: float | None) -> float | None:
    """engine.metrics.token_savings_percent."""
    if baseline_avg is None or selected_avg is None:
        return None
    if not (math.isfinite(baseline_avg) and math.isfinite(selected_avg)) or baseline_avg <= 0:
        return None
    return (baseline_avg - selected_avg) / baseline_avg * 100.0


def _summary(stats: list[int | None], arms: list[Row], recall: float | None) -> dict[str, Any]:
    """engine.views.summarise, as bot.shapes.summary_json writes it."""
    trace_count, total_tokens, min_ts, max_ts = stats[0] or 0, stats[1] or 0, stats[2], stats[3]
    baseline_runs, baseline_tokens, baseline_duration = stats[4] or 0, stats[5] or 0, stats[6] or 0
    selected_runs, selected_tokens, selected_duration = stats[7] or 0, stats[8] or 0, stats[9] or 0
    offered_tokens, kept_tokens = stats[11] or 0, stats[12] or 0
    pulls = sum(int(a[5]) for a in arms)
    reward = sum(max(0.0, int(a[5]) - (float(a[4]) - 1.0)) for a in arms)
    b_avg = _avg(baseline_tokens, baseline_runs)
    s_avg = _avg(selected_tokens, selected_runs)
    savings = _token_savings(b_avg, s_avg)
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


# -- a running server -------------------------------------------------------------------------


def api_base(url: str) -> str:
    """adapters.terminal.commands.api_base."""
    base = url.rstrip("/")
    return base if API_BASE in base else base + API_BASE


def fetch(url: str, learner: str | None, text: str, env: Mapping[str, str]) -> Reply | None:
    """The server's reply to the command, sent as adapters.terminal.commands.remote_sender
    sends it; None when it is left to remote_sender (https, a proxy, an answer that is not a
    reply, or an error status, which remote_sender words: status only reads, so asking again
    changes nothing)."""
    from urllib.parse import urlencode, urlsplit

    base = api_base(url)
    endpoint = base + "/command"
    if learner:
        endpoint += "?" + urlencode({"learner": learner})
    parts = urlsplit(endpoint)
    try:
        port = parts.port or 80
    except ValueError:
        return None
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    token = env.get(f"{ENV}API_TOKEN", "").strip()
    if (
        parts.scheme != "http"
        or not parts.hostname
        or "@" in parts.netloc
        or any(key.lower().endswith("_proxy") for key in env)
        or " " in target
        or not all(_header_safe(v) for v in (parts.netloc, target, token))
    ):
        return None
    import getpass

    try:
        user = getpass.getuser()
    except Exception:
        user = "local"
    body = json.dumps({"actor": user, "conversation": "", "wording": "terminal", "text": text})
    head = [
        f"POST {target} HTTP/1.1",
        f"Host: {parts.netloc}",
        "Accept-Encoding: identity",
        "Content-Type: application/json",
        f"Content-Length: {len(body.encode())}",
        "Connection: close",
    ]
    if token:
        head.append(f"Authorization: Bearer {token}")
    request = ("\r\n".join(head) + "\r\n\r\n").encode() + body.encode()
    try:
        answer = _exchange(parts.hostname, port, request)
    except OSError as exc:
        from adapters.terminal.commands import CliError

        raise CliError(f"cannot reach {base}: {exc}") from None
    if answer is None:
        return None
    try:
        reply = json.loads(answer)
    except ValueError:
        return None
    return reply if isinstance(reply, dict) else None


def _header_safe(value: str) -> bool:
    """Nothing that http.client would refuse or encode in a request line or header."""
    return value.isascii() and value.isprintable()


def _connect(host: str, port: int) -> socket.socket:
    """socket.create_connection((host, port), timeout=30), but with an ASCII host name passed
    to getaddrinfo as bytes: a str is first encoded with the idna codec (the same bytes for
    such a name), which imports the codec and its Unicode tables."""
    import socket

    name: bytes | str = host.encode() if host.isascii() else host
    error: OSError | None = None
    for family, kind, proto, _, address in socket.getaddrinfo(name, port, 0, socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(30)
            sock.connect(address)
            return sock
        except OSError as exc:
            sock.close()
            error = exc
    raise error if error is not None else OSError("getaddrinfo returns an empty list")


def _exchange(host: str, port: int, request: bytes) -> bytes | None:
    """POST over HTTP/1.1 and return the body of a 2xx answer; None for any other answer,
    or one this reader does not take (chunked, compressed, cut short).

    http.client would do, but it imports the email package and ssl: about 13 ms, as long as
    the rest of the command takes beyond the interpreter's start-up."""
    import socket

    with _connect(host, port) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(request)
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = sock.recv(65536)
            if not chunk:
                return None
            received += chunk
        head, _, body = received.partition(b"\r\n\r\n")
        status, *lines = head.decode("latin-1").split("\r\n")
        version, _, rest = status.partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or not code.isdigit() or code[0] != "2":
            return None
        headers = {}
        for line in lines:
            name, colon, value = line.partition(":")
            if not colon:
                return None
            headers[name.strip().lower()] = value.strip()
        length = headers.get("content-length", "")
        if "transfer-encoding" in headers or not length.isdigit():
            return None
        if headers.get("content-encoding", "identity").lower() != "identity":
            return None
        size = int(length)
        while len(body) < size:
            chunk = sock.recv(max(65536, size - len(body)))
            if not chunk:
                return None
            body += chunk
        return body[:size]


# -- the terminal ---------------------------------------------------------------------------


RESET = "\033[0m"
CODES = {
    "bold": "1",
    "dim": "2",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "cyan": "36",
    "badge_active": "1;30;42",
    "badge_passive": "1;30;43",
}
_PERCENT = r"-?\d+(?:\.\d+)?%"
_ABOUT_SAVINGS = r"(?i)\bsav(?:ed|ings?)\b"
"""Compiled on first use (re keeps them): a status without colour needs neither."""
_CONTROL_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def colour_wanted(stream: TextIO, env: Mapping[str, str]) -> bool:
    """adapters.terminal.style.colour_wanted."""
    if "NO_COLOR" in env and env["NO_COLOR"] != "":
        return False
    if env.get("TERM", "") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def plain(text: str) -> str:
    """bot.render_text.plain: control characters (engine.text) become spaces, line breaks
    stay."""
    if text.isascii() and text.isprintable():
        return text
    import unicodedata

    return "".join(
        " " if ch != "\n" and unicodedata.category(ch) in _CONTROL_CATEGORIES else ch for ch in text
    )


def _width(text: str) -> int:
    if text.isascii():
        return len(text)
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in text)


def _pad(text: str, width: int, align: str) -> str:
    gap = max(0, width - _width(text))
    return " " * gap + text if align == "right" else text + " " * gap


def render_table(table: Mapping[str, Any], max_cell: int = 48) -> list[str]:
    """bot.render_text.render_table."""

    def cell(value: object) -> str:
        shown = plain(str(value)).replace("\n", " ")
        return shown if len(shown) <= max_cell else shown[: max_cell - 3] + "..."

    columns = [(str(c["name"]), c["align"]) for c in table["columns"]]
    header = [cell(name) for name, _ in columns]
    rows = [[cell(v) for v in row] for row in table["rows"]]
    widths = [max([_width(header[i])] + [_width(r[i]) for r in rows]) for i in range(len(header))]
    lines = []
    title = table.get("title")
    if title:
        lines.append(plain(title))
    lines.append(
        "  ".join(
            _pad(h, w, align) for h, w, (_, align) in zip(header, widths, columns, strict=True)
        ).rstrip()
    )
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append(
            "  ".join(
                _pad(v, w, align) for v, w, (_, align) in zip(row, widths, columns, strict=True)
            ).rstrip()
        )
    return lines


def _items(block: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [(str(k), str(v)) for k, v in block["items"]]


def render_text(blocks: Sequence[Mapping[str, Any]]) -> str:
    """bot.render_text.render_text."""
    out: list[str] = []
    for block in blocks:
        kind = block["type"]
        if kind == "heading":
            badge = f" [{plain(block['badge'])}]" if block.get("badge") else ""
            out.append(f"{plain(block['text'])}{badge}")
        elif kind == "text":
            out.append(plain(block["text"]))
        elif kind == "fields":
            items = _items(block)
            width = max((len(k) for k, _ in items), default=0)
            out.extend(f"{plain(k):<{width}}  {plain(v)}" for k, v in items)
        elif kind == "table":
            out.append("")
            out.extend(render_table(block))
        else:
            choices = " or ".join(f"`{a['command']}`" for a in block["actions"])
            out.append(f"Reply {choices}.")
    return "\n".join(out).strip("\n")


def _paint(text: str, codes: str) -> str:
    return f"\033[{codes}m{text}{RESET}" if text else text


def _savings(text: str) -> str:
    """Colour the first percentage of a line about savings by its sign."""
    match = re.search(_PERCENT, text)
    if match is None:
        return text
    value = float(match.group()[:-1])
    shown = match.group()
    if value:
        shown = _paint(shown, CODES["green" if value > 0 else "red"])
    return text[: match.start()] + shown + text[match.end() :]


def render(reply: Mapping[str, Any], colour: bool) -> str:
    """adapters.terminal.render.render (with colour when `colour`)."""
    blocks = reply["blocks"]
    if not colour:
        return render_text(blocks)
    bold, dim = CODES["bold"], CODES["dim"]
    out: list[str] = []
    for block in blocks:
        kind = block["type"]
        if kind == "heading":
            badge = ""
            if block.get("badge"):
                word = plain(block["badge"])
                key = f"badge_{word.strip().lower()}"
                badge = " " + (_paint(f" {word} ", CODES[key]) if key in CODES else f"[{word}]")
            out.append(_paint(plain(block["text"]), bold) + badge)
        elif kind == "text":
            text = plain(block["text"])
            if re.search(_ABOUT_SAVINGS, text):
                text = _savings(text)
            out.append(_paint(text, dim) if block.get("muted") else text)
        elif kind == "fields":
            items = _items(block)
            width = max((len(k) for k, _ in items), default=0)
            for key, value in items:
                shown = plain(value)
                if re.search(_ABOUT_SAVINGS, key):
                    shown = _savings(shown)
                out.append(f"{_paint(f'{plain(key):<{width}}', dim)}  {shown}")
        elif kind == "table":
            lines = render_table(block)
            if out:
                out.append("")
            if block.get("title"):
                out.append(_paint(lines.pop(0), bold))
            out.append(_paint(lines[0], bold))
            out.append(_paint(lines[1], dim))
            out.extend(lines[2:])
        else:
            out.append(render_text([block]))
    return "\n".join(out).strip("\n")
