"""The OpenAPI document of the HTTP API: its routes, written here to match the server's
exactly (a test fuzzes the running server against it), and its schemas, derived from the wire
types declared in engine.wire."""

from __future__ import annotations

from typing import Any

from learning_bot.adapters.http.api import BASE
from learning_bot.adapters.http.body import STRICT_FIELDS_VERSION, TOLERATED
from learning_bot.engine.service import TIMESERIES_METRICS
from learning_bot.engine.wire import documented, schema_of


def _ref(name: str) -> dict[str, str]:
    if name not in SCHEMAS:
        raise KeyError(f"no wire type {name!r} is declared")
    return {"$ref": f"#/components/schemas/{name}"}


SCHEMAS: dict[str, Any] = {name: schema_of(cls) for name, cls in documented().items()}
"""The components' schemas: every wire type the learning API exchanges (engine.wire)."""


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _errors(*codes: int) -> dict[str, Any]:
    text = {
        400: "Bad input; the message names the field",
        401: "Missing or wrong bearer token",
        403: "Not allowed",
        404: "Unknown arm, learner or route",
        408: "The body did not arrive in time",
        409: "Needs confirmation, or conflicts with the current state",
        413: "Body larger than the limit",
        415: "The body was not sent as application/json",
        429: "More changes than the rate limit allows; try again after the time it names",
        503: "Storage is unavailable",
    }
    return {str(c): {"description": text[c], "content": _json(_ref("Error"))} for c in codes}


LEARNER = {
    "name": "learner",
    "in": "query",
    "required": False,
    "schema": {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,64}$"},
    "description": "The learner (namespace) to use; default from configuration.",
}


ARM_ID = {
    "name": "armId",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "minLength": 1, "maxLength": 512},
    "description": "The arm's id (type:category:name), or a label or name `status arm` "
    "resolves to one arm",
}


def _get(summary: str, schema: dict[str, Any], params: list[Any] | None = None) -> Any:
    return {
        "get": {
            "summary": summary,
            "parameters": [LEARNER, *(params or [])],
            "responses": {
                "200": {"description": "OK", "content": _json(schema)},
                **_errors(400, 404, 503),
            },
        }
    }


def _post(summary: str, body: dict[str, Any], result: dict[str, Any], *codes: int) -> Any:
    return {
        "post": {
            "summary": summary,
            "parameters": [LEARNER],
            "security": [{"bearer": []}],
            "requestBody": {"required": True, "content": _json(body)},
            "responses": {
                "200": {"description": "OK", "content": _json(result)},
                **_errors(400, 401, 403, 408, 413, 415, 503, *codes),
            },
        }
    }


def openapi_document() -> dict[str, Any]:
    limit = {
        "name": "limit",
        "in": "query",
        "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100},
    }
    offset = {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0}}
    metric = {
        "name": "metric",
        "in": "query",
        "schema": {
            "type": "string",
            "enum": list(TIMESERIES_METRICS),
            "default": "tokens",
        },
    }
    window = {
        "name": "window",
        "in": "query",
        "schema": {"type": "string", "enum": ["1h", "1d"], "default": "1h"},
    }
    health = _get("Database reachable?", _ref("Health"))
    health["get"]["responses"]["503"] = {
        "description": "Storage is unavailable",
        "content": _json(_ref("Health")),
    }
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "learning-bot learning API",
            "version": "1",
            "description": (
                "The learning layer's HTTP API: status, posteriors, traces, rewards and resets, "
                "and select/observe for agent runtimes. Mutating routes need a bearer token "
                "when the server is configured with one. A body field its route does not "
                "know is refused with 400 naming it (x-strict-fields lists the exceptions)."
            ),
            "x-strict-fields": {
                "version": STRICT_FIELDS_VERSION,
                "tolerated": {where: sorted(names) for where, names in TOLERATED.items()},
            },
        },
        "paths": {
            f"{BASE}/summary": _get("Traces, arms, tokens and the baseline split", _ref("Summary")),
            f"{BASE}/metrics": _get("The same as summary (the original's name)", _ref("Summary")),
            f"{BASE}/config": _get("The learner's settings", _ref("Config")),
            f"{BASE}/posteriors": _get(
                "Every arm's posterior, highest mean first",
                {"type": "array", "items": _ref("Posterior")},
            ),
            f"{BASE}/arms/{{armId}}": _get(
                "One arm's posterior and what its usefulness depends on, as `status arm` shows it",
                _ref("ArmDetail"),
                [ARM_ID],
            ),
            f"{BASE}/traces": _get("Traces, newest first", _ref("TracePage"), [limit, offset]),
            f"{BASE}/timeseries": _get(
                "Tokens, posterior means or prompt cost per session over time",
                _ref("Timeseries"),
                [metric, window],
            ),
            f"{BASE}/healthz": health,
            f"{BASE}/learners": {
                "get": {
                    "summary": "The learners that exist",
                    "responses": {
                        "200": {
                            "description": "OK",
                            "content": _json(_ref("Learners")),
                        },
                        **_errors(503),
                    },
                }
            },
            f"{BASE}/select": _post(
                "Choose the arms of the next prompt", _ref("SelectRequest"), _ref("Selection")
            ),
            f"{BASE}/observe": _post(
                "Report one run (or a batch under `reports`)",
                {"oneOf": [_ref("RunReport"), _ref("ObserveBatch")]},
                {"oneOf": [_ref("ObserveResult"), _ref("ObserveBatchResult")]},
            ),
            f"{BASE}/reward": _post(
                "Manual (lagged) reward for one arm",
                _ref("RewardRequest"),
                _ref("RewardResult"),
                404,
                429,
            ),
            f"{BASE}/reset": _post(
                "Reset every arm ({}) or the listed ones to Beta(1,1), at once (the calling "
                "client confirms); `reset/undo` brings them back",
                _ref("ResetRequest"),
                _ref("ResetResult"),
                403,
                404,
                429,
            ),
            f"{BASE}/reset/undo": _post(
                "Undo the last reset",
                _ref("UndoRequest"),
                _ref("ResetResult"),
                403,
                409,
                429,
            ),
            f"{BASE}/phase": {
                **_get(
                    "The phase, and what going active would have kept and saved over the "
                    "learner's latest runs (a replay of the active policy, per token budget)",
                    _ref("PhaseView"),
                ),
                **_post(
                    "Set the phase; needs confirm: true",
                    _ref("PhaseRequest"),
                    _ref("PhaseResult"),
                    403,
                    409,
                    429,
                ),
            },
            f"{BASE}/settings": _post(
                "Change the learner's stored settings (policy, halfLife, ...); every replica "
                "takes them at its next select",
                _ref("SettingsRequest"),
                _ref("SettingsResult"),
                403,
                429,
            ),
            f"{BASE}/command": _post(
                "Any /learning command (as typed in chat); answers with the reply",
                _ref("CommandRequest"),
                _ref("Reply"),
            ),
        },
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
