"""Exa provider against a fake Exa API on 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from plugins.web.exa import ExaProvider, register
from tests.fakes.exa import API_KEY, ExaFake, exa_fake  # noqa: F401 - fixture
from tests.fakes.registry_ctx import RecordingContext
from tests.fakes.scripted import Reply


def _env(fake: ExaFake, key: str = API_KEY) -> dict[str, str]:
    return {"EXA_API_KEY": key, "EXA_API_URL": fake.base_url}


@pytest.fixture
async def provider(exa_fake: ExaFake) -> AsyncIterator[ExaProvider]:  # noqa: F811
    p = ExaProvider(_env(exa_fake), timeout=2.0)
    yield p
    await p.aclose()


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


@pytest.mark.parametrize(
    ("status", "headers", "expected"),
    [
        (401, {}, "Exa rejected the API key (401): boom"),
        (402, {}, "Exa says the account is out of credits (402): boom"),
        (403, {}, "Exa refused the request (403"),
        (429, {"Retry-After": "3"}, "Exa rate limit reached (429); retry after 3 s: boom"),
        (503, {}, "Exa had a server error (503)"),
    ],
)
async def test_service_errors_become_one_clear_sentence(
    provider: ExaProvider,
    exa_fake: ExaFake,  # noqa: F811
    status: int,
    headers: dict[str, str],
    expected: str,
) -> None:
    exa_fake.script(Reply(status, {"requestId": "r", "error": "boom", "tag": "X"}, headers=headers), route="search")

    result = await provider.search("q")

    assert result["success"] is False
    assert result["error"].startswith(expected)


async def test_a_body_of_the_wrong_shape_is_a_clear_failure(
    provider: ExaProvider,
    exa_fake: ExaFake,  # noqa: F811
) -> None:
    exa_fake.script(Reply(200, ["not", "an", "object"]), route="contents")

    result = await provider.extract(["https://a.example/1"])

    assert result == {
        "success": False,
        "error": "Exa returned an unexpected response (expected a JSON object)",
    }


async def test_a_slow_service_is_a_timeout_failure(exa_fake: ExaFake) -> None:  # noqa: F811
    provider = ExaProvider(_env(exa_fake), timeout=0.2)
    exa_fake.script(Reply(200, {"results": []}, delay=1.0), route="search")
    try:
        result = await provider.search("q")
    finally:
        await provider.aclose()

    assert result["success"] is False
    assert result["error"].startswith("Exa timed out")


async def test_a_wrong_key_is_rejected_by_the_service(exa_fake: ExaFake) -> None:  # noqa: F811
    provider = ExaProvider(_env(exa_fake, key="wrong"))
    try:
        result = await provider.search("q")
    finally:
        await provider.aclose()

    assert result["error"] == "Exa rejected the API key (401): missing or invalid API key"


async def test_missing_key_makes_the_provider_unavailable_naming_the_variable() -> None:
    provider = ExaProvider({"EXA_API_URL": "http://127.0.0.1:9"})

    assert provider.is_available() is False
    assert provider.unavailable_reason() == "set EXA_API_KEY"
    assert (await provider.extract(["https://a.example"]))[
        "error"
    ] == "Exa is not configured: set EXA_API_KEY"


async def test_base_url_override_sends_every_call_to_it(
    provider: ExaProvider,
    exa_fake: ExaFake,  # noqa: F811
) -> None:
    await provider.search("q")
    await provider.extract(["https://a.example/1"])

    assert [r.path for r in exa_fake.requests] == ["/search", "/contents"]


def test_register_adds_an_exa_provider_that_searches_and_extracts() -> None:
    ctx = RecordingContext({"EXA_API_KEY": "k"})

    register(ctx)

    [provider] = ctx.providers
    assert provider.name == "exa"
    assert (provider.supports_search(), provider.supports_extract(), provider.supports_crawl()) == (
        True,
        True,
        False,
    )
