"""Property-based fuzzing of the running server against its own OpenAPI document: no 500s,
no undocumented status codes, no responses that break the schema."""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from learning_bot.adapters.http.openapi import openapi_document

from .conftest import TOKEN, Live

schema = schemathesis.openapi.from_dict(openapi_document())


@schema.parametrize()
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_api_conforms_to_its_schema(case: schemathesis.Case, live: Live) -> None:
    case.call_and_validate(
        base_url=live.url,
        headers={"Authorization": f"Bearer {TOKEN}"},
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
        ],
    )
