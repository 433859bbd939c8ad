"""The wire format: one declaration of each type the HTTP API, the MCP tools and the Python
client exchange (`engine.wire.declare` says how a type is declared and what is derived from
it)."""

from learning_bot.engine.wire import gateway, operator, reports, runs
from learning_bot.engine.wire.declare import DOCUMENTED, REGISTRY, schema_of

__all__ = ["DOCUMENTED", "REGISTRY", "gateway", "operator", "reports", "runs", "schema_of"]
