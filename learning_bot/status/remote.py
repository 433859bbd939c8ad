"""`status --url`: the running server's reply, asked over HTTP/1.1 on a plain socket.

It imports json and the socket's C module (`_socket`, which the `socket` module wraps), the
URL parser, and nothing of the local read: `socket` itself builds its enums and imports
`selectors` at import (about 2 ms), for nothing used here."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

TYPE_CHECKING = False
if TYPE_CHECKING:
    import _socket
    from typing import Any

    from learning_bot.status.reply import Reply

API_BASE = "/__openclaw__/api/learning"


def api_base(url: str) -> str:
    """adapters.terminal.commands.api_base."""
    base = url.rstrip("/")
    return base if API_BASE in base else base + API_BASE


def fetch(url: str, learner: str | None, text: str, env: Mapping[str, str]) -> Reply | None:
    """The server's reply to the command, sent as adapters.terminal.commands.remote_sender
    sends it; None when it is left to remote_sender (https, a proxy, an answer that is not a
    reply, or an error status, which remote_sender words: status only reads, so asking again
    changes nothing)."""
    from urllib.parse import urlencode, urlsplit

    base = api_base(url)
    endpoint = base + "/command"
    if learner:
        endpoint += "?" + urlencode({"learner": learner})
    parts = urlsplit(endpoint)
    try:
        port = parts.port or 80
    except ValueError:
        return None
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    token = env.get("LEARNING_BOT_API_TOKEN", "").strip()
    if (
        parts.scheme != "http"
        or not parts.hostname
        or "@" in parts.netloc
        or any(key.lower().endswith("_proxy") for key in env)
        or " " in target
        or not all(_header_safe(v) for v in (parts.netloc, target, token))
    ):
        return None
    body = json.dumps({"actor": _user(), "conversation": "", "wording": "terminal", "text": text})
    head = [
        f"POST {target} HTTP/1.1",
        f"Host: {parts.netloc}",
        "Accept-Encoding: identity",
        "Content-Type: application/json",
        f"Content-Length: {len(body.encode())}",
        "Connection: close",
    ]
    if token:
        head.append(f"Authorization: Bearer {token}")
    request = ("\r\n".join(head) + "\r\n\r\n").encode() + body.encode()
    try:
        answer = _exchange(parts.hostname, port, request)
    except OSError as exc:
        from adapters.terminal.commands import CliError

        raise CliError(f"cannot reach {base}: {exc}") from None
    if answer is None:
        return None
    try:
        reply = json.loads(answer)
    except ValueError:
        return None
    return reply if isinstance(reply, dict) else None


def _user() -> str:
    """adapters.terminal.commands.local_actor's name: getpass.getuser(), which takes the first
    of these variables that is set, else the password database's name for the user id, and
    "local" where that fails. getpass itself imports termios, for its prompts."""
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        user = os.environ.get(name)
        if user:
            return user
    try:
        import pwd

        return pwd.getpwuid(os.getuid())[0]
    except Exception:
        return "local"


def _header_safe(value: str) -> bool:
    """Nothing that http.client would refuse or encode in a request line or header."""
    return value.isascii() and value.isprintable()


def _connect(host: str, port: int) -> _socket.socket:
    """socket.create_connection((host, port), timeout=30), but with an ASCII host name passed
    to getaddrinfo as bytes: a str is first encoded with the idna codec (the same bytes for
    such a name), which imports the codec and its Unicode tables."""
    import _socket

    name: bytes | str = host.encode() if host.isascii() else host
    error: OSError | None = None
    for family, kind, proto, _, address in _socket.getaddrinfo(name, port, 0, _socket.SOCK_STREAM):
        sock = _socket.socket(family, kind, proto)
        try:
            sock.settimeout(30)
            sock.connect(address)
            return sock
        except OSError as exc:
            sock.close()
            error = exc
    raise error if error is not None else OSError("getaddrinfo returns an empty list")


def _exchange(host: str, port: int, request: bytes) -> bytes | None:
    """POST over HTTP/1.1 and return the body of a 2xx answer; None for any other answer,
    or one this reader does not take (chunked, compressed, cut short).

    http.client would do, but it imports the email package and ssl: about 13 ms, as long as
    the rest of the command takes beyond the interpreter's start-up."""
    import _socket

    sock = _connect(host, port)
    try:
        sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
        sock.sendall(request)
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = sock.recv(65536)
            if not chunk:
                return None
            received += chunk
        head, _, body = received.partition(b"\r\n\r\n")
        status, *lines = head.decode("latin-1").split("\r\n")
        version, _, rest = status.partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or not code.isdigit() or code[0] != "2":
            return None
        headers = {}
        for line in lines:
            name, colon, value = line.partition(":")
            if not colon:
                return None
            headers[name.strip().lower()] = value.strip()
        length = headers.get("content-length", "")
        if "transfer-encoding" in headers or not length.isdigit():
            return None
        if headers.get("content-encoding", "identity").lower() != "identity":
            return None
        size = int(length)
        while len(body) < size:
            chunk = sock.recv(max(65536, size - len(body)))
            if not chunk:
                return None
            body += chunk
        return body[:size]
    finally:
        sock.close()


def plain_reply(reply: Mapping[str, Any]) -> bool:
    """Whether a server's reply is an answer (not an error or a confirmation) in the shape
    bot.replies.Reply.from_dict reads, with the blocks a status has."""
    blocks = reply.get("blocks")
    data = reply.get("data")
    return (
        reply.get("kind") in ("info", "ok")
        and isinstance(reply.get("summary"), str)
        and reply.get("visibility") in ("private", "public")
        and (not data or isinstance(data, dict))
        and isinstance(blocks, list)
        and all(isinstance(block, dict) and _plain_block(block) for block in blocks)
    )


def _plain_block(block: Mapping[str, Any]) -> bool:
    kind = block.get("type")
    if kind == "heading":
        return isinstance(block.get("text"), str) and isinstance(block.get("badge"), str | None)
    if kind == "text":
        return isinstance(block.get("text"), str)
    if kind == "fields":
        items = block.get("items")
        return isinstance(items, list) and all(_strings(item, 2) for item in items)
    if kind == "table":
        columns, rows = block.get("columns"), block.get("rows")
        return (
            isinstance(columns, list)
            and all(
                isinstance(c, dict) and isinstance(c.get("name"), str) and "align" in c
                for c in columns
            )
            and isinstance(block.get("title"), str | None)
            and isinstance(rows, list)
            and all(_strings(row, len(columns)) for row in rows)
        )
    return False


def _strings(value: object, count: int) -> bool:
    return (
        isinstance(value, list)
        and len(value) == count
        and all(isinstance(item, str) for item in value)
    )
