"""Running one `/learning` command from the shell: against the local command bus, or against
a running server's `/command` route (`--url`), with the terminal's confirmation prompt."""

from __future__ import annotations

import getpass
import json
import os
import sys
import urllib.parse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from learning_bot.adapters.terminal.render import render
from learning_bot.adapters.terminal.style import Style
from learning_bot.bot.commands import (
    CancelCommand,
    Command,
    ConfirmCommand,
    UsageError,
    asks_confirmation,
    parse_command,
)
from learning_bot.bot.commands.usage import usage_grammar, usage_reply
from learning_bot.bot.errors import kind_of_code
from learning_bot.bot.invocation import Actor, Invocation
from learning_bot.bot.replies import Reply, ReplyKind
from learning_bot.bot.shapes import reply_data_json, reply_from_json

if TYPE_CHECKING:
    from learning_bot.bot.bus import CommandBus

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
API_BASE = "/__openclaw__/api/learning"


class CliError(Exception):
    """A one-line error for stderr, with its exit code (and at most one hint line)."""

    def __init__(self, message: str, code: int = EXIT_ERROR, hint: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.hint = hint


Send = Callable[[Command | str], Reply]


def local_actor() -> Actor:
    """Whoever runs the command on this machine: an admin of their own database."""
    try:
        user = getpass.getuser()
    except Exception:
        user = "local"
    return Actor(id=f"local:{user}", name=user, is_admin=True)


def local_sender(
    bus: CommandBus, conversation: str = "", surface: str = "terminal", *, interactive: bool = True
) -> Send:
    """Commands to the local bus; not `interactive`, a command that asks for confirmation is
    checked and answers its question without storing anything (a preview)."""
    actor = local_actor()

    def send(command: Command | str) -> Reply:
        return bus.dispatch(
            Invocation(surface, actor, command, conversation=conversation, interactive=interactive)
        )

    return send


def api_base(url: str) -> str:
    """The API's base under a server's `--url` (http or https, with a host); CliError
    (usage) for anything else."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError on a port that is not a number)
    except ValueError as exc:
        raise CliError(f"--url: not a valid URL: {exc}", EXIT_USAGE) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CliError(
            f"--url: expected http:// or https:// and a host, got {url!r}",
            EXIT_USAGE,
            hint="e.g. --url http://127.0.0.1:8787",
        )
    base = url.rstrip("/")
    return base if API_BASE in base else base + API_BASE


def post_json(base: str, endpoint: str, body: dict[str, Any]) -> Any:
    """POST `body` as JSON to `endpoint` of the running server whose API is at `base`
    (LEARNING_BOT_API_TOKEN as bearer): its decoded answer, or a CliError with what the server
    said, or that it cannot be reached."""
    import urllib.error  # with http.client and ssl, only for --url
    import urllib.request

    token = os.environ.get("LEARNING_BOT_API_TOKEN", "").strip()
    request = urllib.request.Request(
        endpoint,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"}
        | ({"Authorization": f"Bearer {token}"} if token else {}),
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("error", str(exc))
        except ValueError:
            message = str(exc)
        # A request the server refuses as invalid is bad usage, as the same line run here is.
        code = EXIT_USAGE if exc.code == 400 else EXIT_ERROR
        raise CliError(f"{base}: {message}", code) from None
    except (urllib.error.URLError, OSError) as exc:
        raise CliError(f"cannot reach {base}: {getattr(exc, 'reason', exc)}") from None


def remote_sender(url: str, learner: str | None, conversation: str = "") -> Send:
    """Commands sent to a running server's /command route (LEARNING_BOT_API_TOKEN as bearer)."""
    base = api_base(url)
    endpoint = base + "/command"
    if learner:
        endpoint += "?" + urllib.parse.urlencode({"learner": learner})
    user = local_actor().name

    def send(command: Command | str) -> Reply:
        body: dict[str, Any] = {"actor": user, "conversation": conversation, "wording": "terminal"}
        if isinstance(command, ConfirmCommand):
            body["confirm"] = command.token
        elif isinstance(command, CancelCommand):
            body["cancel"] = command.token
        else:
            body["text"] = str(command)
        return reply_from_json(post_json(base, endpoint, body))

    return send


def run_chat_command(
    send: Send,
    text: str,
    *,
    confirm: bool = False,
    interactive: bool | None = None,
    as_json: bool = False,
    preview: Send | None = None,
) -> int:
    """Run one command (the words after `learning-bot`), print the reply (or, `as_json`, its
    data as JSON for scripts), return the exit code. A destructive command asks on a
    terminal, or needs `confirm`; off a terminal without `confirm` its arguments are checked
    first (an unknown arm is named, not a missing confirmation), by `preview` (a sender that
    stores nothing for a question) when given, else by `send` and the question cancelled."""
    try:
        command = parse_command(text)
    except UsageError as exc:
        raise CliError(str(exc), EXIT_USAGE, hint=usage_hint(exc)) from None
    tty = sys.stdin.isatty() if interactive is None else interactive
    if asks_confirmation(command) and not (confirm or tty) and preview:
        # Checked, then refused: a refused command writes nothing (no pending confirmation,
        # no audit or rate-limit row).
        reply = preview(text)
        if reply.kind is ReplyKind.CONFIRM:
            raise _not_on_a_terminal(reply)
    else:
        reply = send(text)
    if reply.kind is ReplyKind.CONFIRM:
        token = reply.actions[0].token
        if confirm:
            reply = send(ConfirmCommand(token))
        elif tty:
            print(render(reply, Style.for_stream(sys.stdout)).rsplit("\n", 1)[0])
            answer = input("Type yes (or confirm) to confirm: ").strip().lower()
            yes = answer in ("y", "yes", "confirm")
            reply = send(ConfirmCommand(token) if yes else CancelCommand(token))
        else:
            send(CancelCommand(token))
            raise _not_on_a_terminal(reply)
    if reply.kind is ReplyKind.ERROR:
        # The terminal is the operator's own: it shows the cause a chat reply keeps private.
        message = reply.detail or reply.summary
        usage = usage_grammar(reply)
        hint = _usage_line(usage) if reply.error_code == "usage" and reply.usage else None
        raise CliError(message, kind_of_code(reply.error_code).exit_code, hint=hint)
    if as_json:
        print(json.dumps(reply_data_json(reply), indent=2, ensure_ascii=False))
    else:
        print(render(reply, Style.for_stream(sys.stdout)))
    return EXIT_OK


def _not_on_a_terminal(question: Reply) -> CliError:
    return CliError(
        f"{question.summary.split('?')[0]}? — not on a terminal",
        EXIT_USAGE,
        hint="add --confirm to do it without asking",
    )


def usage_hint(exc: UsageError) -> str:
    """The one hint line of a usage error: the grammar of the command it concerns."""
    return _usage_line(usage_grammar(usage_reply(str(exc), exc.command, "terminal")))


def _usage_line(grammar: str | None) -> str:
    """`usage: <grammar>` for one command, else where the whole grammar is."""
    if grammar is not None:
        return f"usage: {grammar} (see `learning-bot {grammar.split()[1]} --help`)"
    return "see `learning-bot --help`"
