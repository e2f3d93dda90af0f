"""Parallel provider against a fake Parallel API on 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from plugins.web.parallel import ParallelProvider, register
from tests.fakes.parallel import API_KEY, ParallelFake, parallel_fake  # noqa: F401 - fixture
from tests.fakes.registry_ctx import RecordingContext
from tests.fakes.scripted import Reply


def _env(fake: ParallelFake, key: str = API_KEY) -> dict[str, str]:
    return {"PARALLEL_API_KEY": key, "PARALLEL_API_URL": fake.base_url}


@pytest.fixture
async def provider(parallel_fake: ParallelFake) -> AsyncIterator[ParallelProvider]:  # noqa: F811
    p = ParallelProvider(_env(parallel_fake), timeout=2.0)
    yield p
    await p.aclose()


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


@pytest.mark.parametrize(
    ("status", "headers", "expected"),
    [
        (401, {}, "Parallel rejected the API key (401): Invalid key"),
        (402, {}, "Parallel says the account is out of credits (402): Invalid key"),
        (403, {}, "Parallel refused the request (403"),
        (429, {"Retry-After": "2"}, "Parallel rate limit reached (429); retry after 2 s"),
        (502, {}, "Parallel had a server error (502)"),
    ],
)
async def test_service_errors_become_one_clear_sentence(
    provider: ParallelProvider,
    parallel_fake: ParallelFake,  # noqa: F811
    status: int,
    headers: dict[str, str],
    expected: str,
) -> None:
    error = {"type": "error", "error": {"ref_id": "r", "message": "Invalid key"}}
    parallel_fake.script(Reply(status, error, headers=headers), route="search")

    result = await provider.search("q")

    assert result["success"] is False
    assert result["error"].startswith(expected)


async def test_a_body_of_the_wrong_shape_is_a_clear_failure(
    provider: ParallelProvider,
    parallel_fake: ParallelFake,  # noqa: F811
) -> None:
    parallel_fake.script(Reply(200, {"extract_id": "x"}), route="extract")

    result = await provider.extract(["https://a.example/1"])

    assert result == {
        "success": False,
        "error": "Parallel returned an unexpected response (no 'results' list)",
    }


async def test_a_slow_service_is_a_timeout_failure(parallel_fake: ParallelFake) -> None:  # noqa: F811
    provider = ParallelProvider(_env(parallel_fake), timeout=0.2)
    parallel_fake.script(Reply(200, {"results": []}, delay=1.0), route="search")
    try:
        result = await provider.search("q")
    finally:
        await provider.aclose()

    assert result["error"].startswith("Parallel timed out")


async def test_a_wrong_key_is_rejected_by_the_service(parallel_fake: ParallelFake) -> None:  # noqa: F811
    provider = ParallelProvider(_env(parallel_fake, key="nope"))
    try:
        result = await provider.search("q")
    finally:
        await provider.aclose()

    assert result["error"] == "Parallel rejected the API key (401): missing or invalid API key"


async def test_missing_key_makes_the_provider_unavailable_naming_the_variable() -> None:
    provider = ParallelProvider({})

    assert provider.is_available() is False
    assert provider.unavailable_reason() == "set PARALLEL_API_KEY"


async def test_base_url_override_sends_every_call_to_it(
    provider: ParallelProvider,
    parallel_fake: ParallelFake,  # noqa: F811
) -> None:
    await provider.search("q")
    await provider.extract(["https://a.example/1"])

    assert [r.path for r in parallel_fake.requests] == ["/v1/search", "/v1/extract"]


def test_register_adds_a_parallel_provider_that_searches_and_extracts() -> None:
    ctx = RecordingContext({"PARALLEL_API_KEY": "k"})

    register(ctx)

    [provider] = ctx.providers
    assert provider.name == "parallel"
    assert (provider.supports_extract(), provider.supports_crawl()) == (True, False)
