"""Session-stable selection in the service (SPEC section 4a): a session's set read from the
store (or this process's short-lived copy), decided and claimed on its first select, grown by
the tools the model needed, and kept when storage cannot be reached only at the cost of a
per-request draw."""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from engine.arms import ArmType, parse_arm_id
from engine.bounds import check_text
from engine.config import LearningConfig
from engine.errors import InvalidInput, Unavailable
from engine.observation import RunReport
from engine.ports import SessionSets, Store
from engine.session_sets import (
    MAX_SESSION_KEY_CHARS,
    SessionCache,
    continue_set,
    first_set,
    full_prompt,
    grow,
)

if TYPE_CHECKING:
    from engine.inventory import ArmSet
    from engine.selection import Selection

Draw = Callable[["ArmSet", LearningConfig], "Selection"]
"""A selection over an inventory under a configuration (the service's, from its cache)."""


SESSION_ATTEMPTS = 4
"""Reads of a session's set before a select gives up agreeing with other writers and answers
what it computed (a replica appending at that very moment is the only cause)."""


def _touch_ms(idle_seconds: int) -> int:
    """How stale a live session's `used_at` may get before a select writes it again: a tenth
    of the idle window, at most 30 s (a select of a live session reads, and rarely writes)."""
    return min(30_000, idle_seconds * 100)


def _tool_name(arm_id: str) -> str | None:
    parsed = parse_arm_id(arm_id)
    return parsed.name if parsed.type is ArmType.TOOL else None


def keyed(session_key: str, options: Mapping[str, Any], k: int) -> str:
    """The key a session's set is kept under for one set of per-call options."""
    shown = json.dumps({"k": k, **options}, sort_keys=True, default=str)
    digest = hashlib.sha256(shown.encode()).hexdigest()[:16]
    base = (
        session_key
        if len(session_key) <= MAX_SESSION_KEY_CHARS - 17
        else (hashlib.sha256(session_key.encode()).hexdigest())
    )
    return f"{base}#{digest}"


def session_key_of(context: Mapping[str, Any] | None, session_key: str | None = None) -> str:
    """The session a select names: `session_key`, else `context["session_key"]`; "" for
    none. Checked as every identifier is (text, at most MAX_SESSION_KEY_CHARS)."""
    key: Any = session_key
    if key is None and context is not None:
        if not isinstance(context, Mapping):
            raise InvalidInput(f"context must be an object, got {type(context).__name__}")
        key = context.get("session_key", context.get("sessionKey"))
    if key is None:
        return ""
    if not isinstance(key, str):
        raise InvalidInput(f"session_key must be a string, got {type(key).__name__}")
    check_text("session_key", key, MAX_SESSION_KEY_CHARS)
    return key


class SessionSelector:
    """One learner's session sets: `select` answers a session's select, `grow` adds what the
    model needed after a run. Shared by the service's `select` and `select_run`."""

    def __init__(
        self,
        store: Store,
        learner_id: Callable[[], int],
        cache_ttl: float,
        clock: Callable[[], float],
        wall_clock: Callable[[], int],
    ) -> None:
        self.store = store
        self._learner_id = learner_id
        self._sessions = SessionCache(cache_ttl)
        self._clock = clock
        self._wall_clock = wall_clock

    def select(
        self,
        key: str,
        arm_set: ArmSet,
        config: LearningConfig,
        draw: Callable[[ArmSet, LearningConfig], Selection],
        *,
        full_baseline: bool = True,
        opening: tuple[int, ...] = (),
    ) -> Selection:
        """The selection of session `key`: its stored set when it is live, else a new draw
        stored as its set (or the set another replica stored first), with `opening`, the word
        features of the message it was drawn for. Storage that cannot be reached gives a
        per-request draw: the run goes ahead, only its cached prefix is lost."""
        store = self.store
        idle = config.session_idle_seconds
        if idle <= 0 or not isinstance(store, SessionSets):
            return draw(arm_set, config)

        def decide_new(new: ArmSet, budget: int) -> Selection:
            return draw(new, replace(config, token_budget=budget, baseline_rate=0.0))

        try:
            learner_id = self._learner_id()
            for _ in range(SESSION_ATTEMPTS):
                now = self._wall_clock()
                session = self._sessions.get(key, self._clock())
                if session is None:
                    session = store.session_set(learner_id, key)
                if session is None or not session.is_live(now, idle):
                    # a session idle past its window draws its set again (its cached prefix
                    # is gone) but stays in the group its first select chose: the baseline
                    # coin is tossed once per session, so the measured saving compares
                    # sessions, not parts of them
                    again = config
                    if session is not None:
                        again = replace(config, baseline_rate=float(session.is_baseline))
                    drawn = draw(arm_set, again)
                    if full_baseline:  # a baseline session offers every arm, all session long
                        drawn = full_prompt(drawn, arm_set)
                    candidate = first_set(key, drawn, now, opening)
                    session = store.claim_session_set(learner_id, candidate, idle * 1000)
                    self._sessions.put(session, self._clock())
                    if session.decided_at == now and session.included == candidate.included:
                        return drawn  # ours is the session's set
                selection, changed = continue_set(session, arm_set, config.token_budget, decide_new)
                if changed is session and now - session.used_at < _touch_ms(idle):
                    return selection
                changed = replace(changed, used_at=now)
                if store.save_session_set(learner_id, changed):
                    self._sessions.put(replace(changed, version=changed.version + 1), self._clock())
                    return selection
                self._sessions.drop(key)  # another replica changed it: read it again
            return selection
        except Unavailable:
            self._sessions.drop(key)
            return draw(arm_set, config)

    def opening(self, key: str) -> tuple[int, ...]:
        """The word features of the message session `key`'s set was decided on (this
        process's copy while it is fresh, else the store's); () when unknown or unreachable."""
        session = self._sessions.get(key, self._clock())
        store = self.store
        if session is None and isinstance(store, SessionSets):
            with contextlib.suppress(Unavailable):
                session = store.session_set(self._learner_id(), key)
        return session.opening if session is not None else ()

    def grow(self, reports: Sequence[RunReport], config: LearningConfig) -> None:
        """A tool the model called but its session had left out joins the session's set at the
        end, for the session's next run (one miss per tool, not one per turn); not with
        `session_growth` "off"."""
        store = self.store
        if (
            config.session_growth == "off"
            or config.session_idle_seconds <= 0
            or not isinstance(store, SessionSets)
        ):
            return
        for report in reports:
            key = report.session_key
            if not key or not report.tool_calls:
                continue
            have = {item.arm.name for item in report.arms if item.included}
            missing = {call.name for call in report.tool_calls} - have - config.meta_tools
            if not missing:
                continue
            with contextlib.suppress(Unavailable):
                for _ in range(SESSION_ATTEMPTS):
                    session = store.session_set(self._learner_id(), key)
                    if session is None:
                        break
                    needed = [a for a in session.left_out if _tool_name(a) in missing]
                    grown = grow(session, needed)
                    if grown is None:
                        break
                    if store.save_session_set(self._learner_id(), grown):
                        self._sessions.drop(key)
                        break
