"""The server's log output: one root handler on stderr, plain text or, with
LEARNING_BOT_LOG_FORMAT=json, one JSON object per line (for log collectors)."""

from __future__ import annotations

import json
import logging
import os
import sys
from datetime import UTC, datetime
from typing import Any

ACCESS_FIELDS = ("method", "path", "status", "ms")
"""The access log's fields (`RequestLog`), keys of their own in a JSON line."""

PLAIN = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """A record as one JSON object: time (UTC, ISO 8601), level, logger, message, the access
    fields when the record has them, and the exception text when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for field in ACCESS_FIELDS:
            if field in record.__dict__:
                out[field] = record.__dict__[field]
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class ServerHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The root handler `configure_logging` installs (found again and replaced, not doubled)."""


def json_logs() -> bool:
    return os.environ.get("LEARNING_BOT_LOG_FORMAT", "").strip().lower() == "json"


def configure_logging(level: str) -> None:
    """Install the server's root handler at `level` (replacing one installed before)."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, ServerHandler)]:
        root.removeHandler(handler)
    handler = ServerHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if json_logs() else logging.Formatter(PLAIN))
    root.addHandler(handler)
    root.setLevel(level.upper())
