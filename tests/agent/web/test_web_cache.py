"""The web result cache, counted at the fake Tavily API: identical calls at once reach it once, a
repeated call within `web.cache_ttl` not at all, an expired one again; private URLs, failures and
extracts whose every page failed are never reused. Also `web.max_results` and the extract envelope."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.agent.web.cache import ResultCache, private_on_sight
from gateway.agent.web.calls import Attempt
from gateway.config.settings import Settings, SettingsError, load_settings
from providers.web import search_result
from tests.fakes.scripted import Reply
from tests.fakes.tavily import API_KEY, TavilyFake, tavily_fake  # noqa: F401 - fixture
from tests.support.web_tools import Make, run_tool, web_tools_maker


@pytest.fixture
async def make_tools(tmp_path: Path, tavily_fake: TavilyFake) -> AsyncIterator[Make]:  # noqa: F811
    env = {"TAVILY_API_KEY": API_KEY, "TAVILY_API_URL": tavily_fake.base_url}
    async with web_tools_maker(tmp_path, env, tool_timeout=5.0, web_search_backend="tavily",
                               web_extract_backend="tavily") as make:
        yield make


def tavily_answer(fake: TavilyFake, query: str) -> dict[str, Any]:
    return {"query": query, "answer": None, "images": [], "results": fake.search_results, "response_time": 0.1}


async def test_ten_concurrent_identical_searches_reach_the_provider_once(make_tools: Make,
                                                                         tavily_fake: TavilyFake):  # noqa: F811
    tavily_fake.script(Reply(200, tavily_answer(tavily_fake, "otters"), delay=0.3), route="search")
    search, _ = make_tools()
    # The same query as models write it: case and spacing differ, the search does not.
    queries = ["otters", "Otters", " otters  ", "OTTERS"] * 2 + ["otters"] * 2

    results = await asyncio.gather(*(run_tool(search, query=q) for q in queries))

    assert len(tavily_fake.requests_to("/search")) == 1
    assert all(r == results[0] for r in results) and results[0]["provider"] == "tavily"
    assert [h["url"] for h in results[0]["data"]["web"]] == ["https://example.com/one", "https://example.com/two"]


async def test_concurrent_identical_searches_are_shared_even_with_the_cache_off(make_tools: Make,
                                                                               tavily_fake: TavilyFake):  # noqa: F811
    tavily_fake.script(Reply(200, tavily_answer(tavily_fake, "otters"), delay=0.3), route="search")
    search, _ = make_tools(web_cache_ttl=0)
    await asyncio.gather(*(run_tool(search, query="otters") for _ in range(5)))
    await run_tool(search, query="otters")  # afterwards: nothing kept, a fresh call
    assert len(tavily_fake.requests_to("/search")) == 2


async def test_a_repeated_search_is_answered_from_the_cache_until_it_expires(make_tools: Make,
                                                                            tavily_fake: TavilyFake):  # noqa: F811
    search, _ = make_tools(web_cache_ttl=0.4)
    first = await run_tool(search, query="otters")
    assert await run_tool(search, query="otters") == first
    assert len(tavily_fake.requests_to("/search")) == 1

    await run_tool(search, query="otters", limit=1)  # other options: another entry
    assert len(tavily_fake.requests_to("/search")) == 2

    await asyncio.sleep(0.5)
    await run_tool(search, query="otters")
    assert len(tavily_fake.requests_to("/search")) == 3


async def test_a_failed_search_is_not_cached(make_tools: Make, tavily_fake: TavilyFake):  # noqa: F811
    tavily_fake.script(Reply(500, {"detail": {"error": "internal error"}}), route="search")
    search, _ = make_tools()
    assert (await run_tool(search, query="otters"))["success"] is False
    assert (await run_tool(search, query="otters"))["success"] is True
    assert len(tavily_fake.requests_to("/search")) == 2


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/admin", "http://localhost/status", "http://10.1.2.3/",
                                 "http://[::1]/", "http://intranet/wiki", "http://printer.local/"])
async def test_a_private_url_is_never_cached(make_tools: Make, tavily_fake: TavilyFake, url: str):  # noqa: F811
    _, extract = make_tools(allow_private_urls=True)
    for _ in range(2):
        result = await run_tool(extract, urls=[url])
        assert result["success"] is True and result["provider"] == "tavily"
    assert len(tavily_fake.requests_to("/extract")) == 2


async def test_a_public_url_is_read_once_within_the_ttl(make_tools: Make, tavily_fake: TavilyFake):  # noqa: F811
    _, extract = make_tools()
    for url in ("https://example.com/page", "HTTPS://EXAMPLE.COM/page#section"):
        assert (await run_tool(extract, urls=[url]))["data"][0]["content"].startswith("# Page")
    assert len(tavily_fake.requests_to("/extract")) == 1


async def test_a_mixed_extract_succeeds_with_the_failed_pages_marked(make_tools: Make,
                                                                     tavily_fake: TavilyFake):  # noqa: F811
    tavily_fake.failing_urls["https://gone.example/"] = "Failed to fetch url"
    _, extract = make_tools()
    result = await run_tool(extract, urls=["https://example.com/a", "https://gone.example/"])
    assert result["success"] is True
    assert [p.get("error") for p in result["data"]] == [None, "Tavily could not extract this page: Failed to fetch url"]


async def test_an_extract_whose_every_page_failed_is_a_failure_with_each_reason(make_tools: Make,
                                                                               tavily_fake: TavilyFake):  # noqa: F811
    tavily_fake.failing_urls.update({"https://gone.example/": "Failed to fetch url",
                                     "https://slow.example/": "Timeout"})
    _, extract = make_tools()
    result = await run_tool(extract, urls=["https://gone.example/", "https://slow.example/"])
    assert result["success"] is False and result["provider"] == "tavily"
    said = "Tavily could not extract this page"
    assert result["error"] == (f"could not read any of the 2 pages (https://gone.example/: {said}: Failed to fetch "
                               f"url; https://slow.example/: {said}: Timeout)")
    assert [p["error"] for p in result["data"]] == [f"{said}: Failed to fetch url", f"{said}: Timeout"]
    await run_tool(extract, urls=["https://gone.example/", "https://slow.example/"])
    assert len(tavily_fake.requests_to("/extract")) == 2  # not kept: such reasons are often passing


async def test_max_results_caps_what_the_model_may_ask_for(make_tools: Make, tavily_fake: TavilyFake):  # noqa: F811
    search, _ = make_tools(web_max_results=3)
    parameters = search.schema()["function"]["parameters"]["properties"]["limit"]
    assert (parameters["maximum"], parameters["default"]) == (3, 3)
    await run_tool(search, query="otters", limit=10)
    assert tavily_fake.requests_to("/search")[0].body["max_results"] == 3


def test_max_results_and_fallback_settings_are_checked(tmp_path: Path):
    def load(**environ: str) -> Settings:
        return load_settings(tmp_path, None, environ=environ)

    assert load(WEB_MAX_RESULTS="20").web_max_results == 20
    for bad in ("0", "51", "many"):
        with pytest.raises(SettingsError, match="WEB_MAX_RESULTS"):
            load(WEB_MAX_RESULTS=bad)
    assert load().web_search_fallback == ("auto",)
    assert load(WEB_SEARCH_FALLBACK="exa, brave-free").web_search_fallback == ("exa", "brave-free")
    assert load(WEB_SEARCH_FALLBACK="none").web_search_fallback == ()
    assert load(WEB_EXTRACT_FALLBACK="").web_extract_fallback == ()
    with pytest.raises(SettingsError, match="auto stands alone"):
        load(WEB_SEARCH_FALLBACK="auto,exa")


def test_private_urls_are_recognised_on_sight():
    assert not private_on_sight("https://example.com/a")
    assert not private_on_sight("http://93.184.215.14/")
    for url in ("http://169.254.169.254/latest", "http://[fd00::1]/", "http://router.lan/", "not a url"):
        assert private_on_sight(url), url


def sized(n: int) -> Attempt:
    return Attempt(search_result([{"title": "x" * n, "url": "https://example.com/", "description": ""}]))


async def test_the_cache_is_bounded_in_entries_and_in_bytes():
    async def keep(cache: ResultCache, key: Any, outcome: Attempt) -> Attempt:
        async def produce() -> Attempt:
            return outcome

        return await cache.get_or_call(key, produce, 1.0, late="late")

    by_count = ResultCache(60, max_entries=4, max_bytes=4_000)
    for i in range(10):
        await keep(by_count, ("small", i), sized(10))
    assert len(by_count) == 4

    by_size = ResultCache(60, max_entries=100, max_bytes=10_000)
    for i in range(10):
        await keep(by_size, ("big", i), sized(3_000))
    assert len(by_size) == 3 and by_size.bytes <= 10_000

    huge = sized(20_000)
    assert await keep(by_size, "huge", huge) is huge  # handed over, not kept
    assert len(by_size) == 3


async def test_a_shared_call_goes_on_for_a_caller_left_and_stops_when_the_last_one_is_cancelled():
    started, stopped = asyncio.Event(), asyncio.Event()

    async def slow() -> Attempt:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            stopped.set()
            raise
        return Attempt({"success": True, "data": {"web": []}})

    cache = ResultCache(60)
    key = ("search", "p", "q", ())
    first = asyncio.ensure_future(cache.get_or_call(key, slow, 60, late="late"))
    second = asyncio.ensure_future(cache.get_or_call(key, slow, 60, late="late"))
    await started.wait()
    first.cancel()
    await asyncio.sleep(0.05)
    assert not stopped.is_set()  # the other caller still waits for it
    second.cancel()
    async with asyncio.timeout(1):
        await stopped.wait()  # nobody waits: the provider call (and its connection) is cancelled
    await cache.aclose()
