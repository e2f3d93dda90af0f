"""A fake xAI Responses API on 127.0.0.1: POST /v1/responses with `Authorization: Bearer`.

Checks the request as xAI does (model, input, known fields; for these tests also that the
server-side `web_search` tool is offered) and answers with a `response` object whose message
carries `output_text` with `url_citation` annotations, plus the top-level `citations` list.
Tests script what the model "wrote" through `output_text`, `annotations` and `citations`.

Follows xAI's REST reference for `POST /v1/responses` (docs.x.ai, "Responses API" and the
`web_search` tool; xai-sdk 1.21.0 for the fields) and its "may-15-retirement" migration page: a
request naming a retired model (`RETIRED_MODELS`) gets xAI's model-not-found answer, HTTP 404 with
`{"code": "Some requested entity was not found", "error": "The model ... does not exist or your
team ... does not have access to it. ..."}` (the wording xAI's API sends, as users report it).
The `web_search` tool may carry `allowed_domains` / `excluded_domains` (at most 5 each).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from aiohttp import web

from tests.fakes.scripted import FakeService, Recorded, serve

API_KEY = "xai-test-key"
TEAM_ID = "00000000-0000-4000-8000-000000000000"
#: Retired on 2026-05-15 (xAI's migration page names grok-4.3 as the replacement).
RETIRED_MODELS = frozenset({
    "grok-4-1-fast-reasoning", "grok-4-1-fast-non-reasoning", "grok-4-fast-reasoning",
    "grok-4-fast-non-reasoning", "grok-4-0709", "grok-code-fast-1", "grok-3",
})

RESPONSE_FIELDS = {
    "model",
    "input",
    "instructions",
    "tools",
    "tool_choice",
    "include",
    "store",
    "stream",
    "temperature",
    "top_p",
    "max_output_tokens",
    "previous_response_id",
    "parallel_tool_calls",
    "reasoning",
    "text",
    "user",
    "metadata",
    "background",
    "max_turns",
    "search_parameters",
}


class XaiFake(FakeService):
    key_header = "Authorization"
    key_value = f"Bearer {API_KEY}"

    def __init__(self) -> None:
        super().__init__()
        self.output_text = json.dumps(
            [
                {"title": "Result one", "url": "https://example.com/one", "snippet": "What page one says."},
                {"title": "Result two", "url": "https://example.com/two", "snippet": "What page two says."},
            ]
        )
        self.annotations: list[dict[str, Any]] = []
        self.citations: list[str] = ["https://example.com/one", "https://example.com/two"]

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post(
            "/v1/responses", self.endpoint("responses", self._respond, fields=RESPONSE_FIELDS, validate=self._check)
        )
        return app

    def error(self, status: int, message: str) -> web.StreamResponse:
        body = {"code": "Client specified an invalid argument", "error": message}
        return web.json_response(body, status=status)

    @staticmethod
    def _check(recorded: Recorded) -> str | None:
        body = recorded.body
        if not isinstance(body.get("model"), str) or not body["model"]:
            return "model is required"
        if not isinstance(body.get("input"), str | list) or not body["input"]:
            return "input is required"
        tools = body.get("tools", [])
        searches = [t for t in tools if isinstance(t, dict) and t.get("type") == "web_search"] \
            if isinstance(tools, list) else []
        if not searches:
            return "the web_search tool was not offered"
        for tool in searches:
            if set(tool) - {"type", "allowed_domains", "excluded_domains", "enable_image_understanding"}:
                return "unknown web_search tool field"
            domains = tool.get("allowed_domains", [])
            if not isinstance(domains, list) or len(domains) > 5 or not all(isinstance(d, str) for d in domains):
                return "allowed_domains: at most 5 domains"
        reasoning = body.get("reasoning", {"effort": "high"})
        if not isinstance(reasoning, dict) or reasoning.get("effort", "high") not in ("low", "medium", "high"):
            return "reasoning.effort must be one of low, medium, high"
        include = body.get("include", [])
        if not isinstance(include, list) or not set(include) <= {
            "no_inline_citations",
            "reasoning.encrypted_content",
        }:
            return "invalid include"
        return None

    def _respond(self, recorded: Recorded) -> Any:
        model = recorded.body["model"]
        if model in RETIRED_MODELS:
            return web.json_response(model_not_found(model), status=404)
        return {
            "id": "resp_fake",
            "object": "response",
            "created_at": 1764400000,
            "model": recorded.body["model"],
            "status": "completed",
            "output": [
                {
                    "id": "ws_1",
                    "type": "web_search_call",
                    "status": "completed",
                    "action": {"type": "search", "query": "q"},
                },
                {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [
                        {
                            "type": "output_text",
                            "text": self.output_text,
                            "logprobs": None,
                            "annotations": self.annotations,
                        }
                    ],
                },
            ],
            "citations": self.citations,
            "usage": {"input_tokens": 100, "output_tokens": 50, "total_tokens": 150, "num_sources_used": 2},
            "store": recorded.body.get("store", True),
        }


def model_not_found(model: str) -> dict[str, str]:
    return {
        "code": "Some requested entity was not found",
        "error": f"The model {model} does not exist or your team {TEAM_ID} does not have access to it. "
        "Please ensure you're using the correct API key. If you believe this is a mistake, please "
        "contact support and quote your team ID and the model name.",
    }


@pytest.fixture
async def xai_fake(aiohttp_server: Any) -> XaiFake:
    return await serve(XaiFake(), aiohttp_server, "/v1")
