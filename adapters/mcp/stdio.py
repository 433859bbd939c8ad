"""MCP over stdin/stdout as the SDK serves it, with one difference: a line the SDK's parser
refuses is answered, never dropped. The SDK reads each line with pydantic's JSON parser, which
refuses what Python's accepts (a lone surrogate escape such as "\\ud800", nesting past its
recursion limit) and then sends nothing back, so the client waits for an answer that never
comes. Here such a line is read again with Python's parser and served when it is a JSON-RPC
message (the tool's bounds then name the bad argument, as over HTTP); otherwise it is answered
with a JSON-RPC parse error (-32700) or invalid request (-32600) under the line's id when it
has one."""

from __future__ import annotations

import json
import re
from typing import Any

import anyio
import mcp.types as types
from mcp.server.stdio import stdio_server
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

_LEADING_ID = re.compile(r'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d+|"[^"\\]*")')
"""The id of a line Python's parser cannot read either, when the line starts with it (as
clients write their requests)."""


def reread(error: Exception) -> SessionMessage | types.JSONRPCError | None:
    """What to do with a line the SDK could not read (`error`, as its reader passes it on):
    the message Python's parser finds in it, or the error to answer; None when `error` does
    not carry the line (the SDK's own handling stands)."""
    if not isinstance(error, ValidationError):
        return None
    problems = error.errors()
    line = problems[0].get("input") if problems else None
    if problems[0].get("type") != "json_invalid" or not isinstance(line, str):
        return None
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        found = _LEADING_ID.match(line)
        ident = json.loads(found.group(1)) if found else None
        return _error(ident, types.PARSE_ERROR, f"Parse error: {problems[0]['msg']}")
    ident = data.get("id") if isinstance(data, dict) else None
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_python(data, by_name=False))
    except (ValidationError, RecursionError) as exc:
        return _error(ident, types.INVALID_REQUEST, f"Invalid request: {exc}".splitlines()[0])


def _error(ident: Any, code: int, message: str) -> types.JSONRPCError:
    if isinstance(ident, bool) or not isinstance(ident, (int, str)):
        ident = None
    return types.JSONRPCError(
        jsonrpc="2.0", id=ident, error=types.ErrorData(code=code, message=message)
    )


async def serve_stdio(server: Any, options: Any) -> None:
    """Run the low-level `server` over the process's stdin and stdout (the SDK's transport),
    re-reading the lines the SDK refuses (`reread`)."""
    async with stdio_server() as (read_stream, write_stream):
        send, receive = create_context_streams[SessionMessage | Exception](0)

        async def relay() -> None:
            async with send:
                async for item in read_stream:
                    if isinstance(item, Exception):
                        again = reread(item)
                        if isinstance(again, types.JSONRPCError):
                            await write_stream.send(SessionMessage(again))
                            continue
                        if again is not None:
                            item = again
                    await send.send(item)

        async with anyio.create_task_group() as group:
            group.start_soon(relay)
            await server.run(receive, write_stream, options)
            group.cancel_scope.cancel()
