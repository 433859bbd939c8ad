"""How spooled items reach storage when they are replayed, from the spool or from the
dead-letter file: under the learner's phase at replay (not the one they were observed under),
runs of one learner in batches, each outcome and each line of evidence alone in its place, and
what storage refuses (other than by being unavailable) handed to the dead-letter file while
replay goes on."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace

from learning_bot.engine.config import Phase
from learning_bot.engine.errors import Conflict, Unavailable
from learning_bot.engine.ports import LearnerChanged
from learning_bot.engine.records import RunRecord, under_phase
from learning_bot.engine.store_records import PendingArmOutcome, PendingEvidence, RecordResult
from learning_bot.storage.spool_lines import (
    Spooled,
    evidence_line,
    line_of,
    outcome_line,
    spool_line,
)

REPLAY_BATCH = 500
"""Runs of one learner written together at most."""
REPLAY_ATTEMPTS = 4
"""Writes of one replayed batch before it gives up while the learner's phase keeps changing."""

Write = Callable[[int, list[RunRecord]], RecordResult]
Resolve = Callable[[str, Spooled], int]
"""Opens (or creates) a learner by name for replay; returns its id."""
WriteOutcome = Callable[[int, PendingArmOutcome], object]
WriteEvidence = Callable[[int, PendingEvidence], object]
DeadLetter = Callable[[str, str], None]
"""Keeps a spool line storage refused, with the reason."""


def under_stored_phase(write: Write) -> Write:
    """`write` for runs replayed from the spool or the dead-letter file: a run is recorded
    under the learner's phase at replay, not the one it was observed under. Its report is gone,
    so when storage answers that the phase changed (LearnerChanged) its rewards are made again
    from what the record kept (`engine.records.under_phase`: active, its referenced arms
    rewarded as observing it would have; passive, none) and it is written again. Its guard
    stays the one decided when it was observed (the settings then, not checked at replay)."""

    def write_replayed(learner_id: int, runs: list[RunRecord]) -> RecordResult:
        for _ in range(REPLAY_ATTEMPTS):
            try:
                return write(learner_id, runs)
            except LearnerChanged as changed:
                runs = [under_phase(r, changed.phase) for r in runs]
        raise Conflict("the runs could not be replayed: the learner's phase kept changing")

    return write_replayed


def record_outcome(
    record_arm_outcome: Callable[..., object],
    learner_id: int,
    pending: PendingArmOutcome,
    *,
    once: bool,
) -> object:
    """Record a per-arm outcome through a store's `record_arm_outcome`; `once`: by its key (a
    second write of it changes nothing)."""
    keyed = {"once": pending.key} if once else {}
    return pending.record_with(record_arm_outcome, learner_id, **keyed)


def outcome_under_stored_phase(record_arm_outcome: Callable[..., object]) -> WriteOutcome:
    """Records a per-arm outcome replayed from the spool or the dead-letter file (once, by its
    key) under the learner's phase at replay, as runs are (`under_stored_phase`): when storage
    answers that the phase changed, the reward is applied to the posterior if the phase is
    active now, and only marked on its run if passive, and it is written again."""

    def write(learner_id: int, pending: PendingArmOutcome) -> object:
        for _ in range(REPLAY_ATTEMPTS):
            try:
                return record_outcome(record_arm_outcome, learner_id, pending, once=True)
            except LearnerChanged as changed:
                active = changed.phase is Phase.ACTIVE
                pending = replace(pending, phase=changed.phase, apply_reward=active)
        raise Conflict("the outcome could not be replayed: the learner's phase kept changing")

    return write


def evidence_writer(add_context_evidence: Callable[..., object]) -> WriteEvidence:
    """Adds spooled per-feature evidence through a store's `add_context_evidence`."""

    def write(learner_id: int, pending: PendingEvidence) -> object:
        return add_context_evidence(
            learner_id,
            [(features, dict(rewards)) for features, rewards in pending.runs],
            pending.keep,
            pending.max_cells,
            {arm: (d, n) for arm, d, n in pending.deferrals},
        )

    return write


def refusal_reason(exc: BaseException) -> str:
    """The first line of what storage said (the driver's message when there is one), with the
    error's type: what the dead-letter file and the log keep."""
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:500]


Row = tuple[tuple[int, str | None], Spooled]
"""A spooled item with its learner's id and name."""


def batches(rows: Iterable[Row]) -> Iterator[tuple[tuple[int, str | None], list[Spooled]]]:
    """Runs of one learner together (up to REPLAY_BATCH); each outcome and each evidence line
    alone, in its place (after the runs it came from)."""
    learner: tuple[int, str | None] | None = None
    batch: list[Spooled] = []
    for key, record in rows:
        if isinstance(record, PendingArmOutcome | PendingEvidence):
            if batch and learner is not None:
                yield learner, batch
            yield key, [record]
            learner, batch = None, []
            continue
        if learner is not None and (key != learner or len(batch) >= REPLAY_BATCH):
            yield learner, batch
            batch = []
        learner = key
        batch.append(record)
    if batch and learner is not None:
        yield learner, batch


class ReplayWriter:
    """Writes spooled items to storage, oldest first, for one replay: learners named by a
    line are opened (or created) once each by `resolve`; what storage refuses for a reason
    other than being unavailable goes to `dead_letter` and the replay goes on. Unavailable
    stops the replay (what is left stays spooled)."""

    def __init__(
        self,
        write: Write,
        resolve: Resolve | None,
        write_outcome: WriteOutcome | None,
        write_evidence: WriteEvidence | None,
        dead_letter: DeadLetter,
    ) -> None:
        """A run is written under the learner's phase at replay (`under_stored_phase`)."""
        self._write = under_stored_phase(write)
        self._resolve = resolve
        self._write_outcome = write_outcome
        self._write_evidence = write_evidence
        self._dead_letter = dead_letter
        self._ids: dict[str, int] = {}

    def write(self, rows: Iterable[Row]) -> int:
        """Write the items of one segment; returns the runs and outcomes stored."""
        done = 0
        for (learner_id, name), batch in batches(rows):
            target = learner_id
            if name is not None and self._resolve is not None:
                if name not in self._ids:
                    try:
                        self._ids[name] = self._resolve(name, batch[0])
                    except Unavailable:  # stop, keep it
                        raise
                    except Exception as exc:  # a name storage refuses
                        for item in batch:
                            line = line_of(learner_id, item, name)
                            self._dead_letter(line, refusal_reason(exc))
                        continue
                target = self._ids[name]
            elif target == 0:
                for item in batch:
                    line = line_of(0, item, name)
                    self._dead_letter(line, "no learner could be opened by name")
                continue
            first = batch[0]
            if isinstance(first, PendingArmOutcome):
                done += self._outcome(target, first, name)
                continue
            if isinstance(first, PendingEvidence):  # not a run: not counted
                self._evidence(target, first, name)
                continue
            runs = [r for r in batch if isinstance(r, RunRecord)]
            done += self._batch(target, runs, name)
        return done

    def _batch(self, learner_id: int, batch: list[RunRecord], name: str | None) -> int:
        """Write a batch; when storage refuses it (not as unavailable), write its runs one by
        one and dead-letter those refused alone. Raises Unavailable to stop the replay."""
        try:
            self._write(learner_id, batch)
            return len(batch)
        except Unavailable:
            raise
        except Exception as exc:
            if len(batch) == 1:
                self._dead_letter(spool_line(learner_id, batch[0], name), refusal_reason(exc))
                return 0
        done = 0
        for record in batch:
            done += self._batch(learner_id, [record], name)
        return done

    def _evidence(self, learner_id: int, pending: PendingEvidence, name: str | None) -> None:
        """Add spooled evidence to storage; what storage refuses goes to the dead-letter file.
        Raises Unavailable to stop the replay."""
        if self._write_evidence is None:
            self._dead_letter(
                evidence_line(learner_id, pending, name), "this writer keeps no evidence"
            )
            return
        try:
            self._write_evidence(learner_id, pending)
        except Unavailable:
            raise
        except Exception as exc:
            self._dead_letter(evidence_line(learner_id, pending, name), refusal_reason(exc))

    def _outcome(self, learner_id: int, pending: PendingArmOutcome, name: str | None) -> int:
        """Record a spooled outcome (its key makes a second replay change nothing); one
        storage refuses goes to the dead-letter file. Raises Unavailable to stop the replay."""
        if self._write_outcome is None:
            line = outcome_line(learner_id, pending, name)
            self._dead_letter(line, "this writer records no outcomes")
            return 0
        try:
            self._write_outcome(learner_id, pending)
            return 1
        except Unavailable:
            raise
        except Exception as exc:
            self._dead_letter(outcome_line(learner_id, pending, name), refusal_reason(exc))
            return 0
