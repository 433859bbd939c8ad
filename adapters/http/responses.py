"""What the learning API answers: JSON from one encoder, and every error as its status with
`{"error": ...}` (an ApiError's own, else the error table's)."""

from __future__ import annotations

import json
import logging
from typing import Any

from starlette.responses import JSONResponse

from learning_bot.bot.errors import error_kind, user_message
from learning_bot.engine.errors import Ambiguous, Unavailable

log = logging.getLogger("learning_bot.http")


class ApiError(Exception):
    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.extra = extra


class JsonResponse(JSONResponse):
    """Starlette's JSONResponse, the same bytes and headers, from one encoder built once
    (json.dumps with options builds an encoder per call)."""

    def __init__(self, content: Any, status_code: int = 200, **options: Any) -> None:
        if options:
            super().__init__(content, status_code, **options)
            return
        # Response.__init__ without the general header handling: the two headers it would set.
        self.status_code = status_code
        self.background = None
        self.body = body = self.render(content)
        self.raw_headers = [(b"content-length", b"%d" % len(body)), JSON_TYPE]

    def render(self, content: Any) -> bytes:
        return ENCODER.encode(content).encode("utf-8")


JSON_TYPE = (b"content-type", b"application/json")


ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def error(status: int, message: str, **extra: Any) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    if headers is None:
        return JsonResponse({"error": message, **extra}, status)
    return JsonResponse({"error": message, **extra}, status, headers=headers)


def failure(exc: Exception, method: str, path: str) -> JSONResponse:
    """The answer to a request whose handler raised `exc`: an ApiError's status and message,
    else the status and wording of the error table (an unexpected error is logged)."""
    if isinstance(exc, ApiError):
        return error(exc.status, str(exc), **exc.extra)
    kind = error_kind(exc)
    if kind.code == "internal":
        log.exception("%s %s failed", method, path)
    extra: dict[str, Any] = {}
    if isinstance(exc, Ambiguous):
        extra["candidates"] = list(exc.candidates)
    if isinstance(exc, Unavailable):  # why, in one line (a full spool, a lost file)
        extra["reason"] = (str(exc).strip().splitlines() or [""])[0][:300]
    return error(kind.http_status, user_message(exc), **extra)
