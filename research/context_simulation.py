"""Context-rich sessions priced through the prompt cache (README, "Request context, deferred
tools and the exploration bound"): the study of request-aware selection and deferred tools.

A `ContextSession` is a conversation whose turns carry the user's message and the tools the
turn needs. Policies choose the session's tools:

- `every`: every tool on every turn (the reference of cost);
- `default`: today's context-free Thompson draw (engine.selection with the learner-wide
  posteriors), decided on the session's first turn and kept (session-stable);
- `bm25`: the providers' tool-search baseline without learning: each turn, the tools ranked by
  BM25 over the turn's message alone, packed under the same budget (a new set each turn);
- `context`: the context-aware draw (engine.context_policy) on the first turn's message,
  session-stable, learning per-feature evidence from every turn;
- `context per turn`: the context-aware draw on each turn's message (a new set each turn,
  as `bm25`: not session-stable, so each change of set is a cache miss);
- `context+deferral`: the context-aware draw on the first turn, with the left-out tools
  deferred: a turn that needs a tool the prompt lacks runs the providers' tool search as
  documented (BM25 over every deferred tool's name and description, loaded ones included,
  the turn's message as the query, the top SEARCH_TOP returned), which costs an extra round
  trip (the prompt read again from the cache) and the search's call, result and the returned
  definitions, which sit in the conversation between the turn's message and its reply (a tool
  returned again by a later search is paid again); found tools stay loaded for the rest of the
  session, and the tool-search tool's definition counts in every deferred turn's tool tokens;
- `search at best`: provider tool search at its best: every tool deferred, and a turn that
  needs tools it has not loaded searches once and finds exactly those (a bound on what tool
  search alone can do; its cost is the round trips and the loaded definitions);
- `oracle`: the tools the session will use, known in advance (a bound, not a policy).

A search is priced as its round trip (the prompt read again from the cache), the search call
the model writes (SEARCH_CALL_TOKENS output tokens, at the output price) and the call, result
and definitions appended to the conversation.

A tool the turn needs counts as kept when the prompt had it, or when this turn's search found
it (deferral only). The learners know only what a runtime can report: the model calls the
tools it needs among those it was offered (kept, or found by search); a tool it needed but was
not offered is never reported as called, so a turn whose needed tools were all left out calls
nothing and teaches nothing, and the tools called so far (the next turns' context) are the
called ones. An offered tool called is reward 1, offered and not called 0, a deferred tool
loaded counts as offered. The learners run under the configuration given, baseline sessions
(every tool, all session long) and minPulls included, as the service does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from learning_bot.engine.arms import Arm
from learning_bot.engine.bm25 import BM25Index
from learning_bot.engine.config import LearningConfig
from learning_bot.engine.context import RequestContext, opening_features, words
from learning_bot.engine.context_policy import ContextEvidence, ContextSettings, context_scores
from learning_bot.engine.cost import ANTHROPIC, TokenPrices, prompt_cost
from learning_bot.engine.draws import draw_scores
from learning_bot.engine.exploration import ExplorationBound, OwedTries
from learning_bot.engine.forgetting import forget, keep_factor
from learning_bot.engine.inventory import (
    ArmSet,
    BoolArray,
    FloatArray,
    PosteriorArrays,
    align_posteriors,
)
from learning_bot.engine.observation import ReportedArm, RunReport, ToolCall
from learning_bot.engine.prompt_cache import Block, PromptCache
from learning_bot.engine.recall_target import (
    SEARCH_CALL_TOKENS,
    SEARCH_RESULT_TOKENS,
    SEARCH_TOP,
    RecallCalibration,
    SearchPricing,
    SessionTraffic,
    arm_levels,
    inclusion_levels,
    ranked,
    search_charges,
    session_search_levels,
)
from learning_bot.engine.selection import (
    Draw,
    calibration_forced,
    select_arms,
    target_means,
)
from learning_bot.engine.usage import Usage
from learning_bot.research.session_simulation import SessionShape

if TYPE_CHECKING:
    from learning_bot.engine.service import LearningService

SEARCH_TOOL_TOKENS = 300
"""The tool-search tool's own definition, in the prompt of every deferred request. The
search's other sizes (SEARCH_TOP, SEARCH_RESULT_TOKENS, SEARCH_CALL_TOKENS) are
engine.recall_target's, which prices the search in the service too."""
POLICIES = (
    "every",
    "default",
    "bm25",
    "context",
    "context per turn",
    "context+deferral",
    "search at best",
    "oracle",
)


@dataclass(frozen=True)
class ContextTurn:
    message: str
    used: tuple[int, ...]
    """The tools (inventory positions) the turn needs, distinct."""


@dataclass(frozen=True)
class ContextSession:
    key: str
    turns: tuple[ContextTurn, ...]
    channel: str = ""
    group: str = ""
    """What the figures are split by (a BFCL category, a task type)."""
    expected: FloatArray | None = None
    """Each tool's chance of being needed by a turn of this session, when the workload knows it
    (the context oracle packs the budget by it); None: the oracle takes the tools used."""


@dataclass
class StudyRun:
    """Per-session figures of one policy."""

    prompt_cost: FloatArray
    tool_tokens: FloatArray
    used: FloatArray
    kept: FloatArray
    searches: FloatArray
    turns: FloatArray
    selections: list[tuple[str, ...]] = field(default_factory=list)
    """Each session's first-turn set (arm ids, inventory order)."""
    baseline: list[bool] = field(default_factory=list)
    """Whether each session's first select was a baseline draw (every tool offered)."""
    learner: Learner | ServiceLearner | None = None
    """The learner the policy learnt with (None for the policies that do not learn)."""

    @property
    def recall(self) -> float:
        used = float(self.used.sum())
        return float(self.kept.sum()) / used if used else 1.0

    @property
    def round_trips(self) -> FloatArray:
        """Requests per session: one per turn, one more per search."""
        return self.turns + self.searches


class Learner:
    """Learner-wide posteriors and per-feature evidence, updated as LearningService does:
    a turn that calls no tool updates nothing (it still counts for forgetting the evidence),
    each observation of an arm forgets toward its type's prior by the policy's keep factor,
    and the exploration bound counts the selections."""

    def __init__(
        self,
        arm_set: ArmSet,
        config: LearningConfig,
        settings: ContextSettings,
        search: BM25Index | None = None,
        prices: TokenPrices = ANTHROPIC,
    ) -> None:
        self.arm_set = arm_set
        self.search = search
        """The provider's tool search when left-out tools are deferred: the target's
        calibration then counts a used tool the search would have found, or an earlier search of
        the session loaded (session_search_levels)."""
        self.prices = prices
        self.traffic = SessionTraffic()
        """Turns per session of the latest sessions and the running mean of the selected
        sessions' prompts (what a runtime reports): the search's pricing."""
        post = align_posteriors(arm_set, None)
        self.prior_alpha = post.alpha.copy()
        self.prior_beta = post.beta.copy()
        self.alpha = post.alpha.copy()
        self.beta = post.beta.copy()
        self.pulls = np.zeros(len(arm_set), dtype=np.int64)
        self.keep = keep_factor(config.half_life)
        self.evidence = ContextEvidence(self.keep, settings.max_cells)
        self.config = config
        self.settings = settings
        self.owed = OwedTries(ExplorationBound())
        self.was_baseline = False
        self.calibration = RecallCalibration()
        """Under a recall target: the levels of the tools baseline sessions used."""
        self._levels: tuple[FloatArray, FloatArray, BoolArray] | None = None
        self._replayed: list[tuple[FloatArray, list[int]]] = []
        """The baseline session's turns so far: the search's scores and the tools called."""

    def arrays(self) -> PosteriorArrays:
        return PosteriorArrays(self.alpha, self.beta, self.pulls)

    def observe(
        self,
        offered: Sequence[int],
        used: set[int],
        request: RequestContext | None,
        key: str,
        prompt_tokens: float = 0.0,
    ) -> None:
        """A turn of session `key` was offered `offered` and called `used`; `prompt_tokens`,
        the size of its request's prompt (what the provider bills as input, 0 when not
        known), prices the searches."""
        ids = self.arm_set.ids
        rewards: dict[str, float] = {}
        if self.search is not None:
            # a baseline turn offers every tool: what its request read beside them is the rest
            tools = float(self.arm_set.costs[list(offered)].sum()) if self.was_baseline else 0.0
            self.traffic.ran(key, prompt_tokens, not self.was_baseline, tools)
        if used:
            keep = self.keep
            for i in offered:
                r = 1.0 if i in used else 0.0
                self.alpha[i] = forget(self.alpha[i], self.prior_alpha[i], keep, r)
                self.beta[i] = forget(self.beta[i], self.prior_beta[i], keep, 1.0 - r)
                self.pulls[i] += 1
                rewards[ids[i]] = r
        features = request.features() if request is not None else np.zeros(0, dtype=np.int64)
        self.evidence.record(features.tolist(), rewards)
        if self._levels is not None:
            # a baseline session offered every tool: what it called calibrates the target
            means, rank, forced = self._levels
            if self.search is None or request is None:
                if used:
                    self.calibration.record(inclusion_levels(means, rank, forced, sorted(used)))
            else:
                # replayed on the session so far: what its searches found stays loaded
                self._replayed.append((self.search.scores(words(request.message)), sorted(used)))
                if used:
                    levels = arm_levels(means, rank, forced)
                    reached, there = session_search_levels(levels, self._replayed, SEARCH_TOP)
                    self.calibration.record(reached, search_charges(there), key)

    def select(
        self, request: RequestContext | None, gen: np.random.Generator, key: str
    ) -> list[int]:
        force = self.owed.mask(self.arm_set)
        post = self.arrays()
        draw: Draw = draw_scores
        if request is not None:
            arm_set, evidence, settings = self.arm_set, self.evidence, self.settings

            def draw(p: PosteriorArrays, c: LearningConfig, g: np.random.Generator) -> FloatArray:
                return context_scores(arm_set, p, request, evidence, settings, c, g)

        if self.search is not None:
            self.calibration.pricing = self.pricing()
        chosen = select_arms(
            self.arm_set,
            post,
            self.config,
            gen,
            draw=draw if request is not None else None,
            force=force,
            calibration=self.calibration,
        )
        self._levels = None
        self._replayed = []
        if chosen.is_baseline and self.config.recall_target is not None:
            means = target_means(post, self.config, draw, gen)
            forced = calibration_forced(self.arm_set, self.config, force)
            self._levels = (means, ranked(means, self.arm_set.costs), forced)
        if not chosen.is_baseline:  # a running mean of the prompts' tool tokens
            self.traffic.selected(float(self.arm_set.costs[chosen.mask].sum()))
        self.owed.included(self.arm_set, chosen.mask)
        self.was_baseline = chosen.is_baseline
        if chosen.is_baseline:  # a baseline session offers every arm (engine.session_sets)
            return list(range(len(self.arm_set)))
        return np.flatnonzero(chosen.mask).tolist()

    def pricing(self) -> SearchPricing:
        """What deferring costs, from the sessions seen: their mean turns, a search re-reading
        the mean prompt of their requests (before any is seen: the mean set selected and what
        baseline sessions' requests read beside their tools), appending SEARCH_TOP definitions
        of the inventory's mean cost: as the service prices it (SessionTraffic), from what the
        runs report only."""
        return self.traffic.pricing(self.prices, self.arm_set.costs)


class ServiceLearner:
    """The same learner through a real LearningService (and its store): each session's first
    select names the session, each turn is observed as a run report whose context carries the
    turn's message, channel and tools called so far, and the deferred tools it loaded, and whose
    usage is the turn's request's (what a search re-reads)."""

    def __init__(self, service: LearningService, arm_set: ArmSet) -> None:
        self.service = service
        self.arm_set = arm_set
        self._turns = 0
        self.was_baseline = False

    def select(
        self, request: RequestContext | None, gen: np.random.Generator, key: str
    ) -> list[int]:
        context: dict[str, object] = {"session_key": key}
        if request is not None:
            context.update(_context_of(request))
        chosen = self.service.select(self.arm_set, context)
        self.was_baseline = chosen.is_baseline
        position = self.arm_set.index
        return sorted(position[a] for a in chosen.selected)

    def observe(
        self,
        offered: Sequence[int],
        used: set[int],
        request: RequestContext | None,
        key: str,
        loaded: Sequence[int] = (),
        usage: Usage | None = None,
    ) -> None:
        arms = self.arm_set.arms
        have = set(offered) - set(loaded)
        context: dict[str, object] = {} if request is None else _context_of(request)
        if loaded:
            context["loaded"] = [arms[i].id for i in loaded]
        self._turns += 1
        self.service.observe(
            RunReport(
                trace_id=f"{key}-{self._turns}",
                session_key=key,
                arms=tuple(ReportedArm(a, i in have) for i, a in enumerate(arms)),
                tool_calls=tuple(ToolCall(arms[i].name) for i in sorted(used)),
                context=context,
                usage=usage if usage is not None else Usage(),
            )
        )


def _context_of(request: RequestContext) -> dict[str, object]:
    out: dict[str, object] = {}
    if request.message:
        out["message"] = request.message
    if request.channel:
        out["channel"] = request.channel
    if request.tools_called:
        out["tools_called"] = list(request.tools_called)
    return out


def _request(session: ContextSession, turn: int, previous: Sequence[str]) -> RequestContext:
    message = session.turns[turn].message
    return RequestContext(message, session.channel, "", tuple(previous))


def run_study(
    arms: Sequence[Arm],
    sessions: Sequence[ContextSession],
    policy: str,
    config: LearningConfig,
    *,
    seed: int = 0,
    shape: SessionShape | None = None,
    prices: TokenPrices = ANTHROPIC,
    settings: ContextSettings | None = None,
    use_context: bool = True,
    turn_gap: float = 30.0,
    service: LearningService | None = None,
) -> StudyRun:
    """Drive one policy through the sessions in order (it learns as it goes). With `service`,
    the learning policies select and observe through it (ServiceLearner) instead of the
    in-memory Learner: the same selections for the same seed (the service's rng)."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; known: {', '.join(POLICIES)}")
    shape = shape or SessionShape(history_tokens=1_000, message_tokens=100)
    settings = settings or ContextSettings()
    arm_set = ArmSet.of(list(arms))
    costs = arm_set.costs
    names = [a.name for a in arm_set.arms]
    texts = [" ".join(p for p in (a.name, a.label, a.description or "") if p) for a in arm_set.arms]
    search = BM25Index.of_texts(texts)
    blocks = [Block(a.id, a.token_cost) for a in arm_set.arms]
    learner: Learner | ServiceLearner = (
        Learner(
            arm_set,
            config,
            settings,
            search if policy == "context+deferral" else None,
            prices,
        )
        if service is None
        else ServiceLearner(service, arm_set)
    )
    gen = np.random.default_rng(seed)
    cache = PromptCache(ttl_seconds=300.0)
    n = len(sessions)
    out = StudyRun(np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n))
    learning = policy in ("default", "context", "context+deferral", "context per turn")
    if learning:
        out.learner = learner
    at = 0.0
    budget = config.token_budget
    for s, session in enumerate(sessions):
        called: list[str] = []
        first = _request(session, 0, ()) if use_context else None
        needed_all = sorted({i for t in session.turns for i in t.used})
        if policy == "every":
            tools = list(range(len(arm_set)))
        elif policy == "oracle" and session.expected is not None:
            ratio = session.expected / np.maximum(costs, 1)
            tools, room = [], budget
            for i in np.argsort(-ratio, kind="stable").tolist():
                if session.expected[i] > 0 and costs[i] <= room:
                    tools.append(i)
                    room -= int(costs[i])
            tools.sort()
        elif policy == "oracle":
            tools = needed_all
        elif policy == "default":
            tools = learner.select(None, gen, session.key)
        elif policy in ("context", "context+deferral", "context per turn"):
            tools = learner.select(first, gen, session.key)
        else:
            tools = []
        out.selections.append(tuple(arm_set.ids[i] for i in tools))
        out.baseline.append(learning and learner.was_baseline)
        # the tool search is offered when something is deferred (not in a baseline session)
        deferral = policy == "search at best" or (
            policy == "context+deferral" and len(tools) < len(arm_set)
        )
        searched: dict[int, list[Block]] = {}
        have = set(tools)
        for k, turn in enumerate(session.turns):
            request = _request(session, k, called) if use_context else None
            if policy == "context per turn" and k > 0:
                tools = learner.select(request, gen, f"{session.key}#{k}")
                have = set(tools)
            if policy == "bm25":
                ranked = search.top(words(turn.message), len(arm_set))
                tools, room = [], budget
                for i in ranked:
                    if costs[i] <= room:
                        tools.append(i)
                        room -= int(costs[i])
                have = set(tools)
            head = [blocks[i] for i in tools]
            if deferral:
                head.append(Block("tool-search", SEARCH_TOOL_TOKENS))
                out.tool_tokens[s] += SEARCH_TOOL_TOKENS
            prompt = shape.blocks(head, k, searched=searched)
            usage = asked = cache.request(session.key, at, prompt)
            out.prompt_cost[s] += prompt_cost(usage, prices)
            out.tool_tokens[s] += float(costs[sorted(have)].sum()) if have else 0.0
            need = set(turn.used)
            found: list[int] = []
            if deferral and need - have:
                # the search runs over every deferred tool: one loaded by an earlier search is
                # returned (and its definition appended) again when it ranks in the top
                among = np.ones(len(arm_set), dtype=bool)
                among[tools] = False
                if policy == "search at best":
                    found = sorted(need - have)
                else:
                    found = search.top(words(turn.message), SEARCH_TOP, among)
                appended = Block(
                    f"search:{k}", SEARCH_RESULT_TOKENS + (int(costs[found].sum()) if found else 0)
                )
                usage = cache.request(session.key, at + 5.0, [*prompt, appended])
                out.prompt_cost[s] += (
                    prompt_cost(usage, prices) + SEARCH_CALL_TOKENS * prices.output
                )
                out.tool_tokens[s] += float(costs[found].sum()) if found else 0.0
                out.searches[s] += 1
                searched[k] = [appended]
            offered = have | set(found)
            kept = need & offered
            out.used[s] += len(need)
            out.kept[s] += len(kept)
            if request is not None and first is not None and policy != "context per turn":
                # the session's set was decided on its opening: learn under it too
                request = replace(request, opening=opening_features(first.message))
            if learning:
                # what the runtime reports: the offered tools the model called (`kept`)
                if isinstance(learner, ServiceLearner):
                    learner.observe(sorted(offered), kept, request, session.key, found, asked)
                else:
                    tokens = float(sum(b.tokens for b in prompt))
                    learner.observe(sorted(offered), kept, request, session.key, tokens)
            have = offered  # loaded: in the conversation for the rest of the session
            called += [names[i] for i in sorted(kept)]
            at += turn_gap
        out.turns[s] = len(session.turns)
        cache.forget(session.key)
        at += 3_600.0
    return out
