"""The web_search / web_extract tools as the agent sees them: schemas, markers and the JSON results."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gateway.agent.web.tools import WebExtractTool, WebSearchTool, build_web_tools
from gateway.config.settings import Settings, load_settings
from providers.loader import load_registry
from providers.registry import ProviderRegistry
from providers.web import ProviderError, WebSearchProvider, extract_result, page, search_result
from tests.fakes.pages import PageServer, page_server  # noqa: F401
from tests.fakes.searxng import FakeSearxng, searxng_server  # noqa: F401


class Plugin(WebSearchProvider):
    """A third-party-style provider whose behaviour each test scripts."""

    def __init__(self, name: str, *, search=None, extract=None, crawl=None, missing: str | None = None):
        self.name = name
        self._search, self._extract, self._crawl = search, extract, crawl
        self._missing = missing

    def is_available(self) -> bool:
        return self._missing is None

    def unavailable_reason(self) -> str | None:
        return self._missing

    def supports_search(self) -> bool:
        return self._search is not None

    def supports_extract(self) -> bool:
        return self._extract is not None

    def supports_crawl(self) -> bool:
        return self._crawl is not None

    def search(self, query, limit=5):
        return self._search(query, limit)

    def extract(self, urls, **kwargs):
        return self._extract(urls)

    def crawl(self, url, **kwargs):
        return self._crawl(url)


def settings(tmp_path: Path, **overrides: Any) -> Settings:
    values = {"tool_timeout": 1.0, "max_extract_chars": 1000, **overrides}
    return Settings(home=tmp_path, profile=None, **values)


def tools(
    tmp_path: Path, *providers: WebSearchProvider, **overrides: Any
) -> tuple[WebSearchTool, WebExtractTool]:
    backends = {k: overrides.pop(k) for k in ("search_backend", "extract_backend") if k in overrides}
    registry = ProviderRegistry(**backends)
    for provider in providers:
        registry.add(provider, plugin=provider.name)
    search, extract = build_web_tools(registry, settings(tmp_path, **overrides))
    return search, extract


def hits(n: int) -> dict[str, Any]:
    return search_result(
        {"title": f"t{i}", "url": f"https://r.test/{i}", "description": "d"} for i in range(n)
    )


async def run(tool, **arguments) -> dict[str, Any]:
    return json.loads(await tool.run(arguments))


def test_schemas_and_markers_describe_the_tools(tmp_path: Path):
    search, extract = tools(tmp_path)
    assert search.schema()["function"]["name"] == "web_search"
    assert search.schema()["function"]["parameters"]["properties"]["limit"]["maximum"] == 10
    assert extract.schema()["function"]["parameters"]["properties"]["urls"]["maxItems"] == 5
    assert search.marker({"query": "otters"}) == "🔍 otters"
    assert extract.marker({"urls": ["https://a.test"]}) == "📄 https://a.test"
    assert extract.marker({"urls": ["https://a.test", "https://b.test", "https://c.test"]}) == (
        "📄 https://a.test +2 more"
    )
    assert extract.marker({"urls": ["https://a.test"], "crawl": True}) == "🕸️ https://a.test"


async def test_search_result_is_compact_json_trimmed_to_the_limit(tmp_path: Path):
    search, _ = tools(tmp_path, Plugin("searxng", search=lambda q, limit: hits(8)))
    text = await search.run({"query": "Zürich", "limit": 3})
    assert ", " not in text and ": " not in text
    result = json.loads(text)
    assert [h["position"] for h in result["data"]["web"]] == [1, 2, 3]


async def test_limit_is_clamped_to_1_to_10(tmp_path: Path):
    seen: list[int] = []
    search, _ = tools(tmp_path, Plugin("p", search=lambda q, limit: (seen.append(limit), hits(0))[1]))
    await run(search, query="a", limit=50)
    await run(search, query="a", limit=0)
    await run(search, query="a")
    assert seen == [10, 1, 5]


async def test_sync_providers_run_off_the_event_loop(tmp_path: Path):
    threads: list[str] = []

    def slow_search(query, limit):
        threads.append(threading.current_thread().name)
        time.sleep(0.05)
        return hits(1)

    search, _ = tools(tmp_path, Plugin("p", search=slow_search))
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.005)
            ticks += 1

    task = asyncio.create_task(ticker())
    result = await run(search, query="x")
    task.cancel()
    assert result["success"] is True
    assert threads != [threading.current_thread().name]
    assert ticks >= 3  # the loop kept running while the provider slept


async def test_async_provider_over_the_timeout_becomes_a_failure(tmp_path: Path):
    class Slow(WebSearchProvider):
        name = "slow"

        async def search(self, query, limit=5):
            await asyncio.sleep(5)

    search, _ = tools(tmp_path, Slow(), tool_timeout=0.1)
    assert await run(search, query="x") == {"success": False, "error": "slow did not answer within 0.1 s"}


@pytest.mark.parametrize(
    ("behaviour", "error"),
    [
        (ProviderError("Tavily rejected the API key (401)"), "Tavily rejected the API key (401)"),
        (KeyError("web"), "p failed: KeyError: 'web'"),
        ({"results": []}, "p returned a malformed result for search (not an envelope)"),
        ({"success": False, "error": "quota used up"}, "quota used up"),
    ],
)
async def test_provider_failures_reach_the_model_as_failure_envelopes(tmp_path: Path, behaviour, error):
    def search_fn(query, limit):
        if isinstance(behaviour, Exception):
            raise behaviour
        return behaviour

    search, _ = tools(tmp_path, Plugin("p", search=search_fn))
    result = await run(search, query="x")
    assert (result["success"], result["error"]) == (False, error)


async def test_configured_but_unavailable_provider_tells_the_model_what_is_missing(tmp_path: Path):
    search, _ = tools(
        tmp_path,
        Plugin("tavily", search=lambda q, limit: hits(1), missing="set TAVILY_API_KEY"),
        Plugin("searxng", search=lambda q, limit: hits(1)),
        search_backend="tavily",
    )
    assert await run(search, query="x") == {"success": False, "error": "tavily: set TAVILY_API_KEY"}


async def test_bad_arguments_are_explained(tmp_path: Path):
    search, extract = tools(tmp_path)
    assert (await run(search, query=" "))["error"] == "web_search needs a non-empty 'query' string"
    assert (await run(extract, urls=[]))["error"] == "web_extract needs 'urls': a list of 1 to 5 URL strings"
    six = [f"https://a.test/{i}" for i in range(6)]
    assert (await run(extract, urls=six))["error"] == "web_extract takes at most 5 URLs per call, got 6"


async def test_extract_answers_in_input_order_and_fills_gaps(tmp_path: Path):
    def extract_fn(urls):
        pages = [page(u, f"text of {u}", title=u) for u in urls if "gone" not in u]
        return extract_result(reversed(pages))

    _, extract = tools(tmp_path, Plugin("p", extract=extract_fn))
    urls = ["https://a.test/1", "https://a.test/gone", "https://a.test/3"]
    result = await run(extract, urls=urls)
    assert [p["url"] for p in result["data"]] == urls
    assert result["data"][0]["content"] == "text of https://a.test/1"
    assert result["data"][1]["error"] == "the provider returned nothing for this URL"


async def test_long_pages_keep_head_and_tail_with_an_explicit_note(tmp_path: Path):
    body = "HEAD" + "m" * 5000 + "TAIL"
    _, extract = tools(tmp_path, Plugin("p", extract=lambda urls: extract_result([page(urls[0], body)])))
    [entry] = (await run(extract, urls=["https://a.test"]))["data"]
    assert entry["content"].startswith("HEAD") and entry["content"].endswith("TAIL")
    assert "[... 4008 characters omitted ...]" in entry["content"]
    assert len(entry["content"]) < 1100
    assert "raw_content" not in entry  # identical to content: not sent twice


async def test_crawl_goes_to_the_crawl_provider_once_per_url(tmp_path: Path):
    crawled: list[str] = []

    def crawl_fn(url):
        crawled.append(url)
        return extract_result([page(url, "root"), page(url + "/child", "child")])

    _, extract = tools(
        tmp_path,
        Plugin("fetch", extract=lambda urls: extract_result([])),
        Plugin("firecrawl", extract=lambda urls: extract_result([]), crawl=crawl_fn),
    )
    result = await run(extract, urls=["https://a.test", "https://b.test"], crawl=True)
    assert sorted(crawled) == ["https://a.test", "https://b.test"]
    assert [p["url"] for p in result["data"]] == [
        "https://a.test", "https://a.test/child", "https://b.test", "https://b.test/child"
    ]


async def test_crawl_without_a_crawling_provider_falls_back_to_extract_and_says_so(tmp_path: Path):
    fetch = Plugin("fetch", extract=lambda urls: extract_result([page(urls[0], "page")]))
    _, extract = tools(tmp_path, fetch)
    result = await run(extract, urls=["https://a.test"], crawl=True)
    assert result["data"][0]["content"] == "page"
    assert result["note"] == (
        "crawl unavailable (no web provider supports crawl; configure one with web.extract_backend); "
        "returned the given pages only"
    )


# -- with the real loader and bundled providers ------------------------------------------------
async def test_web_search_reaches_searxng_through_the_registry(
    tmp_path: Path, searxng_server: FakeSearxng  # noqa: F811
):
    settings_ = load_settings(tmp_path, environ={"SEARXNG_URL": searxng_server.base_url})
    registry = load_registry(settings_.plugin_settings())
    search, _ = build_web_tools(registry, settings_)
    try:
        result = await run(search, query="otters", limit=2)
    finally:
        await registry.aclose()
    assert [h["url"] for h in result["data"]["web"]] == ["https://example.org/1", "https://example.org/2"]
    assert searxng_server.requests[0].query["q"] == "otters"


async def test_web_extract_of_a_loopback_url_fetches_nothing(
    tmp_path: Path, page_server: PageServer  # noqa: F811
):
    settings_ = load_settings(tmp_path, environ={})
    registry = load_registry(settings_.plugin_settings())
    _, extract = build_web_tools(registry, settings_)
    try:
        result = await run(extract, urls=[page_server.url + "/article"])
    finally:
        await registry.aclose()
    assert result["data"][0]["error"] == "blocked: 127.0.0.1 is a loopback address"
    assert page_server.requests == []
