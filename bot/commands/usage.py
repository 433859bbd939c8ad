"""The help and the usage errors, built from the registry: one wording for every surface."""

from __future__ import annotations

from typing import Any

from learning_bot.bot.commands import registry
from learning_bot.bot.commands.base import CommandSpec, UsageError
from learning_bot.bot.formatting import TERMINAL_SURFACES, command_prefix
from learning_bot.bot.replies import Heading, Reply, ReplyKind, Text


def help_text(topic: str, surface: str = "") -> str:
    """The help paragraph of one command, as the surface types it. A topic that names no
    command (whatever way it arrived: typed, a tool argument, a stored command) is a usage
    error naming it, never a KeyError."""
    spec = registry.named(topic)
    if spec is None:
        raise UsageError(unknown_topic(topic), "help")
    return spec.help.format(cmd=command_prefix(surface))


def unknown_topic(topic: object) -> str:
    """The message for a help topic that names no command."""
    shown = str(topic)[:40]
    return f"no help for {shown!r}; commands: {', '.join(registry.command_names())}"


def help_entry(name: str, surface: str = "") -> dict[str, str]:
    """One command's help as data: {name, usage, summary} (the paragraph split at its dash)."""
    usage, _, summary = help_text(name, surface).partition(" — ")
    return {"name": name, "usage": usage, "summary": summary}


def help_reply(topic: str | None, surface: str = "") -> Reply:
    """The help: every command, or the one `topic` names (a usage error for a topic that
    names none). Its data, what `--json` prints: {commands: [help_entry...], grammar} or
    {command: help_entry}."""
    prefix = command_prefix(surface)
    if topic:
        name = topic.lower()
        if registry.named(name) is None:
            return usage_reply(unknown_topic(topic), "help", surface)
        text = help_text(name, surface)
        data: dict[str, Any] = {"command": help_entry(name, surface)}
        return Reply(ReplyKind.INFO, (Text(text),), f"help {name}", data=data)
    lines = grammar(surface)
    hints = [f"{prefix} help <command> explains one command."]
    elsewhere = [s.name for s in registry.typed() if not _offered(s, surface)]
    if elsewhere:
        hints.append(f"{', '.join(elsewhere)}: typed in a Slack or Discord channel.")
    blocks = (
        Heading(f"{prefix} — the learning layer's chat commands"),
        Text("\n".join(lines)),
        Text("\n".join(hints), muted=True),
    )
    data = {
        "commands": [help_entry(s.name, surface) for s in registry.typed() if _offered(s, surface)],
        "grammar": lines,
    }
    return Reply(ReplyKind.INFO, blocks, f"{prefix} help", data=data)


def _offered(spec: CommandSpec[Any], surface: str) -> bool:
    """Whether the surface offers the command: a terminal only those with a terminal form
    (a channel's subscriptions are typed in the channel)."""
    return spec.terminal is not None or surface not in TERMINAL_SURFACES


def grammar(surface: str = "") -> list[str]:
    """The command grammar as the surface types it (the commands it offers)."""
    prefix = command_prefix(surface)
    return [
        f"{prefix} {line}" for s in registry.typed() if _offered(s, surface) for line in s.grammar
    ]


def usage_reply(message: str, command: str | None = None, surface: str = "") -> Reply:
    """A usage error: the message, then the grammar of the command it concerns (or all)."""
    known = command is not None and registry.named(command) is not None
    lines = [help_text(command, surface)] if known and command else grammar(surface)
    return Reply(
        ReplyKind.ERROR,
        (Text(message), Text("Usage:\n" + "\n".join(lines), muted=True)),
        message,
        data={"error": message, "errorCode": "usage"},
        usage=tuple(lines),
    )


def usage_grammar(reply: Reply) -> str | None:
    """A usage error's grammar when it concerns one command: the words of its help paragraph,
    not the explanation after the dash; None for the whole grammar or no usage."""
    if reply.usage is None or len(reply.usage) != 1:
        return None
    return reply.usage[0].split(" — ", 1)[0]
