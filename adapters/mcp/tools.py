"""The tools the MCP surface serves, as plain synchronous functions over the command bus and
its learning services; MCP over stdio, MCP over Streamable HTTP and the `/v1` REST routes all
call these same functions.

Two sets:
- OpenClaw's learning-backend tools, with qortex's names, parameters and result shapes
  (`qortex_learning_*`): a select is recorded as a run with its context, and the per-arm
  observes that follow for the same `context.session_key` complete that run;
- our own `/learning` commands (`learning_status`, ...), run through the command bus with the
  MCP client as the actor, answered with the reply's text.

Bad arguments raise `engine.errors.InvalidInput` whose message starts with the field's name.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from learning_bot.bot.bus import CommandBus
from learning_bot.bot.commands import (
    Command,
    ConfigCommand,
    HelpCommand,
    PhaseCommand,
    ResetCommand,
    RewardCommand,
    StatusCommand,
)
from learning_bot.bot.commands.registry import command_names, specs
from learning_bot.bot.errors import kind_of_code
from learning_bot.bot.invocation import Actor, Invocation
from learning_bot.bot.render_text import render_text
from learning_bot.bot.replies import ReplyKind
from learning_bot.bot.shapes import reply_data_json
from learning_bot.engine.arms import Arm, parse_arm_id
from learning_bot.engine.bounds import (
    MAX_DESCRIPTION_CHARS,
    MAX_TIMESTAMP_MS,
    MAX_TOKEN_COST,
    check_count,
    check_json,
    check_learner_name,
    check_text,
)
from learning_bot.engine.config import Phase
from learning_bot.engine.errors import InvalidInput, LearningError, NotFound, Unavailable
from learning_bot.engine.observation import MAX_ID_CHARS
from learning_bot.engine.posterior import prior_parameters
from learning_bot.engine.service import LearningService
from learning_bot.engine.views import ArmView

SURFACE = "mcp"
MAX_CANDIDATES = 10_000
MAX_SESSION_ID_CHARS = 1024
OUTCOME_REWARDS = {"accepted": 1.0, "partial": 0.5, "rejected": 0.0}
"""qortex's outcome words and the reward each stands for when no reward is given."""
SESSION_PREFIX = "lb1."


class ToolFailed(LearningError):
    """A command the bus answered with an error reply; `status` is its HTTP status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat()


def _round(value: float) -> float:
    return round(float(value), 4)


def strict_json(value: Any) -> Any:
    """A tool's result as strict JSON takes it, for every way out (MCP text and structured
    content, `/v1` bodies): a float that is not finite becomes null (no NaN or Infinity,
    which strict parsers refuse). Inputs are checked at the boundary, so this changes
    nothing in practice; it keeps the promise whatever a result holds."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    return value


def _text(field: str, value: Any, *, limit: int, required: bool = True) -> str:
    """A string every backend stores (engine.bounds.check_text), stripped, named `field`."""
    if not isinstance(value, str):
        raise InvalidInput(f"{field}: must be a string, got {type(value).__name__}")
    check_text(field, value)
    text: str = value.strip()
    if required and not text:
        raise InvalidInput(f"{field}: is required (a non-empty string)")
    if len(text) > limit:
        raise InvalidInput(f"{field}: at most {limit} characters")
    return text


def _learner(value: Any) -> str:
    """A learner name in the documented character set, or InvalidInput naming `learner`."""
    try:
        return check_learner_name(value)
    except InvalidInput as exc:
        raise InvalidInput(f"learner: {exc}") from None


def _whole(field: str, value: Any, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 10**12:
        raise InvalidInput(f"{field}: must be a whole number >= 0, got {value!r}")
    return value


CONTEXT_TEXTS = ("session_key", "channel", "provider", "model")
"""The context fields a run records in columns of their own."""

_REQUEST_KEYS = ("message", "tools_called", "toolsCalled")
"""Context keys that make a select request-aware (engine.context)."""


def _context(field: str, value: Any) -> dict[str, Any]:
    """A context object every backend stores (finite numbers, 64-bit integers, valid strings),
    its recorded fields checked under their own names (`context.session_key`)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInput(f"{field}: must be an object or null")
    context = dict(value)
    for key in CONTEXT_TEXTS:
        text = context.get(key)
        if isinstance(text, str):
            check_text(f"{field}.{key}", text)
    check_json(field, context)
    return context


def _context_text(context: Mapping[str, Any], key: str) -> str:
    value = context.get(key)
    return value[:MAX_ID_CHARS] if isinstance(value, str) else ""


def _string_list(field: str, value: Any, limit: int = 1000) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise InvalidInput(f"{field}: must be a list of non-empty strings or null")
    if len(value) > limit:
        raise InvalidInput(f"{field}: at most {limit} items")
    for i, item in enumerate(value):
        check_text(f"{field}[{i}]", item, MAX_ID_CHARS * 2)
    return list(value)


@dataclass(frozen=True)
class Session:
    """A gateway session: which learner, which session key, since when. Its id carries all
    three, so a session opened by one process can be ended by another (the gateway spawns one
    process per call when it has no shared connection)."""

    learner: str
    name: str
    started_at: int

    @property
    def session_id(self) -> str:
        raw = json.dumps([self.learner, self.name, self.started_at, uuid.uuid4().hex[:8]])
        return SESSION_PREFIX + base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @classmethod
    def parse(cls, session_id: Any) -> Session:
        text = _text("session_id", session_id, limit=MAX_SESSION_ID_CHARS)
        if not text.startswith(SESSION_PREFIX):
            raise NotFound(f"session_id: unknown session {text[:80]!r}")
        body = text[len(SESSION_PREFIX) :]
        try:
            data = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
            learner, name, started, _ = data
        except (ValueError, TypeError, binascii.Error):
            raise NotFound(f"session_id: unknown session {text[:80]!r}") from None
        if not isinstance(learner, str) or not isinstance(name, str):
            raise NotFound(f"session_id: unknown session {text[:80]!r}")
        if isinstance(started, bool) or not isinstance(started, int):
            raise NotFound(f"session_id: unknown session {text[:80]!r}")
        if not 0 <= started <= MAX_TIMESTAMP_MS:
            raise InvalidInput(
                f"session_id: its start time is out of range (0 to {MAX_TIMESTAMP_MS} ms)"
            )
        check_text("session_id: its session name", name, MAX_ID_CHARS)
        return cls(learner, name, started)


class LearningTools:
    """The tool implementations, bound to a command bus. Reads of a learner that does not
    exist raise NotFound and create nothing, as the learning API's reads do."""

    def __init__(self, bus: CommandBus, *, actor: Actor | None = None) -> None:
        self.bus = bus
        self.actor = actor or Actor("mcp", "mcp client", is_admin=True)

    def _service(self, learner: Any) -> LearningService:
        return self.bus.services.get(_learner(learner))

    def _existing(self, learner: Any) -> LearningService:
        return self.bus.services.get(_learner(learner), create=False)

    # -- OpenClaw's learning backend (qortex's tool names and shapes) ---------------------------

    def select(
        self,
        learner: Any,
        candidates: Any,
        context: Any = None,
        k: Any = 0,
        token_budget: Any = 0,
        min_pulls: Any = 0,
        seed_arms: Any = None,
        seed_boost: Any = None,
    ) -> dict[str, Any]:
        if not isinstance(candidates, list) or not candidates:
            raise InvalidInput("candidates: a non-empty list of {id, metadata, token_cost}")
        if len(candidates) > MAX_CANDIDATES:
            raise InvalidInput(f"candidates: at most {MAX_CANDIDATES}")
        arms: list[Arm] = []
        shown: dict[str, dict[str, Any]] = {}
        for i, raw in enumerate(candidates):
            where = f"candidates[{i}]"
            if not isinstance(raw, Mapping):
                raise InvalidInput(f"{where}: must be an object with an id")
            arm_id = _text(f"{where}.id", raw.get("id"), limit=512)
            metadata = raw.get("metadata") or {}
            if not isinstance(metadata, Mapping):
                raise InvalidInput(f"{where}.metadata: must be an object")
            check_json(f"{where}.metadata", metadata)
            cost_value = raw.get("token_cost")
            cost = 0 if cost_value is None else check_count(f"{where}.token_cost", cost_value)
            if cost > MAX_TOKEN_COST:
                raise InvalidInput(f"{where}.token_cost: at most {MAX_TOKEN_COST}")
            label = metadata.get("label")
            label = label if isinstance(label, str) and label.isprintable() else ""
            described = metadata.get("description")
            description = described[:MAX_DESCRIPTION_CHARS] if isinstance(described, str) else None
            try:
                arms.append(Arm(arm_id, cost, label[:512], description=description))
            except InvalidInput as exc:
                raise InvalidInput(f"{where}.id: {exc}") from None
            if arm_id in shown:
                raise InvalidInput(f"{where}.id: {arm_id!r} is listed twice")
            shown[arm_id] = {"id": arm_id, "metadata": dict(metadata), "token_cost": cost}
        ctx = _context("context", context)
        cap = _whole("k", k, 0)
        budget = _whole("token_budget", token_budget, 0)
        pulls = _whole("min_pulls", min_pulls, 0)
        seeds = _string_list("seed_arms", seed_arms)
        boost: float | None = None
        if seed_boost is not None:
            if isinstance(seed_boost, bool) or not isinstance(seed_boost, (int, float)):
                raise InvalidInput(f"seed_boost: must be a number > 0 or null, got {seed_boost!r}")
            boost = float(seed_boost)
        service = self._service(learner)
        effective = budget if budget > 0 else sum(a.token_cost for a in arms)
        selection, _ = service.select_run(
            arms,
            ctx,
            k=cap,
            token_budget=effective,
            min_pulls=pulls,
            seed_arm_ids=seeds,
            seed_boost=boost,
            session_key=_context_text(ctx, "session_key"),
            channel=_context_text(ctx, "channel"),
            provider=_context_text(ctx, "provider"),
            model=_context_text(ctx, "model"),
        )
        try:
            means = {v.arm_id: v.mean for v in service.posteriors()}
        except Unavailable:  # storage down: the run is spooled, the scores are the priors'
            means = {}
        out: dict[str, Any] = {
            "selected_arms": [shown[a] for a in selection.selected],
            "excluded_arms": [shown[a] for a in selection.excluded],
            "is_baseline": bool(selection.is_baseline),
            "scores": {a.id: _round(means.get(a.id, _prior_mean(a))) for a in arms},
            "token_budget": budget,
            "used_tokens": int(selection.used_tokens),
        }
        fallback = selection.fallback or ""
        if fallback.startswith("storage unavailable"):  # why every candidate is in
            out["fallback"] = fallback
        if any(key in ctx for key in _REQUEST_KEYS):
            # a caller that sends the request gets the deferred tools, the tools its session
            # took on outside the cached prefix and what the select did with the session's
            # set too; the others keep the answer's shape as qortex 0.8.1 gives it
            out["deferred_arms"] = [shown[a] for a in selection.deferred]
            out["added_arms"] = [shown[a] for a in selection.added]
            out["session"] = selection.session
            out["session_reason"] = selection.session_reason or None
        return out

    def observe(
        self,
        learner: Any,
        arm_id: Any,
        outcome: Any = "",
        reward: Any = None,
        context: Any = None,
        loaded: Any = None,
    ) -> dict[str, Any]:
        """One arm's outcome; `loaded`: the select left the arm out (a deferred tool) and the
        model loaded it through tool search, so the run counts it as included."""
        arm = _text("arm_id", arm_id, limit=512)
        try:
            parse_arm_id(arm)
        except InvalidInput as exc:
            raise InvalidInput(f"arm_id: {exc}") from None
        word = "" if outcome is None else outcome
        if word not in ("", *OUTCOME_REWARDS):
            raise InvalidInput(
                f"outcome: must be accepted, rejected or partial, got {str(outcome)[:40]!r}"
            )
        if reward is None:
            if not word:
                raise InvalidInput("reward: give a reward in [0, 1] or an outcome")
            value = OUTCOME_REWARDS[word]
        else:
            if isinstance(reward, bool) or not isinstance(reward, (int, float)):
                raise InvalidInput(f"reward: must be a number in [0, 1], got {reward!r}")
            value = float(reward)
            if not math.isfinite(value) or not 0.0 <= value <= 1.0:
                raise InvalidInput(f"reward: must be a number in [0, 1], got {reward!r}")
        ctx = _context("context", context)
        if loaded is not None and not isinstance(loaded, bool):
            raise InvalidInput(f"loaded: must be true, false or null, got {loaded!r:.40}")
        referenced = value > 0 if not word else word != "rejected"
        service = self._service(learner)
        result = service.observe_arm(
            arm,
            value,
            referenced=referenced,
            session_key=_context_text(ctx, "session_key"),
            loaded=bool(loaded),
        )
        post = result.posterior
        out: dict[str, Any] = {
            "arm_id": arm,
            "alpha": _round(post.alpha),
            "beta": _round(post.beta),
            "mean": _round(post.mean),
            "pulls": int(post.pulls),
        }
        if result.spooled:  # storage down: recorded once it answers (the posterior: before)
            out["spooled"] = True
        return out

    def posteriors(self, learner: Any, context: Any = None, arm_ids: Any = None) -> dict[str, Any]:
        name = _learner(learner)
        _context("context", context)  # recorded with runs only: it does not split posteriors
        wanted = _string_list("arm_ids", arm_ids, limit=MAX_CANDIDATES)
        views = self._existing(name).posteriors()
        if wanted is not None:
            keep = set(wanted)
            views = [v for v in views if v.arm_id in keep]
        return {"learner": name, "posteriors": {v.arm_id: _posterior(v) for v in views}}

    def metrics(self, learner: Any, window: Any = None) -> dict[str, Any]:
        """Totals over the learner's arms; `window` is accepted and, as in qortex, ignored."""
        name = _learner(learner)
        _whole("window", window, 0)
        service = self._existing(name)
        views = service.posteriors()
        pulls = sum(v.posterior.pulls for v in views)
        reward = sum(_total_reward(v) for v in views)
        summary = service.summary()
        runs = summary.baseline_runs + summary.selected_runs
        explore = summary.baseline_runs / runs if runs else service.config.baseline_rate
        return {
            "learner": name,
            "total_pulls": pulls,
            "total_reward": _round(reward),
            "accuracy": _round(reward / max(pulls, 1)),
            "arm_count": len(views),
            "explore_ratio": _round(explore),
        }

    def session_start(self, learner: Any, session_name: Any) -> dict[str, Any]:
        name = _learner(learner)
        key = _text("session_name", session_name, limit=256)
        self._service(name)  # a learner comes into being with its first session
        return {"session_id": Session(name, key, self.bus.clock()).session_id, "learner": name}

    def session_end(self, session_id: Any) -> dict[str, Any]:
        session = Session.parse(session_id)
        try:
            service = self._existing(session.learner)
        except LearningError:
            raise NotFound(f"session_id: unknown learner {session.learner[:80]!r}") from None
        runs = service.session_runs(session.name, session.started_at)
        selected: list[str] = []
        outcomes: dict[str, str] = {}
        for run in runs:
            for arm in run.arms:
                if not arm.included:
                    continue
                if arm.arm_id not in selected:
                    selected.append(arm.arm_id)
                if arm.reward is not None:
                    outcomes[arm.arm_id] = (
                        "accepted"
                        if arm.reward >= 1.0
                        else "rejected"
                        if arm.reward <= 0.0
                        else "partial"
                    )
                elif arm.referenced:
                    outcomes[arm.arm_id] = "accepted"
        return {
            "session_id": str(session_id).strip(),
            "learner": session.learner,
            "selected_arms": selected,
            "outcomes": outcomes,
            "started_at": _iso(session.started_at),
            "ended_at": _iso(self.bus.clock()),
        }

    def reset(self, learner: Any, arm_ids: Any = None, context: Any = None) -> dict[str, Any]:
        name = _learner(learner)
        ids = _string_list("arm_ids", arm_ids)
        _context("context", context)
        if ids == []:
            raise InvalidInput("arm_ids: name at least one arm, or null for every arm")
        reply = self._dispatch(
            ResetCommand(arms=tuple(ids) if ids else None, confirm=True), learner=name
        )
        return {
            "learner": reply["learner"],
            "reset_count": reply["reset_count"],
            "arm_ids": list(reply["arm_ids"]),
        }

    # -- our own /learning commands --------------------------------------------------------------

    def _dispatch(
        self, command: Command, *, learner: str | None = None, text: bool = False
    ) -> dict[str, Any]:
        invocation = Invocation(
            SURFACE, self.actor, command, learner=learner, conversation="", interactive=False
        )
        reply = self.bus.dispatch(invocation)
        if reply.kind is ReplyKind.ERROR:
            raise ToolFailed(render_text(reply), kind_of_code(reply.error_code).http_status)
        data = reply_data_json(reply)
        data["text"] = render_text(reply)
        return data

    def run_command(self, command: Command, learner: Any = None) -> str:
        """Any registered command, answered with its reply's text (the tools a command's
        form declares)."""
        return self._reply_text(command, learner)

    def _reply_text(self, command: Command, learner: Any) -> str:
        name = None if learner is None else _learner(learner)
        return str(self._dispatch(command, learner=name)["text"])

    def learning_status(self, arm: Any = None, learner: Any = None) -> str:
        query = None if arm is None else _text("arm", arm, limit=512)
        return self._reply_text(StatusCommand(arm=query), learner)

    def learning_reward(
        self, arm: Any = None, value: Any = 1.0, reason: Any = None, learner: Any = None
    ) -> str:
        if arm is None:
            raise InvalidInput("arm: name the arm (full id or label) to reward")
        query = _text("arm", arm, limit=512)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidInput(f"value: must be a number in [0, 1], got {value!r}")
        number = float(value)
        if not math.isfinite(number) or not 0.0 <= number <= 1.0:
            raise InvalidInput(f"value: must be a number in [0, 1], got {value!r}")
        why = None if reason is None else _text("reason", reason, limit=500, required=False)
        return self._reply_text(RewardCommand(arm=query, value=number, reason=why), learner)

    def learning_reset(
        self,
        arms: Any = None,
        undo: Any = False,
        confirm: Any = False,
        learner: Any = None,
    ) -> str:
        ids = _string_list("arms", arms)
        if ids == []:
            raise InvalidInput("arms: name at least one arm, or leave it out for every arm")
        for name, flag in (("undo", undo), ("confirm", confirm)):
            if not isinstance(flag, bool):
                raise InvalidInput(f"{name}: must be true or false")
        command = ResetCommand(arms=tuple(ids) if ids else None, undo=undo, confirm=confirm)
        return self._reply_text(command, learner)

    def learning_phase(self, phase: Any = None, confirm: Any = False, learner: Any = None) -> str:
        target: Phase | None = None
        if phase is not None:
            if phase not in ("passive", "active"):
                raise InvalidInput(f"phase: must be passive or active, got {str(phase)[:40]!r}")
            target = Phase(phase)
        if not isinstance(confirm, bool):
            raise InvalidInput("confirm: must be true or false")
        return self._reply_text(PhaseCommand(target, confirm=confirm), learner)

    def learning_config(self, settings: Any = None, learner: Any = None) -> str:
        """/learning config: the learner's stored settings, or a change to them (validated
        by the learner's configuration, like `learning-bot learner set`)."""
        if settings is not None and (
            not isinstance(settings, dict)
            or not settings
            or not all(isinstance(k, str) and k for k in settings)
        ):
            raise InvalidInput(
                'settings: an object of setting names and values (e.g. {"halfLife": 50}), '
                "or null to show them"
            )
        changes = tuple(settings.items()) if settings else ()
        return self._reply_text(ConfigCommand(changes), learner)

    def learning_help(self, topic: Any = None) -> str:
        subject = None if topic is None else _text("topic", topic, limit=64).lower()
        names = command_names()
        if subject is not None and subject not in names:
            raise InvalidInput(f"topic: no help for {subject[:40]!r}; topics: {', '.join(names)}")
        return self._reply_text(HelpCommand(subject), None)


def _prior_mean(arm: Arm) -> float:
    alpha, beta = prior_parameters(parse_arm_id(arm.id).type)
    return alpha / (alpha + beta)


def _total_reward(view: ArmView) -> float:
    """The rewards an arm has received since its last reset, as recorded (forgetting decays
    alpha and beta, not this). A view that does not carry them is read as pulls - (beta - 1):
    every prior has beta 1 and each plain update adds 1 - r to beta."""
    if view.rewards is not None:
        return view.rewards
    post = view.posterior
    return max(0.0, post.pulls - (post.beta - 1.0))


def _posterior(view: ArmView) -> dict[str, Any]:
    post = view.posterior
    return {
        "alpha": _round(post.alpha),
        "beta": _round(post.beta),
        "pulls": int(post.pulls),
        "total_reward": _round(_total_reward(view)),
        "last_updated": _iso(post.last_updated or 0),
        "mean": _round(post.mean),
    }


QORTEX_TOOLS = (
    "qortex_learning_select",
    "qortex_learning_observe",
    "qortex_learning_posteriors",
    "qortex_learning_metrics",
    "qortex_learning_session_start",
    "qortex_learning_session_end",
    "qortex_learning_reset",
)
DECLARED_TOOLS = tuple(s.form.tool for s in specs() if s.form is not None and s.form.tool)
"""The tools the registry's commands declare in their forms (adapters.mcp.server)."""
OWN_TOOLS = (
    "learning_status",
    "learning_reward",
    "learning_reset",
    "learning_phase",
    "learning_config",
    "learning_help",
    *DECLARED_TOOLS,
)
"""Our own /learning tools: the six above, then those the registry's commands declare."""
