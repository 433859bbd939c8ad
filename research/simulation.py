"""Synthetic agent workloads: arms with hidden usefulness, and the run reports they produce.

Used by `learning-bot simulate`, the benchmarks and the tests, so a learner can be watched
forming posteriors without a real agent. Pure numpy; seeded, so every run repeats.

Two usefulness profiles: "two-tier" (the default, the research environment: a share of arms
with p ~ U(0.4, 0.9), the rest p ~ U(0, 0.08)) and "realistic" (every arm type including
structural sections; a few arms always used, some often, many rarely, some never).
`oracle_mask` gives the best set a policy that knew every p could include under the budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from learning_bot.engine.arms import Arm, ArmType
from learning_bot.engine.config import DEFAULT_SEED_ARM_IDS, LearningConfig
from learning_bot.engine.errors import InvalidInput
from learning_bot.engine.forgetting import keep_factor
from learning_bot.engine.inventory import ArmSet, BoolArray, FloatArray, IntArray, PosteriorArrays
from learning_bot.engine.observation import ReportedArm, RunReport, ToolCall
from learning_bot.engine.selection import select_arms
from learning_bot.engine.usage import Usage

PROFILES = ("two-tier", "realistic")

_TOOL_NAMES = (
    "WebSearch", "WebFetch", "Browser", "Calendar", "Email", "Slack", "Jira", "GitHub",
    "Sql", "Python", "Notebook", "ImageGen", "Translate", "Weather", "Maps", "Pdf",
    "Spreadsheet", "Docker", "Kubectl", "Terraform",
)  # fmt: skip
_SKILLS = (
    "coding", "review", "writing", "research", "debugging", "testing", "planning",
    "security", "design", "data", "devops", "support",
)  # fmt: skip
_FILES = (
    "README.md", "CONTRIBUTING.md", "docs/architecture.md", "src/main.py", "src/config.py",
    "tests/test_api.py", "pyproject.toml", "Makefile", "docs/api.md", "CHANGELOG.md",
)  # fmt: skip
_SECTIONS = (
    "identity", "safety", "style", "workspace", "tooling", "memory-policy", "output-format",
)  # fmt: skip
_WORDS = (
    "deploy", "staging", "token", "customer", "invoice", "migration", "schema", "vault",
    "latency", "budget", "release", "rollback", "retention", "backup", "region", "quota",
)  # fmt: skip


def token_costs(count: int, rng: np.random.Generator) -> npt.NDArray[np.int64]:
    """Lognormal token costs: median 400, sigma 0.9, clipped to 40-6,000."""
    raw = rng.lognormal(mean=np.log(400.0), sigma=0.9, size=count)
    return np.clip(np.rint(raw), 40, 6000).astype(np.int64)


_TWO_TIER_KINDS = (ArmType.TOOL, ArmType.TOOL, ArmType.SKILL, ArmType.FILE, ArmType.MEMORY)
# One arm in twenty is a structural prompt section; tools and files make up most of the rest.
_REALISTIC_KINDS = (
    ArmType.TOOL, ArmType.TOOL, ArmType.FILE, ArmType.SKILL, ArmType.MEMORY,
    ArmType.TOOL, ArmType.TOOL, ArmType.FILE, ArmType.SKILL, ArmType.MEMORY,
    ArmType.TOOL, ArmType.TOOL, ArmType.FILE, ArmType.SKILL, ArmType.MEMORY,
    ArmType.TOOL, ArmType.FILE, ArmType.TOOL, ArmType.MEMORY, ArmType.SECTION,
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Tier:
    """A share of the inventory whose usage probabilities are drawn from U(low, high)."""

    name: str
    share: float
    low: float
    high: float


REALISTIC_TIERS = (
    Tier("always", 0.05, 0.85, 1.0),
    Tier("often", 0.15, 0.2, 0.85),
    Tier("rare", 0.50, 0.002, 0.04),
    Tier("never", 0.30, 0.0, 0.0),
)
"""The "realistic" profile. Seed arms are always or often used; sections are always used
(reference detection counts an included section as referenced)."""


def _inventory(
    count: int, rng: np.random.Generator, kinds: tuple[ArmType, ...] = _TWO_TIER_KINDS
) -> list[Arm]:
    costs = token_costs(count, rng)
    arms: list[Arm] = []
    seeds = list(DEFAULT_SEED_ARM_IDS[: min(2, count)])
    for arm_id in seeds:
        arms.append(Arm(arm_id, int(costs[len(arms)])))
    serials = dict.fromkeys(ArmType, 0)
    i = 0
    while len(arms) < count:
        kind = kinds[i % len(kinds)]
        serial = serials[kind]
        serials[kind] += 1
        cost = int(costs[len(arms)])
        if kind is ArmType.TOOL:
            name = _TOOL_NAMES[serial % len(_TOOL_NAMES)] + (str(serial) if serial else "")
            arms.append(Arm(f"tool:ext:{name}", cost))
        elif kind is ArmType.SKILL:
            name = _SKILLS[serial % len(_SKILLS)] + (str(serial) if serial >= len(_SKILLS) else "")
            arms.append(Arm(f"skill:{name}:main", cost))
        elif kind is ArmType.FILE:
            base = _FILES[serial % len(_FILES)]
            path = base if serial < len(_FILES) else f"pkg{serial}/{serial}-{base.split('/')[-1]}"
            arms.append(Arm(f"file:workspace:{path}", cost))
        elif kind is ArmType.SECTION:
            base = _SECTIONS[serial % len(_SECTIONS)]
            name = base + (f"-{serial}" if serial >= len(_SECTIONS) else "")
            arms.append(Arm(f"section:prompt:{name}", cost))
        else:
            # Random letters between the words keep every 20-character stretch unique.
            parts = [f"Note {serial}"]
            for word in rng.choice(_WORDS, size=4):
                letters = rng.integers(0, 26, size=6)
                parts += ["".join(chr(97 + int(x)) for x in letters), str(word)]
            content = " ".join(parts)
            arms.append(Arm(f"memory:project:note-{serial}", cost, content=content))
        i += 1
    return arms


@dataclass(frozen=True)
class Workload:
    """An inventory with each arm's hidden probability of being used on a given request."""

    arms: tuple[Arm, ...]
    usefulness: FloatArray
    conversational_rate: float = 0.3
    drift_at: int | None = None
    drifted_usefulness: FloatArray | None = field(default=None, repr=False)
    tiers: tuple[str, ...] = ()
    """Each arm's usefulness tier before any drift (empty for the two-tier profile)."""

    @property
    def costs(self) -> IntArray:
        """Token cost of each arm, in inventory order."""
        return np.fromiter((a.token_cost for a in self.arms), dtype=np.int64, count=len(self.arms))

    @property
    def _outside_tool(self) -> str:
        names = {arm.name for arm in self.arms if arm.type is ArmType.TOOL}
        name = "Think"
        while name in names:
            name += "_"
        return name

    def usefulness_at(self, step: int) -> FloatArray:
        """True usage probabilities at a given trace number (after drift, the new ones)."""
        drifted = self.drifted_usefulness
        if self.drift_at is not None and drifted is not None and step >= self.drift_at:
            return drifted
        return self.usefulness

    def draw_usage(self, step: int, rng: np.random.Generator) -> tuple[bool, npt.NDArray[np.bool_]]:
        """(conversational?, which arms this request would use if they were offered)."""
        conversational = bool(rng.random() < self.conversational_rate)
        used = rng.random(len(self.arms)) < self.usefulness_at(step)
        return conversational, used

    def draw_run(self, traces: int, rng: np.random.Generator) -> tuple[BoolArray, BoolArray]:
        """A whole run's requests at once: (conversational[t], used[t, arm]).

        Usage is drawn for every arm on every trace, offered or not, so counterfactuals are
        known; a conversational turn uses no arm (its row is all False). Trace numbers from
        `drift_at` on use the drifted probabilities.
        """
        if isinstance(traces, bool) or not isinstance(traces, int) or traces < 0:
            raise InvalidInput(f"traces must be a whole number >= 0, got {traces!r}")
        conversational = rng.random(traces) < self.conversational_rate
        p = np.broadcast_to(self.usefulness, (traces, len(self.arms)))
        drifted = self.drifted_usefulness
        if self.drift_at is not None and drifted is not None and self.drift_at < traces:
            p = p.copy()
            p[max(self.drift_at, 0) :] = drifted
        used = rng.random((traces, len(self.arms))) < p
        used[conversational] = False
        return conversational, used

    def report(
        self,
        trace_id: str,
        included: Sequence[str] | set[str],
        used: npt.NDArray[np.bool_],
        conversational: bool,
        *,
        is_baseline: bool = False,
        conversation: str = "sim:channel",
        timestamp: int | None = None,
    ) -> RunReport:
        """The RunReport an agent would send: used arms that were offered are referenced in
        the assistant text or tool calls exactly the way reference detection looks for them."""
        included_set = set(included)
        texts: list[str] = []
        calls: list[ToolCall] = [ToolCall("message")]
        prompt_tokens = 0
        if not conversational:
            for arm, hit in zip(self.arms, used, strict=True):
                if arm.id not in included_set or not hit:
                    continue
                if arm.type is ArmType.TOOL:
                    calls.append(ToolCall(arm.name))
                elif arm.type is ArmType.SKILL:
                    texts.append(f"Applying the {arm.category} skill.")
                elif arm.type is ArmType.FILE:
                    texts.append(f"See {arm.name} for details.")
                elif arm.type is ArmType.MEMORY and arm.content:
                    texts.append(f"As noted: {arm.content}.")
            if len(calls) == 1:
                # A working turn makes a real tool call; pick one that is no arm of the
                # inventory, so that no arm counts as used when none was.
                calls.append(ToolCall(self._outside_tool))
        texts.append("Done." if not conversational else "Happy to help!")
        for arm in self.arms:
            if arm.id in included_set:
                prompt_tokens += arm.token_cost
        output_tokens = 50 + 20 * len(texts)
        kwargs = {} if timestamp is None else {"timestamp": timestamp}
        return RunReport(
            trace_id=trace_id,
            arms=tuple(ReportedArm(arm, arm.id in included_set) for arm in self.arms),
            session_key=conversation,
            channel=conversation,
            provider="simulated",
            model="sim-1",
            is_baseline=is_baseline,
            assistant_texts=tuple(texts),
            tool_calls=tuple(calls),
            usage=Usage(input=prompt_tokens + 1200, output=output_tokens),
            duration_ms=int(400 + prompt_tokens // 10),
            system_prompt_chars=prompt_tokens * 4,
            **kwargs,  # type: ignore[arg-type]
        )


def make_workload(
    arm_count: int = 30,
    *,
    seed: int = 0,
    useful_fraction: float = 0.2,
    conversational_rate: float = 0.3,
    drift_at: int | None = None,
    profile: str = "two-tier",
) -> Workload:
    """An inventory with lognormal token costs and hidden usage probabilities.

    profile "two-tier": `useful_fraction` of the arms get p ~ U(0.4, 0.9), the rest
    p ~ U(0, 0.08); with `drift_at`, usefulness is redrawn at that trace number.
    profile "realistic": tools, skills, files, memories and sections, usefulness by
    `REALISTIC_TIERS` (`useful_fraction` is not used); with `drift_at`, the usage probabilities
    of every arm but the seeds and sections are shuffled among them at that trace number, so
    some rarely used arms become the busy ones and the other way round.
    """
    if isinstance(arm_count, bool) or not isinstance(arm_count, int) or arm_count < 1:
        raise InvalidInput(f"arm_count must be a whole number >= 1, got {arm_count!r}")
    if not 0.0 <= useful_fraction <= 1.0:
        raise InvalidInput(f"useful_fraction must be in [0, 1], got {useful_fraction!r}")
    if not 0.0 <= conversational_rate <= 1.0:
        raise InvalidInput(f"conversational_rate must be in [0, 1], got {conversational_rate!r}")
    if drift_at is not None and (
        isinstance(drift_at, bool) or not isinstance(drift_at, int) or drift_at < 0
    ):
        raise InvalidInput(f"drift_at must be a whole number >= 0 or None, got {drift_at!r}")
    if profile not in PROFILES:
        raise InvalidInput(f"profile must be one of {', '.join(PROFILES)}, got {profile!r}")
    rng = np.random.default_rng(seed)
    if profile == "realistic":
        return _realistic(arm_count, rng, conversational_rate, drift_at)
    arms = _inventory(arm_count, rng)
    usefulness = _usefulness(arm_count, useful_fraction, rng)
    drifted = _usefulness(arm_count, useful_fraction, rng) if drift_at is not None else None
    return Workload(tuple(arms), usefulness, conversational_rate, drift_at, drifted)


def make_tool_workload(
    tools: int = 40,
    tool_tokens: int = 16_000,
    *,
    seed: int = 0,
    conversational_rate: float = 0.3,
) -> Workload:
    """An inventory of tools only, their lognormal costs scaled to add up to `tool_tokens`,
    with the "realistic" profile's usefulness tiers (the two seed tools always used): the
    tool definitions an agent sends at the head of its prompt."""
    if isinstance(tools, bool) or not isinstance(tools, int) or tools < 1:
        raise InvalidInput(f"tools must be a whole number >= 1, got {tools!r}")
    if isinstance(tool_tokens, bool) or not isinstance(tool_tokens, int) or tool_tokens < tools:
        raise InvalidInput(f"tool_tokens must be a whole number >= tools, got {tool_tokens!r}")
    rng = np.random.default_rng(seed)
    drawn = _realistic(tools, rng, conversational_rate, None, (ArmType.TOOL,))
    raw = drawn.costs.astype(np.float64)
    costs = np.maximum(1, np.rint(raw * (tool_tokens / raw.sum()))).astype(np.int64)
    costs[int(np.argmax(costs))] += tool_tokens - int(costs.sum())
    arms = tuple(Arm(a.id, int(c)) for a, c in zip(drawn.arms, costs, strict=True))
    return Workload(arms, drawn.usefulness, conversational_rate, None, None, drawn.tiers)


def _usefulness(count: int, useful_fraction: float, rng: np.random.Generator) -> FloatArray:
    useful = max(1, round(count * useful_fraction)) if useful_fraction > 0 else 0
    p = rng.uniform(0.0, 0.08, size=count)
    chosen = rng.permutation(count)[:useful]
    p[chosen] = rng.uniform(0.4, 0.9, size=len(chosen))
    return p


def _realistic(
    count: int,
    rng: np.random.Generator,
    conversational_rate: float,
    drift_at: int | None,
    kinds: tuple[ArmType, ...] = _REALISTIC_KINDS,
) -> Workload:
    arms = _inventory(count, rng, kinds)
    pinned = np.array(
        [a.type is ArmType.SECTION or a.id in DEFAULT_SEED_ARM_IDS for a in arms], dtype=bool
    )
    sizes = [round(t.share * count) for t in REALISTIC_TIERS]
    sizes[0] = max(0, sizes[0] - int(pinned.sum()))
    free = rng.permutation(np.flatnonzero(~pinned))
    names = np.empty(count, dtype=object)
    p = np.zeros(count)
    start = 0
    for tier, size in zip(REALISTIC_TIERS, sizes, strict=True):
        chosen = free[start : start + size]
        names[chosen] = tier.name
        p[chosen] = rng.uniform(tier.low, tier.high, size=len(chosen))
        start += len(chosen)
    rest = free[start:]  # rounding leftovers are rarely used
    rare = REALISTIC_TIERS[2]
    names[rest] = rare.name
    p[rest] = rng.uniform(rare.low, rare.high, size=len(rest))
    always = REALISTIC_TIERS[0]
    for i in np.flatnonzero(pinned):
        names[i] = always.name
        p[i] = 1.0 if arms[i].type is ArmType.SECTION else rng.uniform(always.low, always.high)
    drifted = None
    if drift_at is not None:
        drifted = p.copy()
        movable = np.flatnonzero(~pinned)
        drifted[movable] = p[rng.permutation(movable)]
    return Workload(
        tuple(arms), p, conversational_rate, drift_at, drifted, tuple(str(n) for n in names)
    )


def oracle_mask(
    usefulness: FloatArray,
    costs: IntArray,
    budget: int,
    forced: BoolArray,
    max_cells: int = 20_000_000,
) -> tuple[BoolArray, int]:
    """The best set under the budget for a policy that knows every arm's usage probability.

    The `forced` arms (seeds) are in, as they are for every policy; the other arms solve the
    0/1 knapsack "maximise the expected number of used arms within the budget left" by dynamic
    programming over token costs, exactly while arms x budget stays within `max_cells`.
    Beyond that costs are rounded up to a grain of g tokens (the set still fits the budget and
    loses at most what the coarser grid hides). Returns (mask, g); g is 1 when exact.
    """
    p = np.asarray(usefulness, dtype=np.float64)
    c = np.asarray(costs, dtype=np.int64)
    mask = np.asarray(forced, dtype=bool).copy()
    room = int(budget) - int(c[mask].sum())
    cand = np.flatnonzero(~mask & (p > 0) & (c <= max(room, 0)))
    if room <= 0 or cand.size == 0:
        return mask, 1
    if int(c[cand].sum()) <= room:
        mask[cand] = True
        return mask, 1
    grain = max(1, -(-(cand.size * (room + 1)) // max_cells))
    weights = -(-c[cand] // grain)
    cap = room // grain
    best = np.zeros(cap + 1)
    take = np.zeros((cand.size, cap + 1), dtype=bool)
    for k in range(cand.size):
        w = int(weights[k])
        if w > cap:
            continue
        if w == 0:
            best += p[cand[k]]
            take[k] = True
            continue
        with_k = best[: cap + 1 - w] + p[cand[k]]
        better = with_k > best[w:]
        take[k, w:] = better
        best[w:] = np.where(better, with_k, best[w:])
    left = cap
    for k in range(cand.size - 1, -1, -1):
        if take[k, left]:
            mask[cand[k]] = True
            left -= int(weights[k])
    return mask, grain


@dataclass(frozen=True)
class PolicyRun:
    """What one learner did over a simulated run."""

    included: BoolArray
    """included[t, arm]: the arms of trace t's prompt."""
    baseline: BoolArray
    """baseline[t]: trace t was a baseline run."""
    means: FloatArray
    """Posterior means at traces 0, every, 2 * every, ... (row k after k * every traces)."""
    every: int
    final: PosteriorArrays | None = None
    """The posteriors after the last trace."""


def run_policy(
    arm_set: ArmSet,
    config: LearningConfig,
    conversational: BoolArray,
    used: BoolArray,
    rng: np.random.Generator,
    *,
    prior: tuple[FloatArray, FloatArray] | None = None,
    checkpoints: int = 200,
    half_life: float | None = None,
) -> PolicyRun:
    """One learner through a run drawn by `Workload.draw_run`, without storage.

    Each trace: `select_arms` on the arrays, then the reward update in place (included
    and used: alpha += 1; included and unused: beta += 1; pulls += 1; conversational turns:
    nothing). With `half_life` (observations of an arm; None or 0: never), each observed arm
    first forgets with the service's arithmetic (engine.forgetting: alpha * keep +
    prior_alpha * (1 - keep) + r, toward the prior it started from, as stored posteriors
    do).
    `prior` is where every arm starts (default: its type's prior; Beta(1, 1) arrays mimic a
    reset learner).
    """
    traces, n = used.shape
    if n != len(arm_set) or conversational.shape != (traces,):
        raise InvalidInput("conversational and used must match the run and the arm set")
    prior_alpha, prior_beta = (
        prior if prior is not None else (arm_set.prior_alpha, arm_set.prior_beta)
    )
    keep = keep_factor(half_life)
    # forgetting pulls toward where the arms started (engine.forgetting.forgetting_prior: a
    # row whose base holds no evidence forgets toward it, as a reset arm forgets toward
    # Beta(1, 1))
    target_alpha = np.asarray(prior_alpha, dtype=np.float64) * (1.0 - keep)
    target_beta = np.asarray(prior_beta, dtype=np.float64) * (1.0 - keep)
    post = PosteriorArrays(
        np.array(prior_alpha, dtype=np.float64),
        np.array(prior_beta, dtype=np.float64),
        np.zeros(n, dtype=np.int64),
    )
    included = np.empty((traces, n), dtype=bool)
    baseline = np.zeros(traces, dtype=bool)
    every = max(1, traces // max(1, checkpoints))
    means = np.empty((traces // every + 1, n))
    means[0] = post.alpha / (post.alpha + post.beta)
    for t in range(traces):
        selection = select_arms(arm_set, post, config, rng)
        mask = selection.mask
        included[t] = mask
        baseline[t] = selection.is_baseline
        if not conversational[t]:
            observe_arrays(post, mask, used[t], keep, target_alpha, target_beta)
        if (t + 1) % every == 0:
            means[(t + 1) // every] = post.alpha / (post.alpha + post.beta)
    return PolicyRun(included, baseline, means, every, post)


def observe_arrays(
    post: PosteriorArrays,
    mask: BoolArray,
    used: BoolArray,
    keep: float,
    target_alpha: FloatArray,
    target_beta: FloatArray,
) -> None:
    """The reward update of one working run, in place: included and used arms
    alpha += 1, included and unused beta += 1, pulls += 1; with keep < 1 each included arm
    first forgets toward its target (`prior * (1 - keep)`, engine.forgetting's arithmetic)."""
    hit = used & mask
    if keep != 1.0:
        seen = np.flatnonzero(mask)
        post.alpha[seen] = post.alpha[seen] * keep + target_alpha[seen] + hit[seen]
        post.beta[seen] = post.beta[seen] * keep + target_beta[seen] + (~hit[seen])
        np.add(post.pulls, mask, out=post.pulls)
    else:
        np.add(post.alpha, hit, out=post.alpha)
        np.add(post.beta, mask ^ hit, out=post.beta)
        np.add(post.pulls, mask, out=post.pulls)


def stable_from(means: FloatArray, every: int, tolerance: float = 0.1) -> int:
    """The first checkpoint trace from which no arm's posterior mean moves by more than
    `tolerance` (either way) for the rest of the run. The last checkpoint always qualifies,
    so a result near the run's length means the posteriors were still moving."""
    if means.ndim != 2 or means.shape[0] == 0:
        raise InvalidInput("means must be a non-empty checkpoints x arms array")
    future_max = np.maximum.accumulate(means[::-1], axis=0)[::-1]
    future_min = np.minimum.accumulate(means[::-1], axis=0)[::-1]
    moves = np.maximum(future_max - means, means - future_min).max(axis=1)
    return int(np.flatnonzero(moves <= tolerance)[0]) * every
