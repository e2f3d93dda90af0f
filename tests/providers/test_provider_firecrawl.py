"""Firecrawl provider against a fake Firecrawl v2 API on 127.0.0.1."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest

from plugins.web.firecrawl import FirecrawlProvider, register
from providers.plugin_settings import PluginSettings
from tests.fakes.firecrawl import API_KEY, FirecrawlFake, error_reply, firecrawl_fake  # noqa: F401 - fixture
from tests.fakes.registry_ctx import RecordingContext
from tests.fakes.scripted import Reply
from tests.support import provider_cases as shared


def _provider(fake: FirecrawlFake, key: str | None = API_KEY, **options: Any) -> FirecrawlProvider:
    env = {"FIRECRAWL_API_URL": fake.base_url}
    if key is not None:
        env["FIRECRAWL_API_KEY"] = key
    options.setdefault("timeout", 2.0)
    options.setdefault("poll_interval", 0.01)
    return FirecrawlProvider(env, **options)


@pytest.fixture
async def provider(firecrawl_fake: FirecrawlFake) -> AsyncIterator[FirecrawlProvider]:  # noqa: F811
    async with aclosing(_provider(firecrawl_fake)) as provider:
        yield provider


async def test_search_maps_the_web_results(
    provider: FirecrawlProvider,
    firecrawl_fake: FirecrawlFake,  # noqa: F811
) -> None:
    result = await provider.search("firecrawl", limit=2)

    assert result["data"]["web"] == [
        {"title": "Result one", "url": "https://example.com/one", "description": "First.", "position": 1},
        {"title": "Result two", "url": "https://example.com/two", "description": "Second.", "position": 2},
    ]
    [sent] = firecrawl_fake.requests_to("/v2/search")
    assert sent.body == {"query": "firecrawl", "limit": 2}
    assert sent.headers["Authorization"] == f"Bearer {API_KEY}"


async def test_search_query_is_cut_to_the_500_characters_firecrawl_accepts(
    provider: FirecrawlProvider,
    firecrawl_fake: FirecrawlFake,  # noqa: F811
) -> None:
    result = await provider.search("x" * 800)

    assert result["success"] is True
    assert len(firecrawl_fake.requests_to("/v2/search")[0].body["query"]) == 500


async def test_extract_scrapes_each_url_and_keeps_the_requested_order(
    provider: FirecrawlProvider,
    firecrawl_fake: FirecrawlFake,  # noqa: F811
) -> None:
    firecrawl_fake.page_status["https://a.example/missing"] = 404
    urls = ["https://a.example/1", "https://a.example/missing", "https://a.example/2"]

    result = await provider.extract(urls)

    entries = result["data"]
    assert [e["url"] for e in entries] == urls
    assert entries[0]["title"] == "Title of https://a.example/1"
    assert entries[0]["content"] == "# https://a.example/1\n\nBody of https://a.example/1"
    assert entries[0]["metadata"]["status_code"] == 200
    assert entries[1]["error"] == "Firecrawl could not read this page: the page answered HTTP 404"
    bodies = [r.body for r in firecrawl_fake.requests_to("/v2/scrape")]
    assert {b["url"] for b in bodies} == set(urls)
    assert all(b["formats"] == ["markdown"] and b["onlyMainContent"] is True for b in bodies)


async def test_extract_where_every_scrape_fails_is_one_clear_failure(
    provider: FirecrawlProvider,
    firecrawl_fake: FirecrawlFake,  # noqa: F811
) -> None:
    for _ in range(2):
        firecrawl_fake.script(Reply(402, {"success": False, "error": "Insufficient credits"}), route="scrape")

    result = await provider.extract(["https://a.example/1", "https://a.example/2"])

    assert result == {
        "success": False,
        "error": "Firecrawl says the account is out of credits (402): Insufficient credits",
        "kind": "out_of_credit",
    }


async def test_crawl_polls_the_job_until_done_and_returns_its_pages(
    provider: FirecrawlProvider,
    firecrawl_fake: FirecrawlFake,  # noqa: F811
) -> None:
    result = await provider.crawl("https://docs.example", limit=3)

    assert result["success"] is True
    assert [p["url"] for p in result["data"]] == [f"https://docs.example/p{i}" for i in (1, 2, 3)]
    [started] = firecrawl_fake.requests_to("/v2/crawl")
    assert started.body["url"] == "https://docs.example"
    assert started.body["limit"] == 3
    assert started.body["scrapeOptions"] == {"formats": ["markdown"], "onlyMainContent": True}
    [job_id] = firecrawl_fake.jobs
    assert len(firecrawl_fake.requests_to(f"/v2/crawl/{job_id}")) == 2  # one "scraping", one "completed"


async def test_crawl_follows_next_pages_but_stops_at_the_page_bound(
    firecrawl_fake: FirecrawlFake,  # noqa: F811
) -> None:
    firecrawl_fake.crawl_page_count = 9
    firecrawl_fake.page_size = 2
    firecrawl_fake.polls_before_done = 0
    async with aclosing(_provider(firecrawl_fake, max_crawl_pages=5)) as provider:
        result = await provider.crawl("https://docs.example", limit=50)

    assert [p["url"] for p in result["data"]] == [f"https://docs.example/p{i}" for i in range(1, 6)]
    assert firecrawl_fake.requests_to("/v2/crawl")[0].body["limit"] == 5


async def test_crawl_past_its_time_budget_returns_what_was_scraped_and_cancels_the_job(
    firecrawl_fake: FirecrawlFake,  # noqa: F811
) -> None:
    firecrawl_fake.polls_before_done = 10_000
    async with aclosing(_provider(firecrawl_fake, crawl_timeout=0.1)) as provider:
        result = await provider.crawl("https://docs.example", limit=3)

    assert [p["url"] for p in result["data"]] == ["https://docs.example/p1"]
    assert firecrawl_fake.cancelled == list(firecrawl_fake.jobs)


async def test_crawl_past_its_time_budget_with_nothing_scraped_is_a_clear_failure(
    firecrawl_fake: FirecrawlFake,  # noqa: F811
) -> None:
    firecrawl_fake.polls_before_done = 10_000
    firecrawl_fake.scraped_while_running = 0
    async with aclosing(_provider(firecrawl_fake, crawl_timeout=0.1)) as provider:
        result = await provider.crawl("https://docs.example")

    assert result == {"success": False, "error": "Firecrawl crawl did not finish within 0.1 s"}


async def test_a_failed_crawl_job_is_a_clear_failure(
    provider: FirecrawlProvider,
    firecrawl_fake: FirecrawlFake,  # noqa: F811
) -> None:
    firecrawl_fake.crawl_error = "Site blocked the crawler"

    result = await provider.crawl("https://docs.example")

    assert result == {"success": False, "error": "Firecrawl crawl failed: Site blocked the crawler"}


async def test_self_hosted_instance_without_a_key_is_available_and_sends_no_auth(
    firecrawl_fake: FirecrawlFake,  # noqa: F811
) -> None:
    firecrawl_fake.require_auth = False
    async with aclosing(_provider(firecrawl_fake, key=None)) as provider:
        assert provider.is_available() is True
        result = await provider.search("q")

    assert result["success"] is True
    assert "Authorization" not in firecrawl_fake.requests[0].headers


async def test_a_base_url_pasted_with_its_version_suffix_still_works(
    firecrawl_fake: FirecrawlFake,  # noqa: F811
) -> None:
    env = {"FIRECRAWL_API_KEY": API_KEY, "FIRECRAWL_API_URL": firecrawl_fake.base_url + "/v2"}
    async with aclosing(FirecrawlProvider(env)) as provider:
        result = await provider.search("q")

    assert result["success"] is True
    assert firecrawl_fake.requests[0].path == "/v2/search"


async def test_a_200_that_reports_failure_is_a_failure(
    provider: FirecrawlProvider,
    firecrawl_fake: FirecrawlFake,  # noqa: F811
) -> None:
    firecrawl_fake.script(Reply(200, {"success": False, "error": "Engine unavailable"}), route="search")

    result = await provider.search("q")

    assert result == {"success": False, "error": "Firecrawl reported a failure: Engine unavailable"}


async def test_missing_key_and_url_make_it_unavailable_naming_both_variables() -> None:
    provider = FirecrawlProvider({})

    assert provider.is_available() is False
    assert provider.unavailable_reason() == "set FIRECRAWL_API_KEY (or FIRECRAWL_API_URL for a self-hosted instance)"


async def test_a_registered_crawl_gives_up_before_the_gateway_tool_timeout(
    firecrawl_fake: FirecrawlFake, tmp_path: Path,  # noqa: F811
) -> None:
    firecrawl_fake.polls_before_done = 10_000
    settings = PluginSettings(home=tmp_path, profile_dir=tmp_path, tool_timeout=6.0)  # leaves the crawl 1 s
    ctx = RecordingContext({"FIRECRAWL_API_KEY": API_KEY, "FIRECRAWL_API_URL": firecrawl_fake.base_url}, settings)
    register(ctx)
    [registered] = ctx.providers
    async with aclosing(registered) as provider:
        started = time.monotonic()
        result = await provider.crawl("https://docs.example")
        elapsed = time.monotonic() - started

    assert elapsed < 5
    assert [p["url"] for p in result["data"]] == ["https://docs.example/p1"]
    assert firecrawl_fake.cancelled == list(firecrawl_fake.jobs)


class TestFirecrawlSharedBehaviour(
    shared.TimesOut, shared.MapsServiceErrors, shared.RejectsAWrongShape, shared.Registers
):
    name, label, provider_class, api_key = "firecrawl", "Firecrawl", FirecrawlProvider, API_KEY
    empty_search = {"success": True, "data": {"web": []}}
    service_errors = [
        (401, {}, "Firecrawl rejected the API key (401): Unauthorized"),
        (402, {}, "Firecrawl says the account is out of credits (402)"),
        (408, {}, "Firecrawl timed out on its side (408)"),
        (429, {"Retry-After": "12"}, "Firecrawl rate limit reached (429); retry after 12 s"),
        (500, {}, "Firecrawl had a server error (500)"),
    ]
    error_body = {"success": False, "error": "Unauthorized"}
    wrong_shape_json = {"success": True, "data": [{"url": "https://x"}]}
    wrong_shape_error = "Firecrawl returned an unexpected response (no 'data' object)"
    capabilities = (True, True, True)

    def make(self, fake: FirecrawlFake, *, timeout: float = 2.0, **_: object) -> FirecrawlProvider:
        return _provider(fake, timeout=timeout)  # polls quickly, so crawls in tests take no time


async def test_allowed_domains_survive_a_long_query_within_firecrawls_500_characters(
    provider: FirecrawlProvider,
    firecrawl_fake: FirecrawlFake,  # noqa: F811
) -> None:
    # v2 search has no domain filter field; the site: operators once went after a 500-character
    # query and were cut off (or the query was refused).
    result = await provider.search("tell me about otters " * 40, allowed_domains=["otters.example", "zoo.example"])

    assert result["success"] is True
    [sent] = firecrawl_fake.requests_to("/v2/search")
    assert len(sent.body["query"]) <= 500
    assert sent.body["query"].endswith("(site:otters.example OR site:zoo.example)")


@pytest.mark.parametrize(("status", "kind", "retryable"), [(402, "out_of_credit", False), (429, "rate_limited", True)])
async def test_firecrawls_documented_errors_are_named(
    provider: FirecrawlProvider, firecrawl_fake: FirecrawlFake, status: int, kind: str, retryable: bool,  # noqa: F811
) -> None:
    firecrawl_fake.script(error_reply(status), route="search")

    result = await provider.search("q")

    assert result["success"] is False and result["kind"] == kind
    assert result.get("retryable", False) is retryable and f"({status})" in result["error"]
