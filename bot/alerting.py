"""The alert scheduler: every `interval` seconds the replica holding the `alerts` lease reads
each subscribed learner's numbers, moves its alerts' state machines (engine.alerts) and sends
what each subscribed channel is owed through that channel's surface (an AlertSender).

Exactly once: a message is claimed in the database before it is sent (alert_messages), so two
replicas, or one restarted, never send it twice; a claim whose sender stopped before sending
is taken over after the lease's time. Messages are derived from the stored states, not from
the evaluation that changed them, so a restart between the two loses nothing.

A channel the bot can no longer post to (the sender raises ChannelGone) pauses its
subscription after that one failure; `/learning subscriptions` says so."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from learning_bot.bot.digest import (
    DigestFacts,
    Period,
    digest_card,
    digest_chart,
    due_period,
    moved_arms,
    open_alert_titles,
    period_runs,
    trend,
)
from learning_bot.bot.ports import SubscriptionStore
from learning_bot.bot.replies import Fields, Heading, Reply, ReplyKind, Text, Visibility
from learning_bot.engine.alert_records import AlertState, Subscription
from learning_bot.engine.alerts import (
    FIRING,
    RECENT_RUNS,
    REFERENCE_RUNS,
    RESOLVED,
    Finding,
    Signals,
    advance,
    findings,
    firing_details,
    reward_levels,
    stored_finding,
)
from learning_bot.engine.bounds import MAX_PAGE
from learning_bot.engine.errors import Unavailable
from learning_bot.engine.posterior import WallClock, now_ms

log = logging.getLogger("learning_bot.alerts")

LEASE = "alerts"
HOUR_MS = 3_600_000


@dataclass(frozen=True)
class AlertSettings:
    """How often rules are evaluated and how much a channel may receive."""

    interval: float = 60.0
    """Seconds between evaluations (LEARNING_BOT_ALERT_INTERVAL)."""
    per_channel_per_hour: int = 10
    """Messages one channel gets per hour at most; the rest wait for the next hour."""
    digest_hour: int = 9
    """Local hour (the channel's time zone, else UTC) from which a digest is due."""
    skip_empty_digests: bool = True
    """A digest of a period without runs is not sent (else: one line saying so)."""
    storage_down_after: float = 120.0
    """Seconds storage may be unavailable before the alert subscriptions hear of it."""
    remind_after: float = 86_400.0
    """An alert still firing this many seconds after it began gets a "still firing" note in
    its thread, and another each time as long again passes (0: never)."""

    @property
    def lease_ms(self) -> int:
        """The lease outlives three missed evaluations, then another replica takes over."""
        return max(int(self.interval * 3000), 3000)


@runtime_checkable
class ScopedSender(Protocol):
    """A sender installed in several workspaces: the sender for one of them."""

    async def for_scope(self, scope: str) -> AlertSender: ...


class ChannelGone(Exception):
    """The bot cannot post to this channel any more (removed, archived, no permission)."""


class AlertSender(Protocol):
    """Sends a card to a channel of one surface; rendering and escaping are the surface's."""

    @property
    def surface(self) -> str: ...

    async def post(self, channel: str, card: Reply, thread: str | None = None) -> str:
        """Post the card (in `thread`, a message ref, when given); the new message's ref."""
        ...

    async def update(self, channel: str, ref: str, card: Reply) -> None:
        """Replace the message `ref` with the card."""
        ...

    async def upload(
        self, channel: str, filename: str, data: bytes, title: str, thread: str | None
    ) -> None:
        """Upload a file (a digest's chart) to the channel, in `thread` when given."""
        ...


class Learners(Protocol):
    def get(self, learner: str, *, create: bool = True) -> Any: ...


def alert_card(finding: Finding, state: str, dashboard_url: str | None = None) -> Reply:
    """An alert's card: title, the numbers behind it, what to do; the dashboard when known.
    Plain text blocks: each surface renders and escapes them as it does every reply."""
    badge = {FIRING: "FIRING", RESOLVED: "RESOLVED"}.get(state, "CHANGE")
    blocks: list[Any] = [Heading(finding.title, badge)]
    if finding.facts:
        blocks.append(Fields(finding.facts))
    if finding.advice and state != RESOLVED:
        blocks.append(Text(finding.advice))
    if state == RESOLVED:
        blocks.append(Text("Resolved: the numbers are back within bounds.", muted=True))
    if dashboard_url:
        blocks.append(Text(f"Dashboard: {dashboard_url}", muted=True))
    summary = f"{badge}: {finding.title}" if state != "note" else finding.title
    kind = ReplyKind.OK if state == RESOLVED else ReplyKind.INFO
    return Reply(kind, tuple(blocks), summary, Visibility.PUBLIC, dashboard_url=dashboard_url)


STILL = "still-"
"""The stage of a "still firing" note: `still-N`, N remind periods after the alert began."""


def still_firing_note(finding: Finding, firing_ms: int) -> Reply:
    hours = firing_ms / 3_600_000
    since = f"{hours / 24:.0f} days" if hours >= 48 else f"{hours:.0f} hours"
    text = f"Still firing after {since}: {finding.title}."
    return Reply(ReplyKind.INFO, (Text(text),), text, Visibility.PUBLIC)


def resolved_note(finding: Finding) -> Reply:
    text = f"Resolved: {finding.title}."
    return Reply(ReplyKind.OK, (Text(text),), text, Visibility.PUBLIC)


class AlertScheduler:
    """Evaluates the rules and sends alerts and changes to the subscribed channels."""

    def __init__(
        self,
        store: SubscriptionStore,
        services: Learners,
        senders: Sequence[AlertSender],
        settings: AlertSettings | None = None,
        *,
        dashboard_url: str | None = None,
        holder: str | None = None,
        clock: WallClock = now_ms,
    ) -> None:
        self.store = store
        self.clock = clock
        """The date and time rounds run at (digests fall due by it), and messages are stamped
        with."""
        self.services = services
        self.senders = {s.surface: s for s in senders}
        self.settings = settings or AlertSettings()
        self.dashboard_url = dashboard_url
        self.holder = holder or uuid.uuid4().hex
        self._stop = asyncio.Event()
        self._holding = False
        self._known: list[Subscription] = []
        """The alert subscriptions last read: who hears of an outage of storage itself."""
        self._down_since: int | None = None
        self._outage: dict[int, tuple[Subscription, str]] = {}
        """Subscription id -> (subscription, message ref) of the storage alert sent."""
        self._unrecorded: dict[tuple[int, str, int, str], tuple[int, str | None]] = {}
        """Messages sent whose sending could not be written yet (the database refused the
        write): key -> (sent at, ref). Written before anything else each round, and never sent
        again meanwhile: a claim left open would otherwise be taken over after the lease and
        the message sent twice."""

    # -- storage outages (nothing can be claimed in the database: the last lease holder
    # speaks, from memory) ----------------------------------------------------------------

    def _outage_finding(self, seconds: float) -> Finding:
        return Finding(
            "storage",
            "storage",
            "Storage unavailable",
            (("For", f"{seconds:.0f} s"),),
            "Runs are kept in the spool meanwhile and replayed when it is back. Check the "
            "database (healthz, learning-bot db url).",
        )

    async def _storage_down(self, at: int) -> int:
        if not self._holding:
            return 0
        if self._down_since is None:
            self._down_since = at
        seconds = (at - self._down_since) / 1000
        if self._outage or seconds < self.settings.storage_down_after:
            return 0
        card = alert_card(self._outage_finding(seconds), FIRING, self.dashboard_url)
        sent = 0
        for sub in self._known:
            if sub.paused or sub.surface not in self.senders:
                continue
            try:
                sender = await self._sender_for(sub)
                ref = await sender.post(sub.channel, card)
            except Exception:
                log.warning("could not tell %s %s that storage is down", sub.surface, sub.channel)
                continue
            self._outage[sub.id] = (sub, ref)
            sent += 1
        return sent

    async def _storage_back(self) -> int:
        down_since, self._down_since = self._down_since, None
        if not self._outage or down_since is None:
            return 0
        finding = self._outage_finding((self.clock() - down_since) / 1000)
        sent = 0
        for sub, ref in self._outage.values():
            try:
                sender = await self._sender_for(sub)
                await sender.update(sub.channel, ref, alert_card(finding, RESOLVED))
                await sender.post(sub.channel, resolved_note(finding), thread=ref)
                sent += 1
            except Exception:
                log.warning("could not resolve the storage alert in %s", sub.channel)
        self._outage.clear()
        return sent

    async def run(self) -> None:
        """Evaluate every `interval` seconds until stop(); a failed round is logged."""
        while not self._stop.is_set():
            try:
                await self.tick()
            except Exception:
                log.exception("alert evaluation failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.settings.interval)

    def stop(self) -> None:
        self._stop.set()

    async def tick(self, now: int | None = None) -> int:
        """One round (only while this replica holds the lease): the messages sent."""
        at = self.clock() if now is None else now
        try:
            held = await asyncio.to_thread(
                self.store.acquire_lease, LEASE, self.holder, at, self.settings.lease_ms
            )
            subs = await asyncio.to_thread(self.store.subscriptions) if held else []
        except Unavailable:
            return await self._storage_down(at)
        recovered = await self._storage_back() if held else 0
        self._holding = held
        if not held:
            return 0
        if not await self._record_unrecorded():
            return recovered
        self._known = [s for s in subs if s.kind == "alerts"]
        by_learner: dict[str, list[Subscription]] = {}
        for sub in subs:
            if sub.paused or sub.surface not in self.senders or sub.kind.startswith("digest"):
                continue
            by_learner.setdefault(sub.learner, []).append(sub)
        sent = recovered
        for learner, learner_subs in sorted(by_learner.items()):
            states = await asyncio.to_thread(self._evaluate, learner, at)
            sent += await self._deliver(states, learner_subs, at)
        for sub in subs:
            if not sub.paused and sub.surface in self.senders and sub.kind.startswith("digest"):
                sent += await self._digest(sub, at)
        return sent

    # -- digests ---------------------------------------------------------------------------

    def _digest_facts(self, sub: Subscription, period: Period) -> DigestFacts:
        service = self.services.get(sub.learner, create=False)
        summary = service.summary()
        runs, _ = service.traces(limit=MAX_PAGE)
        runs = period_runs(runs, period)
        weekly = sub.kind == "digest weekly"
        buckets = service.timeseries("convergence", "1d", 15 if weekly else 3, at=period.end_ms)
        cost = summary.prompt_cost_savings
        return DigestFacts(
            sub.learner,
            period,
            len(runs),
            sum(1 for r in runs if not r.is_baseline),
            sum(max(r.usage.total, 0) for r in runs),
            cost.percent if cost is not None else None,
            summary.prompt_savings_percent,
            summary.estimated_recall,
            moved_arms(buckets, period),
            open_alert_titles(self.store.alert_states(sub.learner)),
            trend(runs, period, 86_400_000 if weekly else 3_600_000, service.recall_of),
        )

    async def _digest(self, sub: Subscription, at: int) -> int:
        period = due_period(sub, at, self.settings.digest_hour)
        if period is None:
            return 0
        key = (sub.id, "digest", period.number, "digest")
        if await asyncio.to_thread(self.store.sent_message, *key) is not None:
            return 0
        if not await self._within_rate(sub, at):
            return 0
        stale = at - self.settings.lease_ms
        if not await asyncio.to_thread(self.store.claim_message, *key, self.holder, at, stale):
            return 0
        try:
            facts = await asyncio.to_thread(self._digest_facts, sub, period)
        except Exception:
            log.exception("could not read the digest of %s", sub.learner)
            await asyncio.to_thread(self.store.release_message, *key)
            return 0
        if facts.runs == 0 and self.settings.skip_empty_digests:
            await asyncio.to_thread(self.store.message_sent, *key, at, None, "no runs")
            return 0
        sender: AlertSender = self.senders[sub.surface]
        card = digest_card(facts, sub.kind, self.dashboard_url)
        try:
            sender = await self._sender_for(sub)
            ref = await sender.post(sub.channel, card)
        except ChannelGone as exc:
            reason = str(exc) or "the bot cannot post to this channel"
            await asyncio.to_thread(self.store.message_sent, *key, at, None, reason)
            await asyncio.to_thread(self.store.pause, sub.id, reason, at)
            return 0
        except Exception:
            log.exception("could not send a digest to %s %s", sub.surface, sub.channel)
            await asyncio.to_thread(self.store.release_message, *key)
            return 0
        await self._record(key, self.clock(), ref)
        chart = await asyncio.to_thread(digest_chart, facts)
        if chart is not None:
            try:
                await sender.upload(
                    sub.channel, f"digest-{period.label}.png", chart, card.summary, ref
                )
            except Exception:  # the card already says it all in text
                log.warning("could not upload the digest chart to %s", sub.channel)
        return 1

    # -- evaluation ------------------------------------------------------------------------

    def _signals(self, learner: str) -> Signals:
        service = self.services.get(learner, create=False)
        status = service.status(top=1)
        runs, _ = service.traces(limit=RECENT_RUNS + REFERENCE_RUNS)
        reset = service.last_reset()
        summary = status.summary
        return Signals(
            learner,
            starved=status.starved,
            levels=reward_levels(runs),
            cost=summary.prompt_cost_savings,
            prompt_savings_percent=summary.prompt_savings_percent,
            spool=service.spool_health(),
            phase=status.phase.value,
            last_reset=None if reset is None else (reset.reset_id, reset.undone),
            dashboard_url=self.dashboard_url,
        )

    def _evaluate(self, learner: str, at: int) -> list[AlertState]:
        """Move the learner's alerts one step and store them; every stored state."""
        stored = self.store.alert_states(learner)
        found = findings(self._signals(learner), firing_details(stored))
        for transition in advance(learner, stored, found, at):
            self.store.save_alert_state(transition.state)
        return self.store.alert_states(learner)

    # -- delivery --------------------------------------------------------------------------

    async def _sender_for(self, sub: Subscription) -> AlertSender:
        """The surface's sender for the subscription's workspace or guild: a surface installed
        in several (Slack's OAuth installations) posts with the token of the one the channel
        belongs to; ChannelGone when the bot is no longer installed there."""
        sender = self.senders[sub.surface]
        if isinstance(sender, ScopedSender):
            return await sender.for_scope(sub.scope)
        return sender

    def _owed(self, state: AlertState, sub: Subscription, at: int) -> list[str]:
        """The stages of the state's current episode this subscription is owed: its card,
        the latest "still firing" note due (`still-N`, N remind periods in), its resolution."""
        change = state.alert.startswith("change:")
        if (sub.kind == "changes") != change or state.episode < 1:
            return []
        if change:
            return ["note"] if state.first_seen >= sub.created_at else []
        if state.state == FIRING:
            remind_ms = int(self.settings.remind_after * 1000)
            periods = (at - state.first_seen) // remind_ms if remind_ms > 0 else 0
            return ["firing"] + ([f"{STILL}{periods}"] if periods >= 1 else [])
        if state.resolved_at is not None and state.resolved_at >= sub.created_at:
            return ["firing", "resolved"]
        return []

    async def _deliver(self, states: list[AlertState], subs: list[Subscription], at: int) -> int:
        sent = 0
        stale = at - self.settings.lease_ms
        paused: set[int] = set()
        for state in states:
            for sub in subs:
                for stage in self._owed(state, sub, at):
                    if sub.id in paused:
                        continue
                    done = await asyncio.to_thread(
                        self.store.sent_message, sub.id, state.alert, state.episode, stage
                    )
                    if done is not None and (done.sent_at is not None or done.ref is not None):
                        continue
                    if not await self._within_rate(sub, at):
                        continue
                    claimed = await asyncio.to_thread(
                        self.store.claim_message,
                        sub.id,
                        state.alert,
                        state.episode,
                        stage,
                        self.holder,
                        at,
                        stale,
                    )
                    if not claimed:
                        continue
                    outcome = await self._send(sub, state, stage, at)
                    if outcome is None:
                        paused.add(sub.id)
                    elif outcome:
                        sent += 1
        return sent

    async def _record(self, key: tuple[int, str, int, str], at: int, ref: str | None) -> None:
        """Write that the message was sent; kept to write next round if the database refuses
        it now."""
        try:
            await asyncio.to_thread(self.store.message_sent, *key, at, ref)
        except Exception:
            log.exception("could not record that %s was sent; recording it next round", key[1])
            self._unrecorded[key] = (at, ref)

    async def _record_unrecorded(self) -> bool:
        """Write the messages sent whose sending is not written yet; whether all are."""
        for key, (at, ref) in list(self._unrecorded.items()):
            try:
                await asyncio.to_thread(self.store.message_sent, *key, at, ref)
            except Exception:
                log.warning("still cannot record that %s was sent", key[1])
                return False
            del self._unrecorded[key]
        return True

    async def _within_rate(self, sub: Subscription, at: int) -> bool:
        count = await asyncio.to_thread(
            self.store.sent_since, sub.surface, sub.channel, at - HOUR_MS
        )
        return count < self.settings.per_channel_per_hour

    async def _send(self, sub: Subscription, state: AlertState, stage: str, at: int) -> bool | None:
        """Send one claimed message: True when sent, False to retry later, None when the
        channel is gone (the subscription is paused)."""
        finding = stored_finding(state)
        key = (sub.id, state.alert, state.episode, stage)
        try:
            sender = await self._sender_for(sub)
            ref: str | None
            if stage == "resolved":
                first = await asyncio.to_thread(
                    self.store.sent_message, sub.id, state.alert, state.episode, "firing"
                )
                card = alert_card(finding, RESOLVED, self.dashboard_url)
                if first is not None and first.ref:
                    await sender.update(sub.channel, first.ref, card)
                    ref = await sender.post(sub.channel, resolved_note(finding), thread=first.ref)
                else:
                    ref = await sender.post(sub.channel, card)
            elif stage.startswith(STILL):
                first = await asyncio.to_thread(
                    self.store.sent_message, sub.id, state.alert, state.episode, "firing"
                )
                if first is None or not first.ref:
                    return False  # its card first (the next round), then the note in its thread
                note = still_firing_note(finding, at - state.first_seen)
                ref = await sender.post(sub.channel, note, thread=first.ref)
            else:
                ref = await sender.post(sub.channel, alert_card(finding, stage, self.dashboard_url))
        except ChannelGone as exc:
            reason = str(exc) or "the bot cannot post to this channel"
            log.warning("pausing subscription %s of %s: %s", sub.id, sub.channel, reason)
            await asyncio.to_thread(self.store.message_sent, *key, at, None, reason)
            await asyncio.to_thread(self.store.pause, sub.id, reason, at)
            return None
        except Exception:
            log.exception("could not send %s to %s %s", state.alert, sub.surface, sub.channel)
            await asyncio.to_thread(self.store.release_message, *key)
            return False
        await self._record(key, self.clock(), ref)
        return True
