"""Exa provider against a fake Exa API on 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing

import pytest

from plugins.web.exa import ExaProvider
from tests.fakes.exa import API_KEY, ExaFake, exa_fake  # noqa: F401 - fixture
from tests.support import provider_cases as shared


@pytest.fixture
async def provider(exa_fake: ExaFake) -> AsyncIterator[ExaProvider]:  # noqa: F811
    async with aclosing(TestExaSharedBehaviour().make(exa_fake)) as provider:
        yield provider


async def test_search_sends_camel_case_fields_and_maps_hits(
    provider: ExaProvider,
    exa_fake: ExaFake,  # noqa: F811
) -> None:
    result = await provider.search("neural search", limit=2)

    assert result["success"] is True
    first, second = result["data"]["web"]
    assert first == {
        "title": "Result one",
        "url": "https://example.com/one",
        "description": "[2026-02-01] A relevant passage. … Another passage.",
        "position": 1,
    }
    assert second["description"] == "Only text here."
    [sent] = exa_fake.requests_to("/search")
    assert sent.body["query"] == "neural search"
    assert sent.body["numResults"] == 2
    assert sent.body["type"] == "auto"
    assert sent.body["contents"]["text"] == {"maxCharacters": 1000}


async def test_extract_maps_contents_and_marks_failed_statuses_in_order(
    provider: ExaProvider,
    exa_fake: ExaFake,  # noqa: F811
) -> None:
    exa_fake.failing_urls["https://gone.example/"] = ("CRAWL_NOT_FOUND", 404)
    urls = ["https://a.example/1", "https://gone.example/", "https://a.example/2"]

    result = await provider.extract(urls)

    entries = result["data"]
    assert [e["url"] for e in entries] == urls
    assert entries[0]["title"] == "Title of https://a.example/1"
    assert entries[0]["content"] == "Full text of https://a.example/1"
    assert entries[0]["metadata"] == {
        "published_date": "2025-12-24T00:00:00.000Z",
        "author": "Grace",
        "id": "https://a.example/1",
    }
    assert entries[1]["error"] == "Exa could not read this page (CRAWL_NOT_FOUND, HTTP 404)"
    assert "error" not in entries[2]
    [sent] = exa_fake.requests_to("/contents")
    assert sent.body["urls"] == urls


class TestExaSharedBehaviour(shared.KeyedService, shared.FollowsTheBaseUrl):
    name, label, provider_class, api_key = "exa", "Exa", ExaProvider, API_KEY
    unconfigured_env = {"EXA_API_URL": "http://127.0.0.1:9"}
    unconfigured_call = "extract"
    service_errors = [
        (401, {}, "Exa rejected the API key (401): boom"),
        (402, {}, "Exa says the account is out of credits (402): boom"),
        (403, {}, "Exa refused the request (403"),
        (429, {"Retry-After": "3"}, "Exa rate limit reached (429); retry after 3 s: boom"),
        (503, {}, "Exa had a server error (503)"),
    ]
    error_body = {"requestId": "r", "error": "boom", "tag": "X"}
    wrong_shape_json = ["not", "an", "object"]
    wrong_shape_call, wrong_shape_route = "extract", "contents"
    wrong_shape_error = "Exa returned an unexpected response (expected a JSON object)"
    paths_called = ["/search", "/contents"]
    capabilities = (True, True, False)
