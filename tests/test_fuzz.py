"""Property-based fuzzing of every documented operation with schemathesis.

Valid and invalid requests generated from gateway/http/openapi.json go to a live gateway (fake upstream):
no answer may be a 5xx, every 4xx must be the OpenAI error envelope, every 2xx must match the
document, and nothing may hang. FUZZ_EXAMPLES raises the number of generated cases per operation
for a longer run by hand (`FUZZ_EXAMPLES=1000 pytest tests/test_fuzz.py`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from schemathesis.checks import CheckContext
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from tests.conftest import API_KEY
from tests.live_gateway import LiveGateway, live_gateway

DOCUMENT = Path(__file__).resolve().parent.parent / "gateway" / "http" / "openapi.json"
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "10"))
REQUEST_TIMEOUT = 10.0  # seconds; a request that takes longer counts as a hang

schema = schemathesis.openapi.from_path(str(DOCUMENT))
schema.config.generation.update(max_examples=EXAMPLES, database="none")


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveGateway]:
    with live_gateway(tmp_path_factory.mktemp("fuzz-home"), api_key=API_KEY, keepalive_interval=5.0) as live:
        yield live


@schemathesis.check
def no_server_error(ctx: CheckContext, response: Any, case: Any) -> bool:
    if response.status_code >= 500:
        raise AssertionError(f"server error {response.status_code}: {response.text[:500]}")
    return True


@schemathesis.check
def errors_use_the_openai_envelope(ctx: CheckContext, response: Any, case: Any) -> bool | None:
    if response.status_code < 400:
        return None
    content_type = (response.headers.get("content-type") or [""])[0]  # schemathesis: lowercase names, lists
    assert content_type.startswith("application/json"), response.headers
    body = json.loads(response.content)
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"], body
    return True


CHECKS = [no_server_error, errors_use_the_openai_envelope, status_code_conformance, content_type_conformance,
          response_schema_conformance, negative_data_rejection]


@schema.parametrize()
def test_no_5xx_every_error_enveloped_every_reply_as_documented(case: Any, gateway: LiveGateway) -> None:
    case.call_and_validate(
        base_url=gateway.base_url,
        headers={"Authorization": f"Bearer {API_KEY}"},
        checks=CHECKS,
        timeout=REQUEST_TIMEOUT,
    )
