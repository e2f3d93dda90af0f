"""Parallel provider against a fake Parallel API on 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing

import pytest

from plugins.web.parallel import ParallelProvider
from tests.fakes.parallel import API_KEY, ParallelFake, parallel_fake  # noqa: F401 - fixture
from tests.support import provider_cases as shared


@pytest.fixture
async def provider(parallel_fake: ParallelFake) -> AsyncIterator[ParallelProvider]:  # noqa: F811
    async with aclosing(TestParallelSharedBehaviour().make(parallel_fake)) as provider:
        yield provider


async def test_search_sends_queries_and_objective_and_maps_excerpts(
    provider: ParallelProvider,
    parallel_fake: ParallelFake,  # noqa: F811
) -> None:
    result = await provider.search("solid state batteries", limit=2)

    assert result["data"]["web"] == [
        {
            "title": "Result one",
            "url": "https://example.com/one",
            "description": "[2026-01-15] First excerpt. … Second excerpt.",
            "position": 1,
        },
        {"title": "", "url": "https://example.com/two", "description": "Only one.", "position": 2},
    ]
    [sent] = parallel_fake.requests_to("/v1/search")
    assert sent.body["search_queries"] == ["solid state batteries"]
    assert sent.body["objective"] == "solid state batteries"
    assert sent.body["advanced_settings"] == {"max_results": 2}


async def test_a_long_query_is_cut_to_what_search_queries_accepts(
    provider: ParallelProvider,
    parallel_fake: ParallelFake,  # noqa: F811
) -> None:
    result = await provider.search("word " * 100)

    assert result["success"] is True
    sent = parallel_fake.requests_to("/v1/search")[0].body
    assert len(sent["search_queries"][0]) == 200
    assert sent["objective"] == "word " * 100


async def test_extract_asks_for_full_content_and_marks_errors_in_order(
    provider: ParallelProvider,
    parallel_fake: ParallelFake,  # noqa: F811
) -> None:
    parallel_fake.failing_urls["https://down.example/"] = 500
    urls = ["https://a.example/1", "https://down.example/", "https://a.example/2"]

    result = await provider.extract(urls, objective="pricing")

    entries = result["data"]
    assert [e["url"] for e in entries] == urls
    assert entries[0]["content"] == "# Full\n\nFull content of https://a.example/1"
    assert entries[0]["title"] == "Title of https://a.example/1"
    assert entries[0]["metadata"] == {"published_date": "2025-11-02"}
    assert entries[1]["error"] == (
        "Parallel could not read this page (fetch_error, HTTP 500): Error fetching content from https://down.example/"
    )
    [sent] = parallel_fake.requests_to("/v1/extract")
    assert sent.body == {"urls": urls, "advanced_settings": {"full_content": True}, "objective": "pricing"}


async def test_allowed_domains_go_to_the_native_source_policy_not_the_query(
    provider: ParallelProvider, parallel_fake: ParallelFake,  # noqa: F811
) -> None:
    parallel_fake.search_results.append({"url": "https://docs.python.org/3/", "title": "Docs", "excerpts": ["x"]})
    long_query = "how does asyncio schedule callbacks " * 8  # near the 200-character cap by itself

    result = await provider.search(long_query, allowed_domains=["python.org"])

    assert [h["url"] for h in result["data"]["web"]] == ["https://docs.python.org/3/"]
    [sent] = parallel_fake.requests_to("/v1/search")
    assert sent.body["advanced_settings"]["source_policy"] == {"include_domains": ["python.org"]}
    assert "site:" not in sent.body["search_queries"][0]


class TestParallelSharedBehaviour(shared.KeyedService, shared.FollowsTheBaseUrl):
    name, label, provider_class, api_key = "parallel", "Parallel", ParallelProvider, API_KEY
    service_errors = [
        (401, {}, "Parallel rejected the API key (401): Invalid key"),
        (402, {}, "Parallel says the account is out of credits (402): Invalid key"),
        (403, {}, "Parallel refused the request (403"),
        (429, {"Retry-After": "2"}, "Parallel rate limit reached (429); retry after 2 s"),
        (502, {}, "Parallel had a server error (502)"),
    ]
    error_body = {"type": "error", "error": {"ref_id": "r", "message": "Invalid key"}}
    wrong_shape_json = {"extract_id": "x"}
    wrong_shape_call = wrong_shape_route = "extract"
    wrong_shape_error = "Parallel returned an unexpected response (no 'results' list)"
    paths_called = ["/v1/search", "/v1/extract"]
    capabilities = (True, True, False)
