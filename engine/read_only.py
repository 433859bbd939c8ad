"""ReadOnlyStore: a Store over the reads of StoreReads alone (storage.lite.LiteReader's port),
for a service that only answers status, as `learning-bot status` does on a SQLite file without
importing SQLAlchemy.

The reads StoreReads serves are passed on. A read-only service learns nothing, so the state
only learning writes (context evidence, written word forms, session sets, exploration counts,
per-session usage over time) reads as none, as a process that has observed nothing holds it;
every write, and the reads of traces, time series and verify, raise Unavailable: the command
line then opens the database through SqlStore."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from learning_bot.engine.errors import Unavailable
from learning_bot.engine.ports import Store, StoreReads
from learning_bot.engine.savings import SessionUsage
from learning_bot.engine.session_sets import SessionSet

if TYPE_CHECKING:
    from learning_bot.engine.context_policy import EvidenceCell

REFUSED = "this read-only view of the database serves status only"


def _members(protocol: type) -> frozenset[str]:
    """The public names a Protocol class and its bases declare."""
    return frozenset(
        name for cls in protocol.__mro__ for name in vars(cls) if not name.startswith("_")
    )


_READS = _members(StoreReads)
_STORE = _members(Store)


def _refuse(*args: object, **kwargs: object) -> NoReturn:
    raise Unavailable(REFUSED)


class ReadOnlyStore:
    """The Store port over `reads`: reads passed on, learnt state empty, writes refused."""

    def __init__(self, reads: StoreReads) -> None:
        self.reads = reads

    def __getattr__(self, name: str) -> Any:
        """The reads of StoreReads are `reads`' own; every other method of Store (a write, or
        the reads of traces, time series and verify) raises Unavailable."""
        if name in _READS:
            return getattr(self.reads, name)
        if name in _STORE:
            return _refuse
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # -- what only learning writes: none -------------------------------------------------------

    def context_evidence(self, learner_id: int) -> tuple[list[EvidenceCell], int]:
        return [], 0

    def context_evidence_state(self, learner_id: int) -> tuple[int, int]:
        return 0, 0

    def context_evidence_since(self, learner_id: int, tick: int) -> tuple[list[EvidenceCell], int]:
        return [], tick

    def context_deferrals(self, learner_id: int, arm_id: str) -> tuple[int, int]:
        return 0, 0

    def context_words(self, learner_id: int, features: Sequence[int]) -> dict[int, str]:
        return {}

    def session_set(self, learner_id: int, key: str) -> SessionSet | None:
        return None

    def left_out_runs(self, learner_id: int, window: int) -> dict[str, int]:
        return {}

    def session_usage_since(self, learner_id: int, since: int) -> list[SessionUsage]:
        return []
