"""Perplexity provider against a fake Perplexity Search API on 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from plugins.web.perplexity import PerplexityProvider, register
from tests.fakes.perplexity import API_KEY, PerplexityFake, perplexity_fake  # noqa: F401 - fixture
from tests.fakes.registry_ctx import RecordingContext
from tests.fakes.scripted import Reply


def _env(fake: PerplexityFake, key: str = API_KEY) -> dict[str, str]:
    return {"PERPLEXITY_API_KEY": key, "PERPLEXITY_API_URL": fake.base_url}


@pytest.fixture
async def provider(perplexity_fake: PerplexityFake) -> AsyncIterator[PerplexityProvider]:  # noqa: F811
    p = PerplexityProvider(_env(perplexity_fake), timeout=2.0)
    yield p
    await p.aclose()


async def test_search_sends_query_and_max_results_and_maps_hits(
    provider: PerplexityProvider,
    perplexity_fake: PerplexityFake,  # noqa: F811
) -> None:
    result = await provider.search("perplexity search api", limit=2)

    assert result["data"]["web"] == [
        {
            "title": "Result one",
            "url": "https://example.com/one",
            "description": "[2026-04-01] First snippet.",
            "position": 1,
        },
        {
            "title": "Result two",
            "url": "https://example.com/two",
            "description": "Second snippet.",
            "position": 2,
        },
    ]
    [sent] = perplexity_fake.requests_to("/search")
    assert sent.body == {"query": "perplexity search api", "max_results": 2}


async def test_a_limit_above_twenty_is_capped_to_what_the_api_accepts(
    provider: PerplexityProvider,
    perplexity_fake: PerplexityFake,  # noqa: F811
) -> None:
    result = await provider.search("q", limit=50)

    assert result["success"] is True
    assert perplexity_fake.requests_to("/search")[0].body["max_results"] == 20


@pytest.mark.parametrize(
    ("status", "headers", "expected"),
    [
        (401, {}, "Perplexity rejected the API key (401): Invalid API key"),
        (402, {}, "Perplexity says the account is out of credits (402)"),
        (429, {"Retry-After": "30"}, "Perplexity rate limit reached (429); retry after 30 s"),
        (500, {}, "Perplexity had a server error (500)"),
    ],
)
async def test_service_errors_become_one_clear_sentence(
    provider: PerplexityProvider,
    perplexity_fake: PerplexityFake,  # noqa: F811
    status: int,
    headers: dict[str, str],
    expected: str,
) -> None:
    error = {"error": {"message": "Invalid API key", "type": "x", "code": status}}
    perplexity_fake.script(Reply(status, error, headers=headers), route="search")

    result = await provider.search("q")

    assert result["success"] is False
    assert result["error"].startswith(expected)


async def test_a_body_of_the_wrong_shape_is_a_clear_failure(
    provider: PerplexityProvider,
    perplexity_fake: PerplexityFake,  # noqa: F811
) -> None:
    perplexity_fake.script(Reply(200, {"id": "x", "results": None}), route="search")

    result = await provider.search("q")

    assert result == {
        "success": False,
        "error": "Perplexity returned an unexpected response (no 'results' list)",
    }


async def test_a_slow_service_is_a_timeout_failure(perplexity_fake: PerplexityFake) -> None:  # noqa: F811
    provider = PerplexityProvider(_env(perplexity_fake), timeout=0.2)
    perplexity_fake.script(Reply(200, {"results": []}, delay=1.0), route="search")
    try:
        result = await provider.search("q")
    finally:
        await provider.aclose()

    assert result["error"].startswith("Perplexity timed out")


async def test_a_wrong_key_is_rejected_by_the_service(perplexity_fake: PerplexityFake) -> None:  # noqa: F811
    provider = PerplexityProvider(_env(perplexity_fake, key="pplx-wrong"))
    try:
        result = await provider.search("q")
    finally:
        await provider.aclose()

    assert result["error"] == "Perplexity rejected the API key (401): missing or invalid API key"


async def test_missing_key_makes_the_provider_unavailable_naming_the_variable() -> None:
    provider = PerplexityProvider({})

    assert provider.is_available() is False
    assert provider.unavailable_reason() == "set PERPLEXITY_API_KEY"
    assert (await provider.search("q"))["error"] == "Perplexity is not configured: set PERPLEXITY_API_KEY"


def test_register_adds_a_search_only_perplexity_provider() -> None:
    ctx = RecordingContext({"PERPLEXITY_API_KEY": "k"})

    register(ctx)

    [provider] = ctx.providers
    assert provider.name == "perplexity"
    assert (provider.supports_search(), provider.supports_extract(), provider.supports_crawl()) == (
        True,
        False,
        False,
    )
