"""Session-stable selection (SPEC section 4a): one decision per conversation, kept in order.

Providers cache the prompt prefix and the tool definitions come first in it, so a tool set
that changes between the turns of one conversation makes the whole prompt, history included,
a cache miss. A select that names a session therefore decides once, on the session's first
select (the baseline coin included: a baseline session offers every arm, the control group
of the measured cost saving), and every later select of the session returns the same
arms in the same order. Arms new to the inventory are decided on their own and appended;
arms no longer offered drop out of the answer (they keep their place should they come back);
with `session_growth` "append", a tool the model needed but did not have joins at the end
for the next run. Nothing is ever reordered, so the prefix the provider cached stays a prefix.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported on first selection, not at start-up
    from learning_bot.engine.inventory import ArmSet
    from learning_bot.engine.selection import Selection

MAX_SESSION_KEY_CHARS = 256
"""A session key's length limit (the traces' `session_key` column)."""

DecideNew = Callable[["ArmSet", int], "Selection"]
"""Decides arms a session has not met yet, given them and the token budget left."""


@dataclass(frozen=True, slots=True)
class SessionSet:
    """What a session's first select decided, grown since.

    `included` is the prompt order (the first decision's order, then every arm appended);
    `left_out` the arms decided and left out. `used_at` is the last select (ms), which the
    idle window counts from; `version` increases with every stored change, so replicas
    appending at once cannot lose each other's arms (compare and set).
    """

    key: str
    included: tuple[str, ...]
    left_out: tuple[str, ...]
    is_baseline: bool
    decided_at: int
    used_at: int
    version: int = 0
    opening: tuple[int, ...] = ()
    """The hashed word features of the message the set was decided on (engine.context)."""
    turns: int = 0
    """Selects the session has answered while live (the first included), redraws or not."""
    redraws: int = 0
    """How often the session's set was drawn again while the session stayed live."""
    drawn_turn: int = 0
    """The session's turn its current set was drawn on (`turns` then, less one)."""
    missed_turn: int = 0
    """The session's turn of its latest run that missed the cache (0: none yet)."""
    reason: str = ""
    """Why the set was drawn: its latest draw's reason (engine.session_review)."""
    grew: bool = False
    """A tool joined since the session's last select (that select answers "grown")."""
    provisional: tuple[str, ...] = ()
    """Arms forced in for exploration when the set was drawn (under `min_pulls`): the set is
    drawn again as soon as they have their pulls (SPEC section 4b)."""
    added: tuple[str, ...] = ()
    """Arms that joined outside the cached prefix (a mid-conversation addition, or a tool
    loaded through tool search), in the order they joined."""
    wanted: tuple[str, ...] = ()
    """Tools the model called that the set lacked, where the provider cannot add them between
    turns: they wait for the next redraw, which keeps them."""
    provider: str = ""
    model: str = ""
    """The provider and model the session's latest select or run named."""
    broken: str = ""
    """Why the cached prefix is known to be gone (a reported run that missed the cache); the
    next select draws the set again. Empty: no break known."""
    prompt_tokens: int = 0
    """The prompt size the session's latest run reported (input, cache read and write)."""
    reviewed: int = 0
    """The learner's observation count when the set was drawn or last weighed against a new
    draw (engine.session_review): a review waits for new evidence."""

    def is_live(self, now_ms: int, idle_seconds: int) -> bool:
        """Whether the session was used within its idle window (0: sessions are never kept)."""
        return idle_seconds > 0 and now_ms - self.used_at <= idle_seconds * 1000

    def decided(self) -> frozenset[str]:
        return frozenset(self.included) | frozenset(self.left_out) | frozenset(self.added)


@dataclass(frozen=True, slots=True)
class SessionDecisions:
    """What a learner's sessions of the last day did with their sets: how many there are, how
    many were drawn again while live (and how often), and how many sessions' latest redraw had
    each reason (engine.session_review.REDRAW_REASONS), most frequent first; `grown` the
    sessions that took on tools outside their cached prefix (a non-empty `added`)."""

    sessions: int = 0
    redrawn: int = 0
    redraws: int = 0
    by_reason: tuple[tuple[str, int], ...] = ()
    grown: int = 0


def first_set(
    key: str,
    selection: Selection,
    now_ms: int,
    opening: tuple[int, ...] = (),
    *,
    provisional: tuple[str, ...] = (),
    reason: str = "",
    reviewed: int = 0,
) -> SessionSet:
    """The session decided by its first select's `selection` (on a message whose word
    features are `opening`); `provisional` the arms forced in for exploration."""
    return SessionSet(
        key=key,
        included=selection.selected,
        left_out=selection.excluded,
        is_baseline=selection.is_baseline,
        decided_at=now_ms,
        used_at=now_ms,
        opening=opening,
        turns=1,
        reason=reason,
        provisional=provisional,
        reviewed=reviewed,
    )


def full_prompt(selection: Selection, arm_set: ArmSet) -> Selection:
    """A session's first selection as the session keeps it: a baseline session is the control
    group of the measured cost saving (engine.savings), so it offers every arm, in inventory
    order, for the whole session (SPEC 4a: baseline sessions are full-prompt sessions)."""
    from learning_bot.engine.selection import Selection

    if not selection.is_baseline:
        return selection
    total = min(arm_set.total_cost, 2**63 - 1)
    budget = selection.token_budget
    return Selection(list(arm_set.ids), [], True, budget, total, total > budget)


def continue_set(
    session: SessionSet, arm_set: ArmSet, token_budget: int, decide_new: DecideNew
) -> tuple[Selection, SessionSet]:
    """The selection a later select of `session` answers for the arms offered now, and the
    session with any arms new to it appended (the same object when nothing was new).

    Kept arms come first in the session's order; arms it has never met are decided by
    `decide_new` within the budget the kept arms leave (a baseline session takes them all, as
    it takes every offered arm) and appended in the order that decision gives.
    """
    from learning_bot.engine.inventory import ArmSet
    from learning_bot.engine.selection import Selection

    offered = arm_set.index
    costs = arm_set.costs
    kept = [arm_id for arm_id in session.included if arm_id in offered]
    decided = session.decided()
    new_arms = [
        arm for arm, arm_id in zip(arm_set.arms, arm_set.ids, strict=True) if arm_id not in decided
    ]
    appended: tuple[str, ...] = ()
    newly_left: tuple[str, ...] = ()
    if new_arms:
        if session.is_baseline:
            appended = tuple(arm.id for arm in new_arms)
        else:
            used = sum(int(costs[offered[arm_id]]) for arm_id in kept)
            verdict = decide_new(ArmSet(new_arms), max(0, token_budget - used))
            appended = verdict.selected
            newly_left = verdict.excluded
        session = replace(
            session,
            included=session.included + appended,
            left_out=session.left_out + newly_left,
        )
    chosen = [*kept, *appended]
    taken = frozenset(chosen)
    added = tuple(arm_id for arm_id in session.added if arm_id in offered and arm_id not in taken)
    aside = taken | frozenset(added)
    excluded = [arm_id for arm_id in arm_set.ids if arm_id not in aside]
    used_tokens = min(sum(int(costs[offered[arm_id]]) for arm_id in chosen), 2**63 - 1)
    selection = Selection(
        chosen,
        excluded,
        session.is_baseline,
        token_budget,
        used_tokens,
        used_tokens > token_budget,
    )
    selection.added = added
    return selection, session


MAX_CACHED_SESSIONS = 10_000
"""Sessions a process keeps in memory between two selects of theirs."""


class SessionCache:
    """The session sets this process read or wrote lately, trusted for `ttl` seconds (the
    posterior cache's interval), so a live session's select reads storage at most that often;
    an LRU of at most MAX_CACHED_SESSIONS sets. Safe to share between threads."""

    def __init__(self, ttl: float, size: int = MAX_CACHED_SESSIONS) -> None:
        self._ttl = ttl
        self._size = size
        self._sets: OrderedDict[str, tuple[SessionSet, float]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str, now: float) -> SessionSet | None:
        with self._lock:
            entry = self._sets.get(key)
            if entry is None:
                return None
            if now - entry[1] >= self._ttl:
                del self._sets[key]
                return None
            self._sets.move_to_end(key)
            return entry[0]

    def put(self, session: SessionSet, now: float) -> None:
        with self._lock:
            self._sets[session.key] = (session, now)
            self._sets.move_to_end(session.key)
            while len(self._sets) > self._size:
                self._sets.popitem(last=False)

    def drop(self, key: str) -> None:
        with self._lock:
            self._sets.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._sets.clear()


def grow(session: SessionSet, needed: Iterable[str], *, at_once: bool = False) -> SessionSet | None:
    """The session with the arms it left out but the model needed: with `at_once` (the
    provider adds tools between turns without a prefix rewrite, or the tool came through tool
    search) they join `added` for the session's next run; otherwise they are `wanted`, kept by
    the next redraw (engine.session_review). None when nothing changes: one miss per arm, not
    one per turn."""
    left_out = frozenset(session.left_out)
    known = frozenset(session.wanted)
    joining: list[str] = []
    for arm_id in needed:
        if arm_id in left_out and arm_id not in joining and (at_once or arm_id not in known):
            joining.append(arm_id)
    if not joining:
        return None
    if not at_once:
        return replace(session, wanted=session.wanted + tuple(joining))
    gone = frozenset(joining)
    return replace(
        session,
        added=session.added + tuple(joining),
        left_out=tuple(arm_id for arm_id in session.left_out if arm_id not in gone),
        wanted=tuple(arm_id for arm_id in session.wanted if arm_id not in gone),
    )


__all__ = [
    "MAX_SESSION_KEY_CHARS",
    "DecideNew",
    "SessionCache",
    "SessionDecisions",
    "SessionSet",
    "continue_set",
    "first_set",
    "full_prompt",
    "grow",
]
