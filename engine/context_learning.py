"""Context learning: the learner's per-feature evidence (engine.context_policy), its deferral
counts and the forms its message words were written in, kept in step with storage.

Every replica adds what it observes to the stored evidence; this process holds a copy, read
whole on first use and after a reset or an undo (the stored generation moves), and otherwise
brought up to date with the features changed since, at most every `cache_ttl` seconds (the
bound posteriors have)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from learning_bot.engine.config import Phase
from learning_bot.engine.errors import Unavailable
from learning_bot.engine.feature_words import DisplayWords
from learning_bot.engine.ports import ContextStore, ContextWords, EvidenceSpooler

if TYPE_CHECKING:
    from learning_bot.engine.context_policy import ContextEvidence, ContextSettings
    from learning_bot.engine.observation import RunReport


class ContextStorage(ContextStore, ContextWords, Protocol):
    """The stored evidence, deferral counts and written forms (a part of the Store port)."""


def count_deferrals(reports: Sequence[RunReport]) -> dict[str, tuple[int, int]]:
    """Per tool, runs that deferred it (left out, in a run whose runtime reports what it
    loaded: in its context, or by marking the arms `loaded`) and runs that loaded it."""
    from learning_bot.engine.arms import ArmType
    from learning_bot.engine.context import LOADED_KEYS, loaded_arms

    counts: dict[str, tuple[int, int]] = {}
    for report in reports:
        context = report.context
        marked = any(item.loaded for item in report.arms)
        if not marked and (not context or not any(k in context for k in LOADED_KEYS)):
            continue
        loaded = set(loaded_arms(context)) if context else set()
        for item in report.arms:
            arm = item.arm
            if item.included or arm.type is not ArmType.TOOL:
                continue
            d, n = counts.get(arm.id, (0, 0))
            hit = item.loaded or arm.id in loaded or arm.name in loaded
            counts[arm.id] = (d + 1, n + hit)
    return counts


@dataclass(eq=False)
class ContextLearning:
    """One learner's context evidence: read, learnt from observed runs, explained."""

    store: ContextStorage
    writer: EvidenceSpooler
    learner: str
    _learner_id: Callable[[], int]
    _opened_id: Callable[[], int | None]
    _keep: Callable[[], float]
    _phase: Callable[[], Phase]
    _opening: Callable[[str], tuple[int, ...]]
    _clock: Callable[[], float]
    cache_ttl: float
    settings: ContextSettings | None = None
    """How the context-aware draw weighs lexical relevance and per-feature evidence
    (engine.context_policy); None: the defaults."""
    _evidence: ContextEvidence | None = field(default=None, init=False)
    _checked_at: float = field(default=float("-inf"), init=False)
    """When the stored evidence count was last compared with the one `_evidence` holds."""
    _synced: int = field(default=0, init=False)
    """The stored evidence count up to which `_evidence` holds every replica's writes."""
    _generation: int = field(default=0, init=False)
    """The stored evidence generation `_evidence` was read at (resets and undos move it)."""
    written: DisplayWords = field(default_factory=DisplayWords, init=False)
    """The forms message words were written in, for explanations (engine.feature_words)."""

    def effective_settings(self) -> ContextSettings:
        from learning_bot.engine.context_policy import ContextSettings

        return self.settings or ContextSettings()

    def _new_evidence(self) -> ContextEvidence:
        from learning_bot.engine.context_policy import ContextEvidence

        return ContextEvidence(self._keep(), self.effective_settings().max_cells)

    def stale(self) -> None:
        """Compare with the stored evidence at next use (a reset or an undo changed it)."""
        self._checked_at = float("-inf")

    def evidence(self) -> ContextEvidence:
        """The evidence, read from storage on first use; then a one-row check at most every
        cache_ttl seconds compares the stored evidence count and generation with the ones it
        reflects: another count (another replica observed) reads the features changed since,
        another generation (a reset or an undo) all of it. Storage down: what is held."""
        evidence = self._evidence
        store = self.store
        now = self._clock()
        if evidence is not None and now - self._checked_at < self.cache_ttl:
            return evidence
        try:
            if evidence is None:
                evidence = self._load()
            else:
                tick, generation = store.context_evidence_state(self._learner_id())
                if generation != self._generation:
                    evidence = self._load()
                elif tick != evidence.tick or tick != self._synced:
                    # only the features changed since: not the whole evidence on every change
                    cells, tick = store.context_evidence_since(self._learner_id(), self._synced)
                    with evidence.lock:
                        evidence.refresh(cells, tick)
                    self._synced = tick
        except Unavailable:  # storage down: keep what is held (or nothing yet)
            if evidence is None:
                evidence = self._evidence = self._new_evidence()
        self._checked_at = now
        return evidence

    def _load(self) -> ContextEvidence:
        """The learner's whole evidence, read from storage (first use, reset or undo)."""
        learner_id = self._learner_id()
        _, generation = self.store.context_evidence_state(learner_id)
        evidence = self._new_evidence()
        cells, tick = self.store.context_evidence(learner_id)
        evidence.load(cells, tick)
        self._generation = generation
        self._synced = tick
        self._evidence = evidence
        return evidence

    def explanation(self, arm_id: str, rewards: float, pulls: float) -> tuple[list[Any], int, int]:
        """What an arm's usefulness depends on (engine.context_policy.explain: the features
        its rate of use differs most under), and how often it was deferred in a run that
        reported tool search, and loaded then (since the arm's last reset)."""
        from learning_bot.engine.context_policy import explain
        from learning_bot.engine.feature_words import namer

        learner_id = self._learner_id()
        written = namer(self.written, self.store, learner_id)
        lifts = explain(self.evidence(), arm_id, rewards, pulls, 3, written)
        deferred, loaded = self.store.context_deferrals(learner_id, arm_id)
        return lifts, deferred, loaded

    def learn(self, reports: Sequence[RunReport], rewards: Sequence[Any]) -> None:
        """Per-feature evidence and deferral counts from the observed runs that carried a
        request context: added in memory, and to the stored ones in one write that adds to
        what every replica wrote (storage.context_evidence). When that write finds the stored
        count ahead of this process's, another replica wrote meanwhile: the features changed
        since are read again at the evidence's next use."""
        from learning_bot.engine.context import RequestContext, written_features
        from learning_bot.engine.feature_words import share

        evidence = self.evidence()
        openings = {
            key: self._opening(key)
            for key in {r.session_key for r in reports if r.session_key and r.context}
        }
        runs: list[tuple[list[int], Any]] = []
        with evidence.lock:
            before = evidence.tick
            for report, reward in zip(reports, rewards, strict=True):
                request = RequestContext.of(report.context)
                if request is not None and report.session_key:
                    # the session's set was decided on its opening: learn under it too
                    request = replace(request, opening=openings[report.session_key])
                features = request.features().tolist() if request is not None else []
                evidence.record(features, reward)
                runs.append((features, reward))
                if request is not None and request.message:
                    self.written.note(written_features(request.message))
            expected = evidence.tick
        deferrals = count_deferrals(reports)
        try:
            if self.writer.spooling():
                # runs wait in the spool: their evidence goes in behind them, in order
                raise Unavailable("runs wait in the spool")
            learner_id = self._learner_id()
            tick = self.store.add_context_evidence(
                learner_id, runs, evidence.keep, evidence.max_cells, deferrals
            )
        except Unavailable:
            self._spool(runs, evidence.keep, evidence.max_cells, deferrals)
            return
        if tick == expected and self._synced == before:
            self._synced = tick  # no other writer came in between
        else:
            self._checked_at = float("-inf")
        share(self.written, self.store, learner_id)  # storage answered: the written forms too

    def _spool(
        self,
        runs: Sequence[tuple[list[int], Any]],
        keep: float,
        max_cells: int,
        deferrals: Mapping[str, tuple[int, int]],
    ) -> None:
        """Evidence storage could not take (an outage) waits in the writer's spool behind the
        runs it came from, and is added when they are written; without a spool it is lost,
        and the next check reads storage's again."""
        from learning_bot.engine.store_records import PendingEvidence

        self._checked_at = float("-inf")
        pending = PendingEvidence(
            tuple(
                (tuple(int(f) for f in features), tuple(sorted(dict(rewards).items())))
                for features, rewards in runs
                if features and rewards
            ),
            keep,
            max_cells,
            tuple((arm, d, n) for arm, (d, n) in sorted(deferrals.items())),
            self._phase(),
        )
        if not pending.runs and not pending.deferrals:
            return
        with contextlib.suppress(Unavailable):  # a full spool: the runs were refused too
            self.writer.spool_context_evidence(self._opened_id(), self.learner, pending)
