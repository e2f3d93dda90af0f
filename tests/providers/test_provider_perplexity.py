"""Perplexity provider against a fake Perplexity Search API on 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing

import pytest

from plugins.web.perplexity import PerplexityProvider
from tests.fakes.perplexity import API_KEY, PerplexityFake, perplexity_fake  # noqa: F401 - fixture
from tests.support import provider_cases as shared


@pytest.fixture
async def provider(perplexity_fake: PerplexityFake) -> AsyncIterator[PerplexityProvider]:  # noqa: F811
    async with aclosing(TestPerplexitySharedBehaviour().make(perplexity_fake)) as provider:
        yield provider


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


class TestPerplexitySharedBehaviour(shared.KeyedService):
    name, label, provider_class, api_key = "perplexity", "Perplexity", PerplexityProvider, API_KEY
    service_errors = [
        (401, {}, "Perplexity rejected the API key (401): Invalid API key"),
        (402, {}, "Perplexity says the account is out of credits (402)"),
        (429, {"Retry-After": "30"}, "Perplexity rate limit reached (429); retry after 30 s"),
        (500, {}, "Perplexity had a server error (500)"),
    ]
    wrong_shape_json = {"id": "x", "results": None}
    wrong_shape_error = "Perplexity returned an unexpected response (no 'results' list)"
    capabilities = (True, False, False)

    def error_json(self, status: int) -> dict[str, object]:
        return {"error": {"message": "Invalid API key", "type": "x", "code": status}}


async def test_allowed_domains_and_country_reach_perplexity_natively(
    provider: PerplexityProvider,
    perplexity_fake: PerplexityFake,  # noqa: F811
) -> None:
    domains = [f"site{n}.example" for n in range(25)]
    await provider.search("news", limit=3, allowed_domains=domains, country="DE")

    [sent] = perplexity_fake.requests_to("/search")
    assert sent.body["search_domain_filter"] == domains[:20]  # Perplexity's cap; the gateway checks the rest
    assert sent.body["country"] == "DE"
    assert provider.search_options == {"allowed_domains", "country"}
