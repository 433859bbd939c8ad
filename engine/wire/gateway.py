"""The wire types of OpenClaw's learning backend: the arguments of the `qortex_learning_*`
tools, which the MCP tools take and the `/v1` REST routes take as their bodies (with qortex's
names). The MCP tools' input schemas and the `/v1` body checks are derived from these."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from learning_bot.engine.wire.declare import wire, wire_type

LEARNER = "Learner name (one learner per agent deployment, e.g. 'openclaw')."
CONTEXT = (
    "Run context {session_key, channel, provider, model, phase, message, tools_called, "
    "loaded}. Recorded with the run (the message as its length only). A select's message, "
    "channel, model and tools_called feed the context-aware draw; an observe's `loaded` names "
    "the deferred arms the model loaded through tool search. Observes attach to the latest "
    "select of the same session_key."
)


@wire_type(documented=False)
@dataclass(frozen=True)
class Candidate:
    """An arm on offer to `qortex_learning_select`."""

    id: str = wire()
    metadata: dict[str, Any] | None = wire(default=None)
    token_cost: int | None = wire(default=None)


@wire_type(documented=False)
@dataclass(frozen=True)
class GatewaySelect:
    """`qortex_learning_select` and `POST /v1/learning/select`."""

    learner: str = wire(doc=LEARNER)
    candidates: list[dict[str, Any]] = wire(
        shape=Candidate,
        doc="The arms on offer: [{id: 'tool:fs:Read' | 'skill:<name>:main' | "
        "'file:workspace:<path>' | ..., metadata: {type, category, label, description}, "
        "token_cost: int}].",
    )
    context: dict[str, Any] | None = wire(default=None, doc=CONTEXT)
    k: int | None = wire(default=0, doc="At most k arms (seeds are kept); 0 or null: no cap.")
    token_budget: int | None = wire(
        default=0, doc="Token budget for the selected arms; 0: unlimited."
    )
    min_pulls: int | None = wire(
        default=0, doc="Arms observed fewer times than this are always selected."
    )
    seed_arms: list[str] | None = wire(
        default=None, doc="Arm ids never excluded; null: the learner's configured seeds."
    )
    seed_boost: float | None = wire(
        default=None, doc="Seed arms seen for the first time start at Beta(seed_boost, 1)."
    )


@wire_type(documented=False)
@dataclass(frozen=True)
class GatewayObserve:
    """`qortex_learning_observe` and `POST /v1/learning/observe`."""

    learner: str = wire(doc=LEARNER)
    arm_id: str = wire(doc="The arm id, e.g. 'tool:fs:Read'.")
    outcome: Literal["accepted", "rejected", "partial", ""] | None = wire(
        default="", doc="accepted, rejected or partial."
    )
    reward: float | None = wire(default=None, doc="Reward in [0, 1]; null: taken from the outcome.")
    context: dict[str, Any] | None = wire(default=None, doc=CONTEXT)
    loaded: bool | None = wire(
        default=None,
        doc="true: the select left this arm out (deferred_arms) and the model loaded it "
        "through tool search; the run then counts it as included.",
    )


@wire_type(documented=False)
@dataclass(frozen=True)
class GatewayPosteriors:
    """`qortex_learning_posteriors` (a GET of `/v1`: no body)."""

    learner: str = wire(doc=LEARNER)
    context: dict[str, Any] | None = wire(default=None, doc=CONTEXT)
    arm_ids: list[str] | None = wire(default=None, doc="Only these arms; null: every arm.")


@wire_type(documented=False)
@dataclass(frozen=True)
class GatewayMetrics:
    """`qortex_learning_metrics` (a GET of `/v1`: no body)."""

    learner: str = wire(doc=LEARNER)
    window: int | None = wire(default=None, doc="Accepted and ignored.")


@wire_type(documented=False)
@dataclass(frozen=True)
class GatewaySessionStart:
    """`qortex_learning_session_start` and `POST /v1/learning/sessions/start`."""

    learner: str = wire(doc=LEARNER)
    session_name: str = wire(doc="The agent's session key.")


@wire_type(documented=False)
@dataclass(frozen=True)
class GatewaySessionEnd:
    """`qortex_learning_session_end` and `POST /v1/learning/sessions/end`."""

    session_id: str = wire(doc="From qortex_learning_session_start.")


@wire_type(documented=False)
@dataclass(frozen=True)
class GatewayReset:
    """`qortex_learning_reset` and `POST /v1/learning/reset`."""

    learner: str = wire(doc=LEARNER)
    arm_ids: list[str] | None = wire(default=None, doc="null: every arm.")
    context: dict[str, Any] | None = wire(default=None, doc="Ignored.")
