"""The context-aware policy (SPEC section 4a, "Context"): each arm's usefulness for this
request, Thompson-sampled and packed under the budget like the context-free draw.

For a request with features F (engine.context) the score of an arm is a draw from

    Beta(kappa * q + s, kappa * (1 - q) + n - s)

- q, the prior mean for this request: the arm's learner-wide posterior mean p0, moved toward
  the arm's lexical relevance to the message r (BM25 over its label, description and content,
  scaled to [0, 1] by the request's best match) by `lexical_weight`: q = (1 - w) p0 + w r. The
  lexical part is a prior that learning corrects: it weighs kappa pseudo-runs, nothing more.
- s and n: the arm's rewards and observations in earlier runs that carried the same features,
  summed over the request's features. Summing counts a run once per feature
  it shares with the request, so a run that shares more of the request's words weighs more
  (averaging instead kept 5 points less of BFCL's gold calls in the study, BENCHMARKS.md).
- kappa: how many runs the prior weighs: the empirical-Bayes shrinkage of the per-feature
  evidence toward the arm's learner-wide posterior (the pooled prior's idea one level down).

A request without context, or whose features carry no evidence yet, draws from the learner-wide
posteriors as before (engine.draws).

`ContextEvidence` holds one learner's per-feature evidence: rows keyed by a feature's hash, one
cell per arm seen in runs carrying it. It is bounded (`max_cells`: the least recently updated
features go first) and forgets as the posteriors do: a row decays by the learner's keep factor
at each run that carries its feature, as a posterior does at each observation of its arm
(decaying every row at every run of the learner forgot rare features within a few hundred runs
and kept 2 points less of BFCL's gold calls).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from learning_bot.engine.bm25 import BM25Index, IndexCache
from learning_bot.engine.config import LearningConfig
from learning_bot.engine.context import RequestContext, feature_hash, message_words, terms
from learning_bot.engine.draws import draw_scores
from learning_bot.engine.errors import InvalidInput
from learning_bot.engine.inventory import ArmSet, FloatArray, PosteriorArrays

IntArray = npt.NDArray[np.int64]

MAX_EVIDENCE_CELLS = 200_000
"""Per-feature evidence cells (feature x arm) one learner keeps at most by default: about
10 MB in memory and in storage; the least recently updated features are evicted first."""


@dataclass(frozen=True, slots=True)
class ContextSettings:
    """How the context-aware draw weighs its parts."""

    kappa: float = 4.0
    """Runs' worth of weight of the request's prior mean against the per-feature evidence."""
    lexical_weight: float = 0.8
    """How far the prior mean moves from the learner-wide mean toward lexical relevance."""
    max_cells: int = MAX_EVIDENCE_CELLS

    def __post_init__(self) -> None:
        if not self.kappa > 0:
            raise InvalidInput(f"kappa must be > 0, got {self.kappa!r}")
        if not 0.0 <= self.lexical_weight <= 1.0:
            raise InvalidInput(f"lexical_weight must be in [0, 1], got {self.lexical_weight!r}")
        if self.max_cells < 1:
            raise InvalidInput(f"max_cells must be >= 1, got {self.max_cells!r}")


class FeatureRow:
    """One feature's evidence: per arm (learner-wide arm codes), rewards and observations, as
    of the feature's `tick`-th run."""

    __slots__ = ("arms", "n", "s", "tick")

    def __init__(self) -> None:
        self.arms: IntArray = np.zeros(0, dtype=np.int64)
        self.s: FloatArray = np.zeros(0)
        self.n: FloatArray = np.zeros(0)
        self.tick = 0


@dataclass(frozen=True, slots=True)
class EvidenceCell:
    """One (feature, arm) cell as storage keeps it."""

    feature: int
    arm_id: str
    rewards: float
    runs: float
    tick: int


def advance_cells(
    stored: Iterable[EvidenceCell],
    runs: Iterable[tuple[Iterable[int], Mapping[str, float]]],
    keep: float,
) -> list[EvidenceCell]:
    """The cells `runs` (each: its features, arm id -> reward) change, as `ContextEvidence.record`
    changes them, from the stored cells of those runs' features and rewarded arms, each
    feature's run count given by a cell of arm id "" (else the highest tick of its cells given).
    What storage computes inside the write that holds the learner's evidence lock, so that
    replicas add to the same cells: a run with rewards carrying feature f takes f's count T to
    T + 1, and an arm it rewards gets its cell decayed by keep ** (T + 1 - the cell's tick),
    then the reward and one run added. The result has each changed cell, and each advanced
    feature's count as a cell of arm id "" (a feature's other cells only decayed, which their
    older tick says)."""
    cells: dict[tuple[int, str], tuple[float, float, int]] = {}
    ticks: dict[int, int] = {}
    for c in stored:
        cells[(c.feature, c.arm_id)] = (c.rewards, c.runs, c.tick)
        if c.tick > ticks.get(c.feature, 0):
            ticks[c.feature] = c.tick
    changed: dict[tuple[int, str], None] = {}
    for features, rewards in runs:
        if not rewards:
            continue
        for feature in dict.fromkeys(int(f) for f in features):
            at = ticks[feature] = ticks.get(feature, 0) + 1
            for arm_id, reward in rewards.items():
                key = (feature, arm_id)
                hit = cells.get(key)
                if hit is None:
                    cells[key] = (float(reward), 1.0, at)
                else:
                    decay = keep ** (at - hit[2]) if keep < 1.0 else 1.0
                    cells[key] = (hit[0] * decay + reward, hit[1] * decay + 1.0, at)
                changed[key] = None
    out = [EvidenceCell(f, a, *cells[(f, a)]) for f, a in changed]
    out.extend(
        EvidenceCell(f, "", 0.0, 0.0, ticks[f]) for f in dict.fromkeys(f for f, _ in changed)
    )
    return out


class ContextEvidence:
    """One learner's per-feature evidence (see the module docstring)."""

    def __init__(self, keep: float = 1.0, max_cells: int = MAX_EVIDENCE_CELLS) -> None:
        if not 0.0 < keep <= 1.0:
            raise InvalidInput(f"keep must be in (0, 1], got {keep!r}")
        self.keep = keep
        self.max_cells = max_cells
        self.tick = 0
        """Observed runs so far (forgetting counts in them)."""
        self.lock = threading.Lock()
        self._rows: dict[int, FeatureRow] = {}
        self._codes: dict[str, int] = {}
        self._ids: list[str] = []
        self._cells = 0
        self._positions: dict[int, tuple[tuple[str, ...], int, IntArray]] = {}

    @property
    def cells(self) -> int:
        return self._cells

    @property
    def features(self) -> int:
        return len(self._rows)

    def _code(self, arm_id: str) -> int:
        code = self._codes.get(arm_id)
        if code is None:
            code = self._codes[arm_id] = len(self._ids)
            self._ids.append(arm_id)
        return code

    def record(self, features: Iterable[int], rewards: Mapping[str, float]) -> None:
        """One observed run: `rewards` (arm id -> reward) counts for each of its features."""
        self.tick += 1
        if not rewards:
            return
        codes = np.fromiter(map(self._code, rewards), dtype=np.int64, count=len(rewards))
        values = np.fromiter(rewards.values(), dtype=np.float64, count=len(rewards))
        order = np.argsort(codes)
        codes, values = codes[order], values[order]
        for feature in dict.fromkeys(int(f) for f in features):
            self._add(feature, codes, values, np.ones(len(codes)))
        self._evict()

    def _add(
        self, feature: int, codes: IntArray, s: FloatArray, n: FloatArray, at: int | None = None
    ) -> None:
        """One more run carrying `feature` (its row forgets one step first), or, with `at`,
        stored cells as of the row's run count `at`."""
        row = self._rows.pop(feature, None)  # re-inserted last: dict order is recency
        if row is None:
            row = FeatureRow()
        elif at is None and self.keep < 1.0:
            row.s = row.s * self.keep
            row.n = row.n * self.keep
        row.tick = row.tick + 1 if at is None else at
        where = np.searchsorted(row.arms, codes)
        inside = where < len(row.arms)
        known = np.zeros(len(codes), dtype=bool)
        known[inside] = row.arms[where[inside]] == codes[inside]
        if known.any():
            row.s[where[known]] += s[known]
            row.n[where[known]] += n[known]
        new = ~known
        if new.any():
            arms = np.concatenate([row.arms, codes[new]])
            order = np.argsort(arms, kind="stable")
            row.arms = arms[order]
            row.s = np.concatenate([row.s, s[new]])[order]
            row.n = np.concatenate([row.n, n[new]])[order]
            self._cells += int(new.sum())
        self._rows[feature] = row

    def _evict(self) -> None:
        while self._cells > self.max_cells and self._rows:
            oldest = next(iter(self._rows))
            self._cells -= len(self._rows.pop(oldest).arms)

    def load(self, cells: Iterable[EvidenceCell], tick: int) -> None:
        """Replace the evidence with stored cells (as `cells_of` gives them; a cell with arm id
        "" gives its feature's run count only, when storage keeps it apart)."""
        self._rows.clear()
        self._cells = 0
        self.tick = tick
        self._install(cells)

    def refresh(self, cells: Iterable[EvidenceCell], tick: int) -> None:
        """Replace the rows of the features `cells` names with those stored cells (the
        features another replica changed), the others kept."""
        cells = list(cells)
        for feature in {c.feature for c in cells}:
            row = self._rows.pop(feature, None)
            if row is not None:
                self._cells -= len(row.arms)
        self.tick = tick
        self._install(cells)

    def _install(self, cells: Iterable[EvidenceCell]) -> None:
        by_feature: dict[int, list[EvidenceCell]] = {}
        for cell in cells:
            by_feature.setdefault(cell.feature, []).append(cell)
        for feature, mine in sorted(by_feature.items(), key=lambda kv: max(c.tick for c in kv[1])):
            at = max(c.tick for c in mine)
            mine = [c for c in mine if c.arm_id]
            if not mine:
                continue
            codes = np.array([self._code(c.arm_id) for c in mine], dtype=np.int64)
            decay = np.array([self.keep ** (at - c.tick) for c in mine])
            s = np.array([c.rewards for c in mine]) * decay
            n = np.array([c.runs for c in mine]) * decay
            order = np.argsort(codes)
            self._add(feature, codes[order], s[order], n[order], at)
        self._evict()

    def cells_of(self, features: Iterable[int], arm_ids: Iterable[str]) -> list[EvidenceCell]:
        """The stored form of the given arms' cells under the given features (what an
        observe changed: the rest of a row only decayed, which its stored tick accounts for)."""
        codes = sorted({c for a in arm_ids if (c := self._codes.get(a)) is not None})
        if not codes:
            return []
        wanted = np.array(codes, dtype=np.int64)
        ids = self._ids
        out = []
        for feature in dict.fromkeys(int(f) for f in features):
            row = self._rows.get(feature)
            if row is None:
                continue
            at = np.searchsorted(row.arms, wanted)
            inside = at < len(row.arms)
            at = at[inside]
            hit = at[row.arms[at] == wanted[inside]]
            for i in hit.tolist():
                out.append(
                    EvidenceCell(
                        feature, ids[int(row.arms[i])], float(row.s[i]), float(row.n[i]), row.tick
                    )
                )
        return out

    def all_features(self) -> list[int]:
        return list(self._rows)

    def _codes_for(self, arm_set: ArmSet) -> IntArray:
        """The learner code of each arm of `arm_set` (len(codes): an arm never observed)."""
        key = id(arm_set.ids)
        hit = self._positions.get(key)
        if hit is not None and hit[0] is arm_set.ids and hit[1] == len(self._ids):
            return hit[2]
        codes = self._codes
        unseen = len(self._ids)
        mine = np.fromiter(
            (codes.get(a, unseen) for a in arm_set.ids), dtype=np.int64, count=len(arm_set)
        )
        if len(self._positions) > 8:
            self._positions.clear()
        self._positions[key] = (arm_set.ids, len(self._ids), mine)
        return mine

    def sums(
        self, features: Sequence[int] | IntArray, arm_set: ArmSet
    ) -> tuple[FloatArray, FloatArray]:
        """(s, n) per arm of `arm_set`: the rewards and runs under the given features, summed
        over them, after forgetting."""
        found = self.known_sums(features, arm_set)
        return found if found is not None else (np.zeros(len(arm_set)), np.zeros(len(arm_set)))

    def known_sums(
        self, features: Sequence[int] | IntArray, arm_set: ArmSet
    ) -> tuple[FloatArray, FloatArray] | None:
        """`sums`, or None when no feature was seen with any arm (no evidence at all)."""
        rows = [r for r in (self._rows.get(int(f)) for f in features) if r is not None]
        if not rows:
            return None
        # summed over the learner's arms (one slot more for the arms it never observed), then
        # gathered in inventory order: two array operations per feature
        size = len(self._ids) + 1
        s_all = np.zeros(size)
        n_all = np.zeros(size)
        for row in rows:
            s_all[row.arms] += row.s
            n_all[row.arms] += row.n
        mine = self._codes_for(arm_set)
        return s_all[mine], n_all[mine]

    def rate_with(self, feature: int, arm_id: str) -> tuple[float, float] | None:
        """(rewards, runs) of one arm under one feature, after forgetting; None if unseen."""
        row = self._rows.get(feature)
        code = self._codes.get(arm_id)
        if row is None or code is None:
            return None
        at = int(np.searchsorted(row.arms, code))
        if at >= len(row.arms) or row.arms[at] != code:
            return None
        return float(row.s[at]), float(row.n[at])


_INDEXES = IndexCache()


def arm_text(arm_set: ArmSet, i: int) -> str:
    """What lexical relevance reads of an arm: its name, label, description and content."""
    arm = arm_set.arms[i]
    parts = [arm.name, arm.label, arm.description or "", arm.content or ""]
    return " ".join(p for p in parts if p)


VOCABULARY: dict[int, str] = {}
"""Feature hashes whose meaning can be shown: the words of the arms' own texts as written
there (what the inventory says, never a message) and the tools' names, for explanations; a
message word is named first by the form users wrote it in (engine.feature_words)."""
MAX_VOCABULARY = 100_000
PREVIOUS: dict[int, str] = {}
"""The "previous tool" features of the inventories' tools, named."""


def feature_name(feature: int, written: Mapping[int, str] | None = None) -> str:
    """What a feature is, for explanations: a message word as users wrote it (`written`: the
    most common written form seen, engine.feature_words), else as the inventory writes it, a
    previous tool by its name, else UNNAMED."""
    word = (written or {}).get(feature) or VOCABULARY.get(feature)
    if word is not None:
        return f"the message mentions {word!r}"
    return PREVIOUS.get(feature, UNNAMED)


def lexical_index(arm_set: ArmSet) -> BM25Index:
    """The BM25 index of an inventory's arms (built once per inventory)."""
    index = _INDEXES.get(arm_set.ids)
    if index is None:
        texts = [arm_text(arm_set, i) for i in range(len(arm_set))]
        index = _INDEXES.get(arm_set.ids, texts)
        assert index is not None
        if len(VOCABULARY) < MAX_VOCABULARY:
            for text in texts:
                for key, written in terms(text):
                    VOCABULARY.setdefault(feature_hash("w", key), written)
            for arm in arm_set.arms:
                PREVIOUS.setdefault(feature_hash("prev", arm.name), f"{arm.name} came before")
    return index


UNNAMED = "a hashed feature (channel, model or a message word)"
"""What a feature not among the inventory's words is called (its text is not kept)."""


@dataclass(frozen=True, slots=True)
class FeatureLift:
    """How an arm fared in runs that carried one feature, and in the others."""

    feature: str
    """What the feature is ("the message mentions 'file'"), or "a hashed feature"."""
    rate_with: float
    runs_with: float
    rate_without: float | None


def explain(
    evidence: ContextEvidence,
    arm_id: str,
    rewards: float,
    runs: float,
    top: int = 3,
    written: Callable[[Sequence[int]], Mapping[int, str]] | None = None,
) -> list[FeatureLift]:
    """The features under which the arm's rate of use differs most from its rate in the other
    runs (`rewards` and `runs`: the arm's totals), those seen in at least 3 runs, largest
    difference first (differences within 5 points alike: named features first, then more
    runs, then by name). `written` gives the written form of the message words among the
    features (engine.feature_words), which names them before the inventory's words do."""
    found: list[tuple[int, float, float, float | None]] = []
    with evidence.lock:
        for feature in evidence.all_features():
            hit = evidence.rate_with(feature, arm_id)
            if hit is None or hit[1] < 3:
                continue
            s, n = hit
            rest = runs - n
            without = (rewards - s) / rest if rest >= 1 else None
            found.append((feature, s / n, n, without))
    names = written([f for f, *_ in found]) if written is not None and found else {}
    out = [FeatureLift(feature_name(f, names), rate, n, without) for f, rate, n, without in found]
    # Differences within 5 points count as one (forgetting makes words that always came
    # together differ by a fraction of a point); among them the features that can be named
    # come first, then those seen in more runs, then by name: one order in every process.
    out.sort(
        key=lambda f: (
            -round(abs(f.rate_with - (f.rate_without or 0.0)) * 10.0),
            f.feature.startswith(UNNAMED),
            -round(f.runs_with, 6),
            f.feature,
        )
    )
    return out[:top]


def relevance(arm_set: ArmSet, message: str) -> FloatArray:
    """Each arm's BM25 relevance to the message, scaled so the best match is 1 (all 0 when
    nothing matches)."""
    scores = (
        lexical_index(arm_set).scores(message_words(message)) if message else np.zeros(len(arm_set))
    )
    best = float(scores.max()) if len(scores) else 0.0
    return scores / best if best > 0.0 else scores


def context_beta(
    arm_set: ArmSet,
    post: PosteriorArrays,
    context: RequestContext,
    evidence: ContextEvidence | None,
    settings: ContextSettings,
) -> tuple[FloatArray, FloatArray]:
    """The Beta parameters of each arm's usefulness for this request (module docstring)."""
    sums = None
    if evidence is not None:
        with evidence.lock:
            sums = evidence.known_sums(context.features(), arm_set)
    return _beta(arm_set, post, context, sums, settings)


def _beta(
    arm_set: ArmSet,
    post: PosteriorArrays,
    context: RequestContext,
    sums: tuple[FloatArray, FloatArray] | None,
    settings: ContextSettings,
) -> tuple[FloatArray, FloatArray]:
    p0 = post.alpha / (post.alpha + post.beta)
    q = p0
    if context.message and settings.lexical_weight > 0.0:
        r = relevance(arm_set, context.message)
        if r.any():
            q = (1.0 - settings.lexical_weight) * p0 + settings.lexical_weight * r
    kappa = settings.kappa
    a = kappa * q
    b = kappa * (1.0 - q)
    if sums is not None:
        s, n = sums
        a = a + s
        b = b + np.maximum(n - s, 0.0)
    return np.maximum(a, 1e-6), np.maximum(b, 1e-6)


def context_scores(
    arm_set: ArmSet,
    post: PosteriorArrays,
    context: RequestContext,
    evidence: ContextEvidence | None,
    settings: ContextSettings,
    config: LearningConfig,
    gen: np.random.Generator,
) -> FloatArray:
    """One Thompson score per arm from its usefulness for this request. A request none of
    whose features was seen with any arm yet (no evidence: a new word, a first run) is
    scored as a request without context is (engine.draws.draw_scores, under `config`): the
    same draws from the same generator, so an unknown word never draws wider than no
    message at all."""
    sums = None
    if evidence is not None:
        with evidence.lock:
            sums = evidence.known_sums(context.features(), arm_set)
    if sums is None:
        return draw_scores(post, config, gen)
    a, b = _beta(arm_set, post, context, sums, settings)
    exploration = config.exploration
    if exploration == 0.0:
        return a / (a + b)
    if exploration != 1.0:
        a, b = a / exploration, b / exploration
    return gen.beta(a, b)
