"""The OpenAPI document of the HTTP API, written to match the routes exactly (a test fuzzes
the running server against it)."""

from __future__ import annotations

from typing import Any

from learning_bot.adapters.http.api import BASE
from learning_bot.adapters.http.body import STRICT_FIELDS_VERSION, TOLERATED
from learning_bot.engine.config import PACKINGS, POLICIES
from learning_bot.engine.service import TIMESERIES_METRICS


def _obj(props: dict[str, Any], required: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    schema.update(extra)
    return schema


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


INT = {"type": "integer"}
NUM = {"type": "number"}
STR = {"type": "string"}
BOOL = {"type": "boolean"}
N_INT = {"type": "integer", "nullable": True}
N_NUM = {"type": "number", "nullable": True}
N_STR = {"type": "string", "nullable": True}

_PROJECTED: dict[str, Any] = {
    "tokenBudget": INT,
    "recall": NUM,
    "recallLow": NUM,
    "recallHigh": NUM,
    "promptCostSavingsPercent": N_NUM,
    "costLow": N_NUM,
    "costHigh": N_NUM,
    "tokenSavingsPercent": NUM,
    "tokensLow": NUM,
    "tokensHigh": NUM,
    "current": BOOL,
}
"""One setting of a projection (engine.projection.SettingProjection.to_json)."""

SCHEMAS: dict[str, Any] = {
    "Error": _obj({"error": STR}, ["error"]),
    "Summary": _obj(
        {
            "traceCount": INT,
            "armCount": INT,
            "minTimestamp": N_INT,
            "maxTimestamp": N_INT,
            "totalTokens": INT,
            "promptCostSavingsPercent": N_NUM,
            "promptCostSavings": {
                "type": "object",
                "nullable": True,
                "properties": {
                    "percent": N_NUM,
                    "low": N_NUM,
                    "high": N_NUM,
                    "sessions": INT,
                    "selectedSessions": INT,
                    "baselineSessions": INT,
                    "selectedCostPerRun": N_NUM,
                    "baselineCostPerRun": N_NUM,
                    "reason": N_STR,
                },
            },
            "promptSavingsPercent": N_NUM,
            "offeredAvgTokens": N_NUM,
            "selectedPromptAvgTokens": N_NUM,
            "estimatedRecall": N_NUM,
            "sessions": {
                "type": "object",
                "nullable": True,
                "description": "What the learner's sessions of the last day did with their "
                "sets: how many were drawn again while live, the sessions per reason of "
                "their latest redraw, and how many took on tools outside their cached prefix "
                "(grown: a non-empty `added`)",
                "properties": {
                    "sessions": INT,
                    "redrawn": INT,
                    "redraws": INT,
                    "byReason": {
                        "type": "array",
                        "items": _obj({"reason": STR, "sessions": INT}, ["reason", "sessions"]),
                    },
                    "grown": INT,
                },
            },
            "accuracy": N_NUM,
            "exploreRatio": N_NUM,
            "totalReward": NUM,
            "baseline": _obj(
                {
                    "baselineRuns": INT,
                    "selectedRuns": INT,
                    "baselineAvgTokens": N_NUM,
                    "selectedAvgTokens": N_NUM,
                    "tokenSavingsPercent": N_NUM,
                    "baselineAvgDuration": N_NUM,
                    "selectedAvgDuration": N_NUM,
                },
                [
                    "baselineRuns",
                    "selectedRuns",
                    "baselineAvgTokens",
                    "selectedAvgTokens",
                    "tokenSavingsPercent",
                    "baselineAvgDuration",
                    "selectedAvgDuration",
                ],
            ),
        },
        ["traceCount", "armCount", "minTimestamp", "maxTimestamp", "totalTokens", "baseline"],
    ),
    "Config": _obj(
        {
            "enabled": BOOL,
            "phase": {"type": "string", "enum": ["passive", "active"]},
            "strategy": {"type": "string", "enum": ["thompson"]},
            "tokenBudget": INT,
            "baselineRate": NUM,
            "minPulls": INT,
            "seedArmIds": {"type": "array", "items": STR},
            "policy": {"type": "string", "enum": list(POLICIES)},
            "halfLife": NUM,
            "packing": {"type": "string", "enum": list(PACKINGS)},
            "minScore": NUM,
            "exploration": NUM,
            "pooledPrior": BOOL,
            "seedBoost": NUM,
            "recallTarget": NUM,
        },
        [
            "enabled",
            "phase",
            "strategy",
            "tokenBudget",
            "baselineRate",
            "minPulls",
            "seedArmIds",
            "policy",
            "halfLife",
        ],
    ),
    "Posterior": _obj(
        {
            "armId": STR,
            "alpha": NUM,
            "beta": NUM,
            "mean": NUM,
            "pulls": INT,
            "lastUpdated": N_INT,
            "isSeed": BOOL,
            "isUnderexplored": BOOL,
            "credibleInterval": _obj({"lower": NUM, "upper": NUM}, ["lower", "upper"]),
            "confidence": {"type": "string", "enum": ["low", "medium", "high"]},
            "confidenceBand": {
                "type": "string",
                "enum": ["none", "low", "medium", "high", "very high"],
            },
        },
        [
            "armId",
            "alpha",
            "beta",
            "mean",
            "pulls",
            "lastUpdated",
            "isSeed",
            "isUnderexplored",
            "credibleInterval",
            "confidence",
            "confidenceBand",
        ],
    ),
    "Explanation": _obj(
        {
            "dependsOn": {
                "type": "array",
                "description": "The request features the arm's rate of use differs most "
                "under (each seen in at least 3 of its runs), largest difference first",
                "items": _obj(
                    {
                        "feature": {
                            "type": "string",
                            "description": 'What the feature is ("the message mentions '
                            "'file'\"), or a hashed feature",
                        },
                        "rateWith": NUM,
                        "runsWith": NUM,
                        "rateWithout": N_NUM,
                        "runsWithout": N_NUM,
                        "text": {
                            "type": "string",
                            "description": "The line `status arm` shows for it",
                        },
                    },
                    ["feature", "rateWith", "runsWith", "rateWithout", "runsWithout", "text"],
                ),
            },
            "deferred": {
                "type": "integer",
                "description": "Runs that left this tool out while their runtime reported "
                "what it loaded (tool search), counted by this server process",
            },
            "loaded": {
                "type": "integer",
                "description": "Of those runs, the ones that loaded it",
            },
            "deferredText": {
                "type": "string",
                "nullable": True,
                "description": "The line `status arm` shows for them (null: never deferred)",
            },
        },
        ["dependsOn", "deferred", "loaded", "deferredText"],
    ),
    "Usage": _obj(
        {"input": INT, "output": INT, "cacheRead": INT, "cacheWrite": INT, "total": INT},
        ["input", "output", "cacheRead", "cacheWrite", "total"],
    ),
    "TraceArm": _obj(
        {"armId": STR, "included": BOOL, "referenced": BOOL, "tokenCost": INT},
        ["armId", "included", "referenced", "tokenCost"],
    ),
    "Trace": _obj(
        {
            "traceId": STR,
            "runId": STR,
            "sessionId": STR,
            "sessionKey": STR,
            "timestamp": INT,
            "provider": STR,
            "model": STR,
            "channel": STR,
            "isBaseline": BOOL,
            "context": {"type": "object"},
            "arms": {"type": "array", "items": _ref("TraceArm")},
            "usage": _ref("Usage"),
            "durationMs": INT,
            "systemPromptChars": INT,
            "aborted": BOOL,
            "error": N_STR,
        },
        [
            "traceId",
            "runId",
            "sessionId",
            "sessionKey",
            "timestamp",
            "provider",
            "model",
            "channel",
            "isBaseline",
            "context",
            "arms",
            "usage",
            "durationMs",
            "systemPromptChars",
            "aborted",
            "error",
        ],
    ),
    "TracePage": _obj(
        {"traces": {"type": "array", "items": _ref("Trace")}, "total": INT}, ["traces", "total"]
    ),
    "Timeseries": _obj(
        {
            "buckets": {
                "type": "array",
                "items": _obj(
                    {
                        "t": INT,
                        "value": NUM,
                        "armId": STR,
                        "group": {"type": "string", "enum": ["baseline", "selected"]},
                        "sessions": INT,
                    },
                    ["t", "value"],
                ),
            }
        },
        ["buckets"],
    ),
    "Health": _obj(
        {
            "ok": BOOL,
            "database": STR,
            "learner": STR,
            "error": STR,
            "spool": _obj(
                {
                    "pending": BOOL,
                    "bytes": INT,
                    "full": BOOL,
                    "deadLetters": INT,
                    "deadLetterFile": {"type": "string", "nullable": True},
                }
            ),
        },
        ["ok", "database"],
    ),
    "ArmInput": _obj(
        {
            "armId": {"type": "string", "maxLength": 512},
            "tokenCost": {"type": "integer", "minimum": 0},
            "label": STR,
            "content": N_STR,
            "description": {
                "type": "string",
                "maxLength": 4000,
                "description": "What the arm does: lexical relevance to context.message reads it",
            },
            "included": BOOL,
            "loaded": {
                "type": "boolean",
                "description": "Observe only: a deferred arm (left out of the prompt) the model "
                "loaded through tool search; counts as in the prompt for the reward, and apart "
                "from the selected arms for the session's set",
            },
        },
        ["armId"],
    ),
    "SelectRequest": _obj(
        {
            "arms": {"type": "array", "items": _ref("ArmInput"), "minItems": 1},
            "context": {
                "type": "object",
                "description": (
                    "What the runtime knows about the request; `session_key` makes the "
                    "selection session-stable (the session's first set, in order)"
                ),
            },
            "sessionKey": {
                "type": "string",
                "maxLength": 256,
                "description": "The session, as context.session_key: the same arms in the "
                "same order for every select of the session while it is not idle",
            },
        },
        ["arms"],
    ),
    "Selection": _obj(
        {
            "selected": {"type": "array", "items": STR},
            "excluded": {"type": "array", "items": STR},
            "deferred": {
                "type": "array",
                "items": STR,
                "description": "The left-out tools a runtime with tool search can still offer "
                "as deferred (Anthropic defer_loading, OpenAI tool search)",
            },
            "isBaseline": BOOL,
            "tokenBudget": INT,
            "usedTokens": INT,
            "overBudget": BOOL,
            "fallback": N_STR,
            "guidance": N_STR,
            "added": {
                "type": "array",
                "items": STR,
                "description": "Tools the session took on outside its cached prefix: send "
                "them as a mid-conversation addition (Anthropic) or leave them to tool search "
                "(OpenAI), never among the prefix's tools",
            },
            "session": {
                "type": "string",
                "nullable": True,
                "enum": ["new", "kept", "grown", "redrawn", None],
                "description": "What the select did with its session's set (null: no session)",
            },
            "sessionReason": {
                **N_STR,
                "description": "Why, in a few words (README, Agent runtimes)",
            },
        },
        [
            "selected",
            "excluded",
            "deferred",
            "isBaseline",
            "tokenBudget",
            "usedTokens",
            "overBudget",
            "fallback",
            "guidance",
            "added",
            "session",
            "sessionReason",
        ],
    ),
    "ToolCall": _obj(
        {
            "name": STR,
            "meta": {"type": "object"},
            "arm": {
                "type": "string",
                "maxLength": 512,
                "description": "The arm called (tool:<category>:<name>): credits that arm only. "
                "A name given as a full arm id or as category:name is read the same way; a bare "
                "name several of the run's arms share credits none of them (see ambiguous)",
            },
        },
        ["name"],
    ),
    "RunReport": _obj(
        {
            "traceId": {"type": "string", "minLength": 1, "maxLength": 256},
            "runId": STR,
            "sessionId": STR,
            "sessionKey": STR,
            "channel": STR,
            "conversation": STR,
            "timestamp": {"type": "integer", "minimum": 0},
            "provider": STR,
            "model": STR,
            "isBaseline": BOOL,
            "arms": {"type": "array", "items": _ref("ArmInput"), "minItems": 1},
            "assistantTexts": {"type": "array", "items": STR},
            "toolCalls": {"type": "array", "items": _ref("ToolCall")},
            "usage": _obj(
                {
                    "input": {"type": "integer", "minimum": 0},
                    "output": {"type": "integer", "minimum": 0},
                    "cacheRead": {"type": "integer", "minimum": 0},
                    "cacheWrite": {"type": "integer", "minimum": 0},
                    "total": {"type": "integer", "minimum": 0},
                }
            ),
            "durationMs": {"type": "integer", "minimum": 0},
            "systemPromptChars": {"type": "integer", "minimum": 0},
            "aborted": BOOL,
            "error": N_STR,
            "context": {"type": "object"},
        },
        ["traceId", "arms"],
    ),
    "ObserveBatch": _obj(
        {"reports": {"type": "array", "items": _ref("RunReport"), "minItems": 1}},
        ["reports"],
    ),
    "ObserveResult": _obj(
        {
            "traceId": STR,
            "recorded": BOOL,
            "duplicate": BOOL,
            "skipped": N_STR,
            "rewards": {"type": "object", "additionalProperties": NUM},
            "referenced": {"type": "object", "additionalProperties": BOOL},
            "spooled": BOOL,
            "ambiguous": {
                "type": "object",
                "additionalProperties": {"type": "array", "items": STR},
                "description": "Tool-call names several of the run's arms share, with their "
                "ids: such a call credited none of them",
            },
            "message": STR,
        },
        [
            "traceId",
            "recorded",
            "duplicate",
            "skipped",
            "rewards",
            "referenced",
            "spooled",
            "ambiguous",
            "message",
        ],
    ),
    "ObserveBatchResult": _obj(
        {"results": {"type": "array", "items": _ref("ObserveResult")}}, ["results"]
    ),
    "RewardRequest": _obj(
        {
            "arm_id": STR,
            "outcome": {"type": "string", "enum": ["accepted", "rejected"]},
            "reward": {"type": "number", "minimum": 0, "maximum": 1},
            "reason": STR,
            "actor": STR,
        },
        ["arm_id"],
    ),
    "RewardResult": _obj(
        {
            "ok": BOOL,
            "arm_id": STR,
            "alpha": NUM,
            "beta": NUM,
            "mean": NUM,
            "pulls": INT,
            "reward": NUM,
            "lagged": BOOL,
        },
        ["ok", "arm_id", "alpha", "beta", "mean", "pulls"],
    ),
    "ResetRequest": _obj(
        {"arm_ids": {"type": "array", "items": STR, "minItems": 1, "maxItems": 1000}}
    ),
    "ResetResult": _obj(
        {"learner": STR, "reset_count": INT, "arm_ids": {"type": "array", "items": STR}},
        ["learner", "reset_count", "arm_ids"],
    ),
    "PhaseRequest": _obj(
        {
            "phase": {"type": "string", "enum": ["passive", "active"]},
            "confirm": BOOL,
        },
        ["phase"],
    ),
    "SettingsRequest": _obj(
        {"settings": {"type": "object", "minProperties": 1}},
        ["settings"],
    ),
    "SettingsResult": _obj(
        {
            "learner": STR,
            "settings": {"type": "object"},
            "changed": {"type": "array", "items": STR},
        },
        ["learner", "settings", "changed"],
    ),
    "CommandRequest": _obj(
        {
            "text": {"type": "string", "maxLength": 1000},
            "actor": {"type": "string", "minLength": 1, "maxLength": 128},
            "conversation": {"type": "string", "maxLength": 256},
            "confirm": {"type": "string", "minLength": 1, "maxLength": 64},
            "cancel": {"type": "string", "minLength": 1, "maxLength": 64},
            "wording": {"type": "string", "enum": ["api", "terminal"]},
        }
    ),
    "Reply": _obj(
        {
            "kind": {"type": "string", "enum": ["ok", "info", "error", "confirm"]},
            "summary": STR,
            "visibility": {"type": "string", "enum": ["private", "public"]},
            "blocks": {"type": "array", "items": {"type": "object"}},
            "data": {"type": "object"},
        },
        ["kind", "summary", "visibility", "blocks", "data"],
    ),
    "ProjectedSetting": _obj(
        _PROJECTED,
        ["tokenBudget", "recall", "recallLow", "recallHigh", "tokenSavingsPercent"],
    ),
    "Projection": _obj(
        {
            "runs": INT,
            "sessions": INT,
            "settings": {"type": "array", "items": _ref("ProjectedSetting")},
            "suggested": {
                "type": "object",
                "properties": _PROJECTED,
                "nullable": True,
                "description": "the least-cost setting keeping 95% of the components used",
            },
            "leftOut": {
                "type": "object",
                "additionalProperties": INT,
                "description": "runs read but not replayed, by why",
            },
        },
        ["runs", "sessions", "settings", "suggested"],
    ),
    "PhaseView": _obj(
        {
            "phase": {"type": "string", "enum": ["passive", "active"]},
            "projection": _ref("Projection"),
            "reason": {
                "type": "string",
                "description": "why there is no projection (too few runs recorded with every "
                "component, ...)",
            },
            "projectedAtSwitch": {
                "type": "object",
                "nullable": True,
                "description": "active: the projection kept when the learner went active (its "
                "setting's figures, with the runs it was made from and when), to set beside "
                "what status measures now",
            },
        },
        ["phase"],
    ),
    "PhaseResult": _obj(
        {
            "phase": STR,
            "previous": STR,
            "changed": BOOL,
            "warning": N_STR,
            "bootstrappedTraces": INT,
        },
        ["phase", "previous", "changed"],
    ),
}

SCHEMAS["ArmDetail"] = _obj(
    {**SCHEMAS["Posterior"]["properties"], "explanation": _ref("Explanation")},
    [*SCHEMAS["Posterior"]["required"], "explanation"],
)


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
                            "content": _json(
                                _obj({"learners": {"type": "array", "items": STR}}, ["learners"])
                            ),
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
                _obj({}),
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
