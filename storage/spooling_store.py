"""The RunWriter that keeps runs while storage cannot take them: it writes through to the
store it wraps and, while that store is unavailable (or refuses runs with a database error),
appends them to the spool (storage.spool) and replays them in a background thread once it
answers again, logging each outage as one line and a summary a minute at most."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

from learning_bot.engine.config import Phase
from learning_bot.engine.errors import Conflict, NotFound, Unavailable
from learning_bot.engine.ports import LearnerChanged, RunWriter
from learning_bot.engine.records import RunRecord
from learning_bot.engine.store_records import (
    ArmOutcome,
    PendingArmOutcome,
    PendingEvidence,
    RecordResult,
    RunStatus,
)
from learning_bot.storage.outage_log import StateLog
from learning_bot.storage.spool import Spool, SpoolFull
from learning_bot.storage.spool_lines import Spooled
from learning_bot.storage.spool_writes import (
    evidence_writer,
    outcome_under_stored_phase,
    record_outcome,
    refusal_reason,
)

log = logging.getLogger("learning_bot.spool")


def _is_database_error(exc: BaseException) -> bool:
    from learning_bot.storage.database import is_database_error as check

    return check(exc)


SPOOLING = "spooling runs until it takes them"


def _unavailable_reason(exc: Unavailable) -> str:
    """`database or disk is full`, without the `storage is unavailable: ` the line starts
    with anyway."""
    return str(exc).removeprefix("storage is unavailable: ").removeprefix("storage is unavailable")


class SpoolingStore:
    """A RunWriter that spools runs while the writer it wraps is unavailable, or refuses them
    with a database error, and replays them in a background thread once it answers again.

    With `adopt_seconds`, the thread also looks that often for directories of dead processes
    under the spool root (a replica killed during an outage, on this machine or, on a shared
    directory, another) and replays them; 0 leaves them to the next process that spools."""

    def __init__(
        self,
        inner: RunWriter,
        spool: Spool,
        *,
        retry_seconds: float = 1.0,
        adopt_seconds: float = 0.0,
        opener: Callable[[str, Phase], int] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`opener`: opens (or creates, with this process's settings for new learners) a
        learner by name for replay; default: the writer's open_learner with no settings.
        `clock`: seconds, for the outage's log summaries (at most one a minute)."""
        self._unavailable = StateLog(log, "storage is unavailable", clock=clock)
        self._refusing = StateLog(log, "storage refuses writes", level=logging.ERROR, clock=clock)
        self._replay_failing = StateLog(
            log, "replaying the spool fails", level=logging.ERROR, clock=clock
        )
        self.inner = inner
        self.spool = spool
        self.opener = opener
        self.retry_seconds = retry_seconds
        self.adopt_seconds = adopt_seconds
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._thread_lock = threading.Lock()
        self._replaying = threading.Lock()
        """One replay at a time (the background thread's, a caller's): the runs a replay wrote
        and the end of the outage are then told by the replay that emptied the spool."""
        if spool.pending() or any(spool.root.glob("p*/*.jsonl")) or adopt_seconds > 0:
            self._kick()

    def record_runs(
        self, learner_id: int, runs: Sequence[RunRecord], settings: str | None = None
    ) -> RecordResult:
        """Write the runs, or spool them. LearnerChanged goes back to the caller, who builds
        the runs again under the learner's state; runs spooled are replayed under the phase
        current at replay (`under_stored_phase`)."""
        if not self.spool.pending():
            try:
                result: RecordResult = self.inner.record_runs(learner_id, runs, settings)
            except (SpoolFull, LearnerChanged):
                raise
            except Unavailable as exc:
                self._unavailable.occurred(_unavailable_reason(exc), SPOOLING)
            except (NotFound, Conflict) as exc:  # the learner gone (a new database), or busy
                self._refusing.occurred(str(exc), SPOOLING)
            except Exception as exc:
                if not _is_database_error(exc):
                    raise
                self._refusing.occurred(refusal_reason(exc), SPOOLING, exc_info=exc)
            else:
                self._back()
                return result
        # runs queue behind older spooled ones: order kept
        try:
            self.spool.append(learner_id, runs, name=self._name_of(learner_id))
        except SpoolFull:
            self._count("run(s) refused", len(runs))
            raise
        self._count("run(s) spooled", len(runs))
        self._kick()
        spooled: RunStatus = "spooled"
        return RecordResult(tuple(r.trace_id for r in runs), (spooled,) * len(runs))

    def record_runs_by_name(self, learner: str, runs: Sequence[RunRecord]) -> RecordResult:
        """Spool runs of a learner storage has not opened yet (down since start); replay opens
        (or creates) it by name first."""
        self.spool.append(0, runs, name=learner)
        self._kick()
        spooled: RunStatus = "spooled"
        return RecordResult(tuple(r.trace_id for r in runs), (spooled,) * len(runs))

    def spool_context_evidence(
        self, learner_id: int | None, learner: str, pending: PendingEvidence
    ) -> None:
        """Keep per-feature evidence storage could not take (an outage), behind the runs it
        came from, to add it when they are written (EvidenceSpooler)."""
        self.spool.append_evidence(learner_id or 0, pending, name=learner)
        self._kick()

    def spooling(self) -> bool:
        return self.spool.pending()

    def _write_evidence(self, learner_id: int, pending: PendingEvidence) -> object:
        add = self.inner.add_context_evidence  # type: ignore[attr-defined]
        return evidence_writer(add)(learner_id, pending)

    def record_or_spool_arm_outcome(
        self, learner_id: int | None, learner: str, pending: PendingArmOutcome
    ) -> ArmOutcome | None:
        """Record a per-arm outcome, or spool it (None) while storage is unavailable, or
        while runs wait in the spool (the run it completes may be one of them)."""
        record = getattr(self.inner, "record_arm_outcome", None)
        if record is None:
            raise Unavailable("this writer cannot record per-arm outcomes")
        if learner_id is not None and not self.spool.pending():
            try:
                return cast(ArmOutcome, record_outcome(record, learner_id, pending, once=False))
            except (SpoolFull, LearnerChanged):
                raise
            except Unavailable as exc:
                self._unavailable.occurred(_unavailable_reason(exc), SPOOLING)
        try:
            self.spool.append_outcome(learner_id or 0, pending, name=learner)
        except SpoolFull:
            self._count("arm outcome(s) refused", 1)
            raise
        self._count("arm outcome(s) spooled", 1)
        self._kick()
        return None

    def _count(self, what: str, n: int) -> None:
        self._unavailable.count(what, n)
        self._refusing.count(what, n)

    def _back(self) -> None:
        """Storage took a write: an outage in progress is over (its one line)."""
        if self._unavailable.active:
            self._unavailable.ended("storage is back")
        if self._refusing.active:
            self._refusing.ended("storage takes writes again")

    def _write_outcome(self, learner_id: int, pending: PendingArmOutcome) -> object:
        record = self.inner.record_arm_outcome  # type: ignore[attr-defined]
        return outcome_under_stored_phase(record)(learner_id, pending)

    def _name_of(self, learner_id: int) -> str | None:
        """The learner's name as the writer remembers it (no query: storage may be down)."""
        learner_name = getattr(self.inner, "learner_name", None)
        return None if learner_name is None else learner_name(learner_id)

    def _resolve(self, name: str, record: Spooled) -> int:
        if self.opener is not None:
            return self.opener(name, record.phase)
        open_learner = getattr(self.inner, "open_learner", None)
        if open_learner is None:
            raise Unavailable("this writer cannot open learners by name")
        return int(open_learner(name, record.phase).id)

    def health(self) -> dict[str, Any]:
        """What healthz and status say about the spool."""
        spool = self.spool
        return {
            "pending": spool.pending(),
            "bytes": spool.size_bytes(),
            "full": spool.full,
            "deadLetters": (dead := spool.dead_letter_count()),
            "deadLetterFile": str(spool.dead_path) if dead else None,
        }

    def replay_now(self) -> int:
        """Replay synchronously (tests and shutdown); returns the runs written. Unavailable
        when storage still is (counted as the outage's occurrence: a summary line at most
        once a minute while it lasts)."""
        with self._replaying:
            try:
                self._schema_ready()
                replayed = self.spool.replay(
                    self.inner.record_runs, self._resolve, self._write_outcome, self._write_evidence
                )
            except Unavailable as exc:
                self._unavailable.occurred(_unavailable_reason(exc), SPOOLING)
                raise
            self._replayed(replayed)
        return replayed

    def _replayed(self, replayed: int) -> None:
        """Count a replay that went through; the outage is over once nothing waits."""
        self._replay_failing.ended("replaying the spool works again")
        self._count("replayed", replayed)
        if self.spool.pending():
            return
        if self._unavailable.active or self._refusing.active:
            self._back()
        elif replayed:
            log.info("replayed %d spooled run(s)", replayed)

    def _schema_ready(self) -> None:
        """Storage answers and has its schema before anything is replayed into it (a server
        started while its database was down creates the schema on first use): Unavailable
        until then, so replay waits instead of dead-lettering runs into missing tables."""
        engine = getattr(self.inner, "engine", None)
        if engine is not None:
            from learning_bot.storage.database import schema_ready

            schema_ready(engine)

    def _kick(self) -> None:
        with self._thread_lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="spool-replay", daemon=True)
                self._thread.start()
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            pending = self.spool.pending()
            adopting = not pending and self.adopt_seconds > 0
            woken = self._wake.wait(self.adopt_seconds if adopting else self.retry_seconds)
            self._wake.clear()
            if self._stop.is_set():
                return
            if not pending and not woken:
                if self.adopt_seconds <= 0:
                    return
                if not self.spool.orphaned():
                    continue
            try:
                self.replay_now()
            except Unavailable:
                continue
            except Exception as exc:
                self._replay_failing.occurred(refusal_reason(exc), "will retry", exc_info=exc)
                continue
            if not self.spool.pending() and self.adopt_seconds <= 0:
                return

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.spool.close()
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()
