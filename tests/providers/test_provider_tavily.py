"""Tavily provider against a fake Tavily API on 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing

import pytest

from plugins.web.tavily import TavilyProvider
from tests.fakes.scripted import Reply
from tests.fakes.tavily import API_KEY, TavilyFake, error_reply, tavily_fake  # noqa: F401 - fixture
from tests.support import provider_cases as shared


@pytest.fixture
async def provider(tavily_fake: TavilyFake) -> AsyncIterator[TavilyProvider]:  # noqa: F811
    async with aclosing(TestTavilySharedBehaviour().make(tavily_fake)) as provider:
        yield provider


async def test_search_sends_the_documented_request_and_maps_hits(
    provider: TavilyProvider,
    tavily_fake: TavilyFake,  # noqa: F811
) -> None:
    result = await provider.search("python asyncio", limit=2)

    assert result["success"] is True
    web = result["data"]["web"]
    assert [h["url"] for h in web] == ["https://example.com/one", "https://example.com/two"]
    assert web[0] == {
        "title": "Result one",
        "url": "https://example.com/one",
        "description": "First snippet.",
        "position": 1,
    }
    assert web[1]["description"] == "[2026-03-01] Second snippet."
    [sent] = tavily_fake.requests_to("/search")
    assert sent.method == "POST"
    assert sent.body["query"] == "python asyncio"
    assert sent.body["max_results"] == 2


async def test_extract_returns_one_entry_per_url_in_order_with_failed_ones_marked(
    provider: TavilyProvider,
    tavily_fake: TavilyFake,  # noqa: F811
) -> None:
    tavily_fake.failing_urls["https://bad.example/x"] = "Failed to fetch url"
    urls = ["https://a.example/1", "https://bad.example/x", "https://a.example/2"]

    result = await provider.extract(urls)

    assert result["success"] is True
    entries = result["data"]
    assert [e["url"] for e in entries] == urls
    assert entries[0]["content"] == "# Page\n\nContent of https://a.example/1"
    assert "error" not in entries[0]
    assert entries[1]["error"] == "Tavily could not extract this page: Failed to fetch url"
    assert entries[2]["raw_content"].endswith("https://a.example/2")
    [sent] = tavily_fake.requests_to("/extract")
    assert sent.body["urls"] == urls
    assert sent.body["format"] == "markdown"


async def test_extract_of_more_than_twenty_urls_is_split_into_batches(
    provider: TavilyProvider,
    tavily_fake: TavilyFake,  # noqa: F811
) -> None:
    urls = [f"https://a.example/{i}" for i in range(25)]

    result = await provider.extract(urls)

    assert [e["url"] for e in result["data"]] == urls
    assert sorted(len(r.body["urls"]) for r in tavily_fake.requests_to("/extract")) == [5, 20]


async def test_crawl_returns_the_crawled_pages_as_extract_results(
    provider: TavilyProvider,
    tavily_fake: TavilyFake,  # noqa: F811
) -> None:
    result = await provider.crawl("https://docs.example", limit=2, instructions="only API pages")

    assert result["success"] is True
    assert [p["url"] for p in result["data"]] == ["https://docs.example/page1", "https://docs.example/page2"]
    assert result["data"][0]["content"] == "Page 1 text"
    [sent] = tavily_fake.requests_to("/crawl")
    assert sent.body["url"] == "https://docs.example"
    assert sent.body["limit"] == 2
    assert sent.body["instructions"] == "only API pages"


async def test_a_non_json_body_is_a_clear_failure(
    provider: TavilyProvider,
    tavily_fake: TavilyFake,  # noqa: F811
) -> None:
    tavily_fake.script(Reply(200, text="<html>gateway</html>"), route="extract")

    result = await provider.extract(["https://a.example/1"])

    assert result == {"success": False, "error": "Tavily returned a body that is not JSON (HTTP 200)",
                      "retryable": True}


async def test_a_missing_or_nonsense_limit_falls_back_to_five_results(
    provider: TavilyProvider,
    tavily_fake: TavilyFake,  # noqa: F811
) -> None:
    await provider.search("q", limit=None)  # type: ignore[arg-type]
    await provider.search("q", limit="many")  # type: ignore[arg-type]

    assert [r.body["max_results"] for r in tavily_fake.requests_to("/search")] == [5, 5]


@pytest.mark.parametrize(("client_seconds", "tavily_seconds"), [(25.0, 20), (200.0, 150), (12.0, 10)])
async def test_a_crawl_tells_tavily_to_stop_before_the_client_gives_up(
    tavily_fake: TavilyFake, client_seconds: float, tavily_seconds: int,  # noqa: F811
) -> None:
    # Without `timeout` Tavily crawls for up to 150 s while the client waited about 25 s.
    env = {"TAVILY_API_KEY": API_KEY, "TAVILY_API_URL": tavily_fake.base_url}
    async with aclosing(TavilyProvider(env, crawl_timeout=client_seconds)) as provider:
        result = await provider.crawl("https://docs.example")

    assert result["success"] is True  # the fake refuses a timeout outside Tavily's 10-150 s
    [sent] = tavily_fake.requests_to("/crawl")
    assert sent.body["timeout"] == tavily_seconds


@pytest.mark.parametrize(("country", "sent"), [("GB", "united kingdom"), ("kr", "south korea"),
                                              ("HK", None), ("XX", None)])
async def test_only_country_names_in_tavilys_list_are_sent(
    provider: TavilyProvider, tavily_fake: TavilyFake, country: str, sent: str | None,  # noqa: F811
) -> None:
    # "hong kong" is not in Tavily's enum: sending it was a 400 and no results.
    result = await provider.search("dim sum", country=country)

    assert result["success"] is True
    assert tavily_fake.requests_to("/search")[0].body.get("country") == sent


@pytest.mark.parametrize(("status", "kind", "retryable"), [
    (401, "bad_key", False), (432, "out_of_credit", False), (433, "out_of_credit", False),
    (429, "rate_limited", True),
])
async def test_tavilys_documented_errors_are_named(
    provider: TavilyProvider, tavily_fake: TavilyFake, status: int, kind: str, retryable: bool,  # noqa: F811
) -> None:
    tavily_fake.script(error_reply(status, **({"Retry-After": "12"} if status == 429 else {})), route="search")

    result = await provider.search("q")

    assert result["success"] is False and result["kind"] == kind
    assert result.get("retryable", False) is retryable
    assert f"({status})" in result["error"]
    if status == 429:
        assert result["retry_after"] == 12.0


class TestTavilySharedBehaviour(shared.KeyedService, shared.FollowsTheBaseUrl):
    name, label, provider_class, api_key = "tavily", "Tavily", TavilyProvider, API_KEY
    service_errors = [
        (401, {}, "Tavily rejected the API key (401): Invalid API key"),
        (403, {}, "Tavily refused the request (403"),
        (432, {}, "Tavily plan or usage limit reached (432)"),
        (433, {}, "Tavily plan or usage limit reached (433)"),
        (429, {"Retry-After": "7"}, "Tavily rate limit reached (429); retry after 7 s"),
        (500, {}, "Tavily had a server error (500)"),
    ]
    error_body = {"detail": {"error": "Invalid API key"}}
    wrong_shape_json = {"results": "nope"}
    wrong_shape_error = "Tavily returned an unexpected response (no 'results' list)"
    paths_called = ["/search", "/extract", "/crawl"]
    capabilities = (True, True, True)

    def check_registered(self, provider: TavilyProvider) -> None:
        assert provider.is_available() is True
