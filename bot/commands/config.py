"""`/learning config [<key> <value> [learner]]`: the learner's stored settings, or a change
to one (admins). A learner's settings are its own state, changed only by this command and
its equivalents (`learning-bot learner set`, the HTTP settings route, the MCP tool)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from learning_bot.bot.commands.base import (
    ADMIN_LIST_HINT,
    CHAT_SURFACES,
    CommandSpec,
    Context,
    Form,
    Gate,
    Option,
    Terminal,
    UsageError,
    own_learner,
    setting_value,
    shown,
    unexpected,
)
from learning_bot.bot.formatting import command_prefix
from learning_bot.bot.invocation import Command, Invocation
from learning_bot.bot.replies import Fields, Reply, ReplyKind, Text
from learning_bot.engine.errors import Forbidden, InvalidConfig, InvalidInput

if TYPE_CHECKING:
    from learning_bot.engine.service import LearningService


@dataclass(frozen=True, slots=True)
class ConfigCommand(Command):
    """Show the learner's stored settings (no changes), or change them."""

    changes: tuple[tuple[str, Any], ...] = ()
    """(key, value) pairs, keys camelCase or snake_case as the config file takes them."""
    learner: str | None = None
    """The learner to show or change; None: the one this conversation is served by."""


def parse(rest: list[str]) -> ConfigCommand:
    if not rest:
        return ConfigCommand()
    if len(rest) == 1:
        raise UsageError(
            f"'config {shown(rest[0])}' needs a value, e.g. config halfLife 50", "config"
        )
    if len(rest) > 3:
        raise unexpected(rest[3], "config")
    key = rest[0]
    if key.lower() == "phase":
        raise UsageError("the phase has its own command: phase passive|active", "config")
    learner = rest[2] if len(rest) == 3 else None
    return ConfigCommand(((key, setting_value(rest[1])),), learner)


def access(gate: Gate, invocation: Invocation, command: ConfigCommand) -> None:
    """Settings are for admins to change; naming a learner other than the conversation's
    in a chat workspace (where admins are the workspace's) needs the allow-list, so one
    workspace's admins cannot change another's learner."""
    if command.changes:
        if invocation.actor.is_guest:
            raise Forbidden("Guests can look at settings, but cannot change them.")
        if not gate.is_admin(invocation):
            raise Forbidden(
                f"Only admins can change a learner's settings. Ask a workspace admin, or "
                f"{ADMIN_LIST_HINT}."
            )
    if (
        command.learner is not None
        and invocation.surface in CHAT_SURFACES
        and not gate.on_allow_list(invocation)
    ):
        raise Forbidden(
            f"Naming a learner in config is for operators: {ADMIN_LIST_HINT}, or leave "
            "the learner out to use this conversation's."
        )


def run(ctx: Context, command: ConfigCommand) -> Reply:
    """Show the learner's settings, or change them through LearningService.set_settings
    (the one validation, shared with `learning-bot learner set`). Setting what is already
    stored writes nothing and says so."""
    service, actor, surface = ctx.service(), ctx.actor, ctx.surface
    service.refresh(force=True)
    before = service.config.to_dict(complete=True)
    if not command.changes:
        return _settings_reply(
            service, ReplyKind.INFO, f"Settings of learner '{service.learner}'.", surface
        )
    changes = dict(command.changes)
    if len(changes) != len(command.changes):
        raise InvalidInput("settings: a key is given twice")
    try:
        unchanged = (
            "phase" not in changes
            and service.config.merged(changes).to_dict(complete=True) == before
        )
    except InvalidConfig:
        unchanged = False  # set_settings refuses it with the field named
    if unchanged:
        return _settings_reply(
            service,
            ReplyKind.INFO,
            f"Learner '{service.learner}' already has "
            + ", ".join(f"{k} = {json.dumps(v)}" for k, v in command.changes)
            + "; nothing changed.",
            surface,
            changed=(),
        )
    service.set_settings(changes, actor=actor.id)
    after = service.config.to_dict(complete=True)
    changed = tuple(k for k in sorted(after) if after[k] != before.get(k))
    text = f"Learner '{service.learner}' settings changed: " + ", ".join(
        f"{k} {json.dumps(before.get(k))} -> {json.dumps(after[k])}" for k in changed
    )
    return _settings_reply(service, ReplyKind.OK, text, surface, changed=changed)


def _settings_reply(
    service: LearningService,
    kind: ReplyKind,
    text: str,
    surface: str,
    changed: tuple[str, ...] | None = None,
) -> Reply:
    stored = service.config.to_dict(complete=True)
    stored.pop("phase", None)
    rows = tuple((key, json.dumps(stored[key])) for key in sorted(stored))
    data: dict[str, Any] = {"learner": service.learner, "settings": stored}
    if changed is not None:
        data["changed"] = list(changed)
    return Reply(
        kind,
        (
            Text(text),
            Fields(rows),
            Text(f"Change one with {command_prefix(surface)} config <key> <value>.", muted=True),
        ),
        text,
        data=data,
    )


# -- the declaration -------------------------------------------------------------------


def _from_options(values: Mapping[str, Any]) -> ConfigCommand:
    name, raw = values["key"], values["value"]
    if (name is None) != (raw is None):
        raise InvalidInput("give both key and value to change a setting, or neither to show")
    return ConfigCommand(((name, setting_value(raw)),) if name and raw else ())


SPEC = CommandSpec(
    name="config",
    type=ConfigCommand,
    run=run,
    order=50,
    grammar=("config [<key> <value> [learner]]",),
    help=(
        "{cmd} config [<key> <value> [learner]] — shows the learner's stored settings, or "
        "changes one (e.g. config halfLife 50, config policy seed). Every replica takes the "
        "change at its next select. Changing settings is for admins."
    ),
    parse=parse,
    access=access,
    guards_reads=True,
    mutating=lambda command: bool(command.changes),
    learner=own_learner,
    from_json=lambda d: ConfigCommand(tuple((str(k), v) for k, v in d["changes"]), d["learner"]),
    terminal=Terminal(
        "config — show the learner's stored settings, or change one (admins; audited; every "
        "replica takes it at its next select)",
        "[<key> <value> [learner]]: e.g. config halfLife 50, config policy seed; values are "
        "read as JSON, else as text (the same as `learner set`)",
    ),
    form=Form(
        "Show the learner's settings, or change one (admins)",
        (
            Option(
                "key",
                str,
                "the setting to change, e.g. halfLife or policy (leave out to show them)",
                low=1,
                high=64,
            ),
            Option(
                "value", str, "its new value, e.g. 50 or seed (JSON, else text)", low=1, high=1000
            ),
        ),
        build=_from_options,
    ),
)
