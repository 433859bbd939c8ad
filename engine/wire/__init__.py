"""The wire format: one declaration of each type the HTTP API, the MCP tools and the Python
client exchange (`engine.wire.declare` says how a type is declared and what is derived from
it).

The four modules are imported where they are used (`learning-bot status` needs the reports'
types, not the gateway's); `DOCUMENTED`, the OpenAPI document's types, imports them all and
lists them in one order whatever was imported first."""

from __future__ import annotations

import importlib
from typing import Any

from learning_bot.engine.wire.declare import REGISTRY, schema_of

MODULES = ("gateway", "operator", "runs", "reports")
"""The declaring modules, in the order the OpenAPI document lists their types."""


def documented() -> dict[str, type[Any]]:
    """Every type of the learning API's OpenAPI document: by module (MODULES), then in the
    order each module declares them."""
    from learning_bot.engine.wire import declare

    loaded = [importlib.import_module(f"{__name__}.{name}") for name in MODULES]
    rank = {module.__name__: i for i, module in enumerate(loaded)}
    ordered = sorted(
        enumerate(declare.DOCUMENTED.items()),
        key=lambda item: (rank[item[1][1].__module__], item[0]),
    )
    return dict(pair for _, pair in ordered)


def __getattr__(name: str) -> Any:
    if name in MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name == "DOCUMENTED":
        return documented()
    raise AttributeError(name)


__all__ = ["DOCUMENTED", "MODULES", "REGISTRY", "documented", "schema_of"]
