"""The wire types of the operator's routes: rewards, resets, the phase, settings and
commands, with their answers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from learning_bot.engine.bounds import MAX_RESET_ARMS
from learning_bot.engine.wire.declare import PHASES, Answer, encode, wire, wire_type


@wire_type()
@dataclass(frozen=True)
class Error:
    """Every error answer."""

    error: str = wire()


@wire_type()
@dataclass(frozen=True)
class RewardRequest:
    """`POST reward`'s body: a manual (lagged) reward for one arm."""

    arm_id: str = wire(aliases=("armId",))
    outcome: Literal["accepted", "rejected"] = wire(default="accepted")
    reward: float | None = wire(default=None, nullable=False, minimum=0, maximum=1)
    reason: str | None = wire(default=None, nullable=False)
    actor: str | None = wire(default=None, nullable=False)

    def to_json(self) -> dict[str, Any]:
        return encode(self, always=_OUTCOME)


_OUTCOME = frozenset({"outcome"})


@wire_type(required=("ok", "arm_id", "alpha", "beta", "mean", "pulls"))
@dataclass(frozen=True)
class RewardResult(Answer):
    """`POST reward`'s answer (OpenAPI `RewardResult`)."""

    ok: bool = wire()
    arm_id: str = wire(default="")
    alpha: float | None = wire(default=None, nullable=False)
    beta: float | None = wire(default=None, nullable=False)
    mean: float | None = wire(default=None, nullable=False)
    pulls: int | None = wire(default=None, nullable=False)
    reward: float | None = wire(default=None, nullable=False)
    lagged: bool = wire(default=True)


@wire_type(tolerated=("confirm",))
@dataclass(frozen=True)
class ResetRequest:
    """`POST reset`'s body: the arms to reset (none: every arm). `confirm: true`, which
    clients of the route's first version sent, is accepted and ignored: a reset acts at once
    (the calling client confirms on its side)."""

    arm_ids: tuple[str, ...] | None = wire(
        default=None, nullable=False, aliases=("armIds",), minItems=1, maxItems=MAX_RESET_ARMS
    )


@wire_type("UndoRequest")
@dataclass(frozen=True)
class UndoRequest:
    """`POST reset/undo`'s body: nothing."""


@wire_type(required="all")
@dataclass(frozen=True)
class ResetResult:
    learner: str = wire()
    reset_count: int = wire()
    arm_ids: tuple[str, ...] = wire()


@wire_type()
@dataclass(frozen=True)
class PhaseRequest:
    phase: str = wire(enum=PHASES)
    confirm: bool = wire(default=False)


@wire_type(required=("phase", "previous", "changed"))
@dataclass(frozen=True)
class PhaseResult(Answer):
    """`POST phase`'s answer (OpenAPI `PhaseResult`)."""

    phase: str = wire()
    previous: str = wire(default="")
    changed: bool = wire(default=False)
    warning: str | None = wire(default=None)
    bootstrapped_traces: int = wire("bootstrappedTraces", default=0)


@wire_type()
@dataclass(frozen=True)
class SettingsRequest:
    settings: Mapping[str, Any] = wire(minProperties=1)


@wire_type(required="all")
@dataclass(frozen=True)
class SettingsResult:
    learner: str = wire()
    settings: Mapping[str, Any] = wire()
    changed: tuple[str, ...] = wire()


@wire_type()
@dataclass(frozen=True)
class CommandRequest:
    """`POST command`'s body: a command's text, or the token of a confirmation to confirm or
    cancel."""

    text: str = wire(default="", maxLength=1000)
    actor: str = wire(default="api", minLength=1, maxLength=128)
    conversation: str = wire(default="", maxLength=256)
    confirm: str | None = wire(default=None, nullable=False, minLength=1, maxLength=64)
    cancel: str | None = wire(default=None, nullable=False, minLength=1, maxLength=64)
    wording: str = wire(default="api", enum=["api", "terminal"])


@wire_type(required="all")
@dataclass(frozen=True)
class Reply(Answer):
    """A `/learning` command's reply (OpenAPI `Reply`): `summary` is its text, `data` its
    figures (status: phase, traces, arms...)."""

    kind: str = wire(enum=["ok", "info", "error", "confirm"])
    summary: str = wire(default="")
    visibility: str = wire(default="private", enum=["private", "public"])
    blocks: tuple[Mapping[str, Any], ...] = wire(default=())
    data: Mapping[str, Any] = wire(default_factory=dict)
