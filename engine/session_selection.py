"""Session-stable selection in the service (docs/sessions.md): a session's set read from the
store (or this process's short-lived copy), decided and claimed on its first select, grown by
the tools the model needed, and kept when storage cannot be reached only at the cost of a
per-request draw."""

from __future__ import annotations

import contextlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from learning_bot.engine.arms import ArmType, parse_arm_id
from learning_bot.engine.bounds import check_text
from learning_bot.engine.config import LearningConfig
from learning_bot.engine.errors import InvalidInput, Unavailable
from learning_bot.engine.observation import RunReport
from learning_bot.engine.ports import SessionSets
from learning_bot.engine.providers import Mechanics, mechanics_for
from learning_bot.engine.session_review import (
    BASELINE_DONE,
    CACHE_MISS_SHARE,
    FIRST,
    IDLE,
    JOINED,
    KEPT,
    KEPT_PRICED,
    MISSED_CACHE,
    PRICED,
    PROVISIONAL,
    LearnerView,
    best_known_set,
    cache_break,
    due,
    forced_arms,
    priced,
    provisional_done,
)
from learning_bot.engine.session_sets import (
    MAX_CACHED_SESSIONS,
    MAX_SESSION_KEY_CHARS,
    SessionCache,
    SessionSet,
    continue_set,
    first_set,
    full_prompt,
    grow,
)

if TYPE_CHECKING:
    from learning_bot.engine.cost import PriceTable, TokenPrices
    from learning_bot.engine.inventory import ArmSet
    from learning_bot.engine.recall_target import RecallCalibration
    from learning_bot.engine.selection import Selection

Draw = Callable[["ArmSet", LearningConfig], "Selection"]
"""A selection over an inventory under a configuration (the service's, from its cache)."""

Calibrate = Callable[["ArmSet", LearningConfig, str, str], "RecallCalibration | None"]
"""The recall target's calibration a draw over an inventory under a configuration reads, its
search priced for them and for the provider and model a request names (empty: the learner's);
None: no target."""


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
    import hashlib

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


@dataclass(frozen=True, slots=True)
class SessionRequest:
    """What a select tells about its session besides the key: the provider and model it runs
    (empty: the learner's default, else the session's last), and whether the runtime compacted
    the conversation since the last turn."""

    provider: str = ""
    model: str = ""
    compacted: bool = False


COMPACTED_KEYS = ("compacted", "compaction")
"""The context keys a runtime says it compacted the conversation with (true)."""


def session_request(
    context: Mapping[str, Any] | None, provider: str = "", model: str = ""
) -> SessionRequest:
    """What a select's context tells about its session: `provider` and `model` (the
    arguments win over the context's), and `compacted: true` when the runtime compacted the
    conversation since its last turn (its cached prefix is gone)."""
    ctx = context if isinstance(context, Mapping) else {}

    def text(name: str, given: str) -> str:
        value = given or ctx.get(name) or ""
        if not isinstance(value, str):
            raise InvalidInput(f"context.{name} must be a string, got {type(value).__name__}")
        return check_text(f"context.{name}", value, MAX_SESSION_KEY_CHARS).strip()

    compacted = False
    for name in COMPACTED_KEYS:
        if name in ctx:
            flag = ctx[name]
            if not isinstance(flag, bool):
                raise InvalidInput(f"context.{name} must be true or false, got {flag!r}")
            compacted = compacted or flag
    return SessionRequest(text("provider", provider), text("model", model), compacted)


BASELINE_TURNS = 50
"""A baseline session offers every arm for its first this many selects: the full-prompt
control group of the measured saving. A conversation that goes on past them is selected from
then on (never the other way round), so a channel whose session key lives for days is not a
full-prompt channel for good. Its later runs count with the selected sessions; they cost more
per run than early ones (the history has grown), so for such conversations the measured
saving errs low, never high. Sessions this long are rare elsewhere (in the simulator, 0.1% of
sessions)."""


class SessionSelector:
    """One learner's session sets: `select` answers a session's select, `grow` adds what the
    model needed after a run, `note_runs` reads the cache breaks runs report. Shared by the
    service's `select` and `select_run`."""

    def __init__(
        self,
        store: SessionSets,
        learner_id: Callable[[], int],
        cache_ttl: float,
        clock: Callable[[], float],
        wall_clock: Callable[[], int],
        view: LearnerView,
        prices: Callable[[], PriceTable],
    ) -> None:
        self.store = store
        self._learner_id = learner_id
        self._sessions = SessionCache(cache_ttl)
        self._clock = clock
        self._wall_clock = wall_clock
        self._view = view
        self._prices = prices
        self._prompt_sizes: OrderedDict[str, int] = OrderedDict()
        self._sizes_lock = threading.Lock()

    def _mechanics(self, provider: str, model: str, config: LearningConfig) -> Mechanics:
        return mechanics_for(provider or config.provider, model or config.model)

    def prices_for(self, provider: str, model: str) -> TokenPrices:
        """The token prices of `model` at `provider` (engine.cost)."""
        return self._prices().prices_for(provider, model)

    def select(
        self,
        key: str,
        arm_set: ArmSet,
        config: LearningConfig,
        draw: Callable[[ArmSet, LearningConfig], Selection],
        *,
        full_baseline: bool = True,
        opening: tuple[int, ...] = (),
        request: SessionRequest | None = None,
        calibration: Calibrate | None = None,
    ) -> Selection:
        """The selection of session `key`: its stored set when it is live and worth keeping,
        else a new draw stored as its set (or the set another replica stored first), with
        `opening`, the word features of the message it was drawn for. A review under a recall
        target weighs the set `calibration` calibrates, as `draw` does. Storage that
        cannot be reached gives a per-request draw: the run goes ahead, only its cached prefix
        is lost."""
        store = self.store
        idle = config.session_idle_seconds
        if idle <= 0:
            return draw(arm_set, config)
        asked = request or SessionRequest()
        view = self._view
        seeds = config.seed_arm_ids

        def decide_new(new: ArmSet, budget: int) -> Selection:
            return draw(new, replace(config, token_budget=budget, baseline_rate=0.0))

        def stamped(session: SessionSet, now: int) -> SessionSet:
            return replace(
                session,
                used_at=now,
                provider=asked.provider or session.provider,
                model=asked.model or session.model,
            )

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
                    if full_baseline:  # a baseline session offers every arm
                        drawn = full_prompt(drawn, arm_set)
                    reason = FIRST if session is None else IDLE
                    fresh = stamped(
                        first_set(
                            key,
                            drawn,
                            now,
                            opening,
                            provisional=forced_arms(drawn.selected, view, config.min_pulls, seeds),
                            reason=reason,
                            reviewed=view.observations(),
                        ),
                        now,
                    )
                    if session is not None:
                        fresh = replace(
                            fresh,
                            redraws=session.redraws + 1,
                            turns=session.turns + 1,
                            drawn_turn=session.turns,
                        )
                    claimed = store.claim_session_set(learner_id, fresh, idle * 1000)
                    self._sessions.put(claimed, self._clock())
                    if claimed.decided_at == now and claimed.included == fresh.included:
                        return _said(drawn, "new" if session is None else "redrawn", reason)
                    session = claimed  # another replica's draw holds: answer with it
                mechanics = self._mechanics(
                    asked.provider or session.provider, asked.model or session.model, config
                )
                why, chosen = self._review(session, arm_set, config, asked, mechanics, calibration)
                if why:
                    redrawn = self._redraw(session, arm_set, config, chosen, draw, now, why)
                    changed = stamped(redrawn[1], now)
                    if store.save_session_set(learner_id, changed):
                        self._sessions.put(
                            replace(changed, version=changed.version + 1), self._clock()
                        )
                        return _said(redrawn[0], "redrawn", why)
                    self._sessions.drop(key)  # another replica changed it: read it again
                    continue
                selection, changed = continue_set(session, arm_set, config.token_budget, decide_new)
                if session.grew:
                    action, reason = "grown", JOINED
                elif changed is not session:
                    action, reason = "grown", "arms new to the inventory decided"
                else:
                    action, reason = "kept", KEPT
                if chosen is not None:  # reviewed, and the new set does not pay
                    changed = replace(changed, reviewed=view.observations())
                    reason = KEPT_PRICED
                changed = replace(stamped(changed, now), turns=changed.turns + 1, grew=False)
                if session.is_baseline and changed.turns > BASELINE_TURNS:
                    changed = replace(changed, is_baseline=False, broken=BASELINE_DONE)
                if store.save_session_set(learner_id, changed):
                    self._sessions.put(replace(changed, version=changed.version + 1), self._clock())
                    return _said(selection, action, reason)
                self._sessions.drop(key)  # another replica changed it: read it again
            return selection
        except Unavailable:
            self._sessions.drop(key)
            return draw(arm_set, config)

    def _review(
        self,
        session: SessionSet,
        arm_set: ArmSet,
        config: LearningConfig,
        asked: SessionRequest,
        mechanics: Mechanics,
        calibration: Calibrate | None,
    ) -> tuple[str, Selection | None]:
        """Whether the live `session` draws its set again now, and why ("" keeps it); the
        set a priced review weighed (None when there was no review): under a recall target,
        the set `calibration` calibrates for the offered arms."""
        if session.is_baseline:
            return "", None
        view = self._view
        why = cache_break(session, asked.provider, asked.model, asked.compacted)
        if why:
            return why, None
        provisional = provisional_done(session, view, config.min_pulls)
        if not provisional and (session.provisional or not due(session, view)):
            return "", None
        costs = dict(zip(arm_set.ids, (int(c) for c in arm_set.costs), strict=True))
        best = best_known_set(
            arm_set.ids,
            costs,
            view,
            config.token_budget,
            config.seed_arm_ids,
            config.packing == "score_per_token",
            config.recall_target,
            None
            if calibration is None
            else calibration(
                arm_set,
                config,
                asked.provider or session.provider,
                asked.model or session.model,
            ),
        )
        wanted = [a for a in session.wanted if a in costs and a not in best]
        new_ids = (*best, *wanted)
        if provisional:  # the set was a guess: the best the learner knows replaces it
            return PROVISIONAL, _listed(arm_set, new_ids, config)
        prices = self._prices().prices_for(
            asked.provider or session.provider or config.provider,
            asked.model or session.model or config.model,
        )
        price = priced(
            session, new_ids, costs, view, prices, mechanics, self._prompt_size(session.key)
        )
        if not price.pays:
            return "", _listed(arm_set, (), config)  # reviewed: kept
        return PRICED, _listed(arm_set, new_ids, config)

    def _redraw(
        self,
        session: SessionSet,
        arm_set: ArmSet,
        config: LearningConfig,
        chosen: Selection | None,
        draw: Callable[[ArmSet, LearningConfig], Selection],
        now: int,
        why: str,
    ) -> tuple[Selection, SessionSet]:
        """A live session's new set (`chosen` when a review drew it), keeping the tools the
        session asked for; the session's group, opening and counts carry over."""
        from learning_bot.engine.selection import Selection

        drawn = chosen if chosen is not None else draw(arm_set, replace(config, baseline_rate=0.0))
        picked = list(drawn.selected)
        for arm_id in session.wanted:
            if arm_id in arm_set.index and arm_id not in picked:
                picked.append(arm_id)
        taken = frozenset(picked)
        costs = arm_set.costs
        used = min(sum(int(costs[arm_set.index[a]]) for a in picked), 2**63 - 1)
        selection = Selection(
            picked,
            [a for a in arm_set.ids if a not in taken],
            False,
            config.token_budget,
            used,
            used > config.token_budget,
        )
        fresh = first_set(
            session.key,
            selection,
            now,
            session.opening,
            provisional=forced_arms(picked, self._view, config.min_pulls, config.seed_arm_ids),
            reason=why,
            reviewed=self._view.observations(),
        )
        return selection, replace(
            fresh,
            decided_at=session.decided_at,
            version=session.version,
            turns=session.turns + 1,
            drawn_turn=session.turns,
            redraws=session.redraws + 1,
            provider=session.provider,
            model=session.model,
        )

    def opening(self, key: str) -> tuple[int, ...]:
        """The word features of the message session `key`'s set was decided on (this
        process's copy while it is fresh, else the store's); () when unknown or unreachable."""
        session = self._sessions.get(key, self._clock())
        if session is None:
            with contextlib.suppress(Unavailable):
                session = self.store.session_set(self._learner_id(), key)
        return session.opening if session is not None else ()

    def _prompt_size(self, key: str) -> int:
        with self._sizes_lock:
            return self._prompt_sizes.get(key, 0)

    def note_runs(self, reports: Sequence[RunReport]) -> None:
        """Read what runs tell about their sessions' caches: the prompt size (for pricing a
        rewrite), and runs that read less than CACHE_MISS_SHARE of their tool definitions from
        the cache although their set was read before: two such runs in a row mark the
        session's cache as not holding, and its next select draws again."""
        store = self.store
        for report in reports:
            key = report.session_key
            usage = report.usage
            if not key or usage is None:
                continue
            prompt = usage.input + usage.cache_read + usage.cache_write
            if prompt > 0:
                with self._sizes_lock:
                    self._prompt_sizes[key] = prompt
                    self._prompt_sizes.move_to_end(key)
                    while len(self._prompt_sizes) > MAX_CACHED_SESSIONS:
                        self._prompt_sizes.popitem(last=False)
            tools = sum(item.arm.token_cost for item in report.arms if item.included)
            if usage.cache_write <= 0 or usage.cache_read >= CACHE_MISS_SHARE * tools:
                continue
            with contextlib.suppress(Unavailable):
                for _ in range(SESSION_ATTEMPTS):
                    session = store.session_set(self._learner_id(), key)
                    # the first run of a set writes its prompt: only a later one is a miss
                    if session is None or session.turns - session.drawn_turn < 2 or session.broken:
                        break
                    # One miss rewrote the prefix with the set it has: drawing again now would
                    # pay a second rewrite. Two in a row say the cache does not hold for this
                    # session, so the next run misses too and a new set costs nothing extra.
                    again = 0 < session.turns - session.missed_turn <= 1
                    changed = (
                        replace(session, broken=MISSED_CACHE)
                        if again and session.missed_turn
                        else replace(session, missed_turn=session.turns)
                    )
                    if store.save_session_set(self._learner_id(), changed):
                        self._sessions.drop(key)
                        break

    def grow(self, reports: Sequence[RunReport], config: LearningConfig) -> None:
        """Tools the model called that its session's cached prefix lacked: one it loaded
        through tool search, or any with `session_growth` "append", joins the session. Where
        the provider takes tools between turns without a rewrite (engine.providers) or the tool
        came through tool search, it joins at once (`added`, sent apart from the cached
        prefix); elsewhere it is kept by the session's next redraw. One miss per tool, not one
        per turn."""
        store = self.store
        if config.session_idle_seconds <= 0:
            return
        append = config.session_growth == "append"
        for report in reports:
            key = report.session_key
            if not key or not report.tool_calls:
                continue
            from learning_bot.engine.context import loaded_arms

            searched_ids = set(loaded_arms(report.context)) if report.context else set()
            loaded = {
                item.arm.id
                for item in report.arms
                if _was_loaded(item) or item.arm.id in searched_ids or item.arm.name in searched_ids
            }
            prefix = {item.arm.id for item in report.arms if item.included} - loaded
            prefix_names = {_tool_name(a) for a in prefix}
            loaded_names = {_tool_name(a) for a in loaded}
            # a call naming its arm asks for that arm; a bare name for any tool of that name
            named = {c.arm for c in report.tool_calls if c.arm} - prefix
            bare = {c.name for c in report.tool_calls if not c.arm} - config.meta_tools
            bare -= prefix_names
            if not append:
                named &= loaded
                bare &= loaded_names
            if not named and not bare:
                continue

            mechanics = self._mechanics(report.provider, report.model, config)
            with contextlib.suppress(Unavailable):
                for _ in range(SESSION_ATTEMPTS):
                    session = store.session_set(self._learner_id(), key)
                    if session is None or session.is_baseline:
                        break
                    needed = [a for a in session.left_out if a in named or _tool_name(a) in bare]
                    at_once = mechanics.mid_conversation_tools or mechanics.tool_search
                    searched = [a for a in needed if a in loaded or _tool_name(a) in loaded_names]
                    grown = grow(session, searched, at_once=True) or session
                    rest = [a for a in needed if a not in searched]
                    grown = grow(grown, rest, at_once=at_once) or grown
                    if grown is session:
                        break
                    if grown.added != session.added:
                        grown = replace(grown, grew=True)
                    if store.save_session_set(self._learner_id(), grown):
                        self._sessions.drop(key)
                        break


def _listed(arm_set: ArmSet, chosen: Sequence[str], config: LearningConfig) -> Selection:
    """A selection of the arms `chosen`, in that order."""
    from learning_bot.engine.selection import Selection

    taken = frozenset(chosen)
    costs = arm_set.costs
    used = min(sum(int(costs[arm_set.index[a]]) for a in chosen), 2**63 - 1)
    return Selection(
        list(chosen),
        [a for a in arm_set.ids if a not in taken],
        False,
        config.token_budget,
        used,
        used > config.token_budget,
    )


def _was_loaded(item: Any) -> bool:
    """Whether an observed arm came through tool search rather than the cached prefix."""
    return bool(getattr(item, "loaded", False))


def _said(selection: Selection, action: str, reason: str) -> Selection:
    selection.session = action
    selection.session_reason = reason
    return selection
