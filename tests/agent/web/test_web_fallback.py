"""Fallback chains and cool-downs, against the fake Tavily and Exa APIs on 127.0.0.1: the first
provider hangs, is rate limited, errs or answers garbage, and the next one in the chain answers;
the result names the provider the fake saw; cool-downs skip a failing provider, then try it again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.fakes.exa import API_KEY as EXA_KEY
from tests.fakes.exa import ExaFake, exa_fake  # noqa: F401 - fixture
from tests.fakes.scripted import Reply
from tests.fakes.tavily import API_KEY as TAVILY_KEY
from tests.fakes.tavily import TavilyFake, tavily_fake  # noqa: F401 - fixture
from tests.support.web_tools import Make, run_tool, web_tools_maker


@pytest.fixture
async def make_tools(
    tmp_path: Path,
    tavily_fake: TavilyFake,  # noqa: F811
    exa_fake: ExaFake,  # noqa: F811
) -> AsyncIterator[Make]:
    """Real bundled providers from the registry, Tavily and Exa keyed and pointed at the fakes."""
    exa_fake.search_results[0].update(id="https://exa.example/one", url="https://exa.example/one")
    env = {"TAVILY_API_KEY": TAVILY_KEY, "TAVILY_API_URL": tavily_fake.base_url,
           "EXA_API_KEY": EXA_KEY, "EXA_API_URL": exa_fake.base_url}
    async with web_tools_maker(tmp_path, env, tool_timeout=2.0, web_cache_ttl=0.0) as make:
        yield make


def searches(fake: TavilyFake | ExaFake) -> int:
    return len(fake.requests_to("/search"))


GARBAGE = Reply(200, text="<html><body>Service Unavailable</body></html>", content_type="text/html")


@pytest.mark.parametrize("reply", [
    Reply(200, {"results": []}, delay=10),  # hangs past its share of the tool time
    Reply(429, {"detail": {"error": "Rate limit exceeded"}}, headers={"Retry-After": "30"}),
    Reply(500, {"detail": {"error": "internal error"}}),
    GARBAGE,
], ids=["hang", "429", "500", "garbage"])
async def test_a_failing_first_provider_hands_the_search_to_the_next(make_tools: Make, tavily_fake: TavilyFake,  # noqa: F811
                                                                     exa_fake: ExaFake, reply: Reply):  # noqa: F811
    tavily_fake.script(reply, route="search")
    search, _ = make_tools()

    result = await run_tool(search, query="otters")

    assert result["success"] is True, result
    assert (result["provider"], result["fallback_from"]) == ("exa", "tavily")
    assert result["data"]["web"][0]["url"] == "https://exa.example/one"  # what the Exa fake answered
    assert (searches(tavily_fake), searches(exa_fake)) == (1, 1)


async def test_the_provider_that_answers_is_named_without_fallback_from(make_tools: Make, tavily_fake: TavilyFake,  # noqa: F811
                                                                        exa_fake: ExaFake):  # noqa: F811
    search, _ = make_tools()
    result = await run_tool(search, query="otters")
    assert result["provider"] == "tavily" and "fallback_from" not in result
    assert result["data"]["web"][0]["url"] == "https://example.com/one"  # what the Tavily fake answered
    assert (searches(tavily_fake), searches(exa_fake)) == (1, 0)


async def test_no_results_is_an_answer_not_a_failure(make_tools: Make, tavily_fake: TavilyFake,  # noqa: F811
                                                     exa_fake: ExaFake):  # noqa: F811
    tavily_fake.search_results = []
    search, _ = make_tools()
    result = await run_tool(search, query="a query nobody asked before")
    assert result == {"success": True, "data": {"web": []}, "provider": "tavily"}
    assert searches(exa_fake) == 0


async def test_a_rejected_key_is_the_providers_answer_and_is_not_swapped(make_tools: Make, tavily_fake: TavilyFake,  # noqa: F811
                                                                         exa_fake: ExaFake):  # noqa: F811
    tavily_fake.script(Reply(401, {"detail": {"error": "Unauthorized: missing or invalid API key."}}), route="search")
    search, _ = make_tools()
    result = await run_tool(search, query="otters")
    assert result["success"] is False and "rejected the API key (401)" in result["error"]
    assert result["provider"] == "tavily" and searches(exa_fake) == 0


async def test_a_named_provider_without_a_listed_fallback_is_not_swapped(make_tools: Make, tavily_fake: TavilyFake,  # noqa: F811
                                                                        exa_fake: ExaFake):  # noqa: F811
    tavily_fake.script(Reply(500, {"detail": {"error": "internal error"}}), route="search")
    search, _ = make_tools(web_search_backend="tavily")
    result = await run_tool(search, query="otters")
    assert result == {"success": False, "error": "Tavily had a server error (500): internal error"}
    assert (searches(tavily_fake), searches(exa_fake)) == (1, 0)


async def test_a_named_provider_falls_back_to_the_providers_the_user_listed(make_tools: Make, tavily_fake: TavilyFake,  # noqa: F811
                                                                           exa_fake: ExaFake):  # noqa: F811
    tavily_fake.script(Reply(500, {"detail": {"error": "internal error"}}), route="search")
    search, _ = make_tools(web_search_backend="tavily", web_search_fallback=("exa",))
    result = await run_tool(search, query="otters")
    assert (result["success"], result["provider"], result["fallback_from"]) == (True, "exa", "tavily")


async def test_an_unavailable_named_provider_gives_way_to_a_listed_fallback(make_tools: Make,
                                                                           exa_fake: ExaFake):  # noqa: F811
    search, _ = make_tools(web_search_backend="firecrawl", web_search_fallback=("exa",))  # firecrawl: no key
    result = await run_tool(search, query="otters")
    assert (result["provider"], result["fallback_from"]) == ("exa", "firecrawl")


async def test_an_empty_fallback_list_turns_fallback_off(make_tools: Make, tavily_fake: TavilyFake,  # noqa: F811
                                                         exa_fake: ExaFake):  # noqa: F811
    tavily_fake.script(Reply(503, {"detail": {"error": "maintenance"}}), route="search")
    search, _ = make_tools(web_search_fallback=())
    result = await run_tool(search, query="otters")
    assert result["success"] is False and "(503)" in result["error"]
    assert searches(exa_fake) == 0


async def test_when_every_provider_fails_the_model_reads_each_reason(make_tools: Make, tavily_fake: TavilyFake,  # noqa: F811
                                                                     exa_fake: ExaFake):  # noqa: F811
    tavily_fake.script(Reply(500, {"detail": {"error": "internal error"}}), route="search")
    exa_fake.script(Reply(502, {"error": "bad gateway"}), route="search")
    search, _ = make_tools(web_search_fallback=("exa",))
    result = await run_tool(search, query="otters")
    assert result["success"] is False
    assert "Tavily had a server error (500)" in result["error"] and "(502)" in result["error"]


async def test_extract_falls_back_when_its_provider_fails(make_tools: Make, tavily_fake: TavilyFake,  # noqa: F811
                                                          exa_fake: ExaFake):  # noqa: F811
    tavily_fake.script(Reply(500, {"detail": {"error": "internal error"}}), route="extract")
    _, extract = make_tools(web_extract_backend="tavily", web_extract_fallback=("exa",))
    result = await run_tool(extract, urls=["https://example.org/a"])
    assert (result["success"], result["provider"], result["fallback_from"]) == (True, "exa", "tavily")
    assert result["data"][0]["content"] == "Full text of https://example.org/a"
    assert len(exa_fake.requests_to("/contents")) == 1


async def test_three_failures_in_a_row_cool_a_provider_down_then_it_is_tried_again(
        make_tools: Make, tavily_fake: TavilyFake, exa_fake: ExaFake):  # noqa: F811
    tavily_fake.script(*[Reply(500, {"detail": {"error": "internal error"}})] * 3, route="search")
    search, _ = make_tools(web_search_fallback=("exa",), web_cooldown=0.5)

    for _ in range(3):
        assert (await run_tool(search, query="otters"))["provider"] == "exa"
    assert searches(tavily_fake) == 3

    skipped = await run_tool(search, query="otters")  # Tavily is cooling down: not even asked
    assert skipped["provider"] == "exa" and skipped["fallback_from"] == "tavily"
    assert searches(tavily_fake) == 3

    await asyncio.sleep(0.6)
    again = await run_tool(search, query="otters")  # the cool-down is over: Tavily answers again
    assert again["provider"] == "tavily" and "fallback_from" not in again
    assert searches(tavily_fake) == 4


async def test_a_429_with_retry_after_is_honoured_before_the_next_try(
        make_tools: Make, tavily_fake: TavilyFake, exa_fake: ExaFake):  # noqa: F811
    tavily_fake.script(Reply(429, {"detail": {"error": "Rate limit exceeded"}}, headers={"Retry-After": "1"}),
                       route="search")
    search, _ = make_tools(web_search_fallback=("exa",), web_cooldown=0)

    assert (await run_tool(search, query="otters"))["provider"] == "exa"
    assert (await run_tool(search, query="otters"))["provider"] == "exa"
    assert searches(tavily_fake) == 1  # the second call did not knock on Tavily's door

    await asyncio.sleep(1.1)
    assert (await run_tool(search, query="otters"))["provider"] == "tavily"
    assert searches(tavily_fake) == 2


async def test_a_lone_provider_cooling_down_says_so_without_a_call(make_tools: Make,
                                                                   tavily_fake: TavilyFake):  # noqa: F811
    tavily_fake.script(Reply(429, {"detail": {"error": "Rate limit exceeded"}}, headers={"Retry-After": "60"}),
                       route="search")
    search, _ = make_tools(web_search_backend="tavily")
    assert "rate limit reached (429)" in (await run_tool(search, query="otters"))["error"]
    second = await run_tool(search, query="otters")
    assert second == {"success": False, "error": "tavily is skipped for 60 s more after: Tavily rate limit reached "
                                                  "(429); retry after 60 s: Rate limit exceeded"}
    assert searches(tavily_fake) == 1


def test_retry_after_is_read_as_seconds_or_an_http_date():
    from datetime import UTC, datetime, timedelta
    from email.utils import format_datetime

    from providers.http import parse_retry_after

    assert parse_retry_after("7") == 7.0
    soon = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 < (parse_retry_after(soon) or 0) <= 30
    assert parse_retry_after("tomorrow-ish") is None and parse_retry_after(None) is None
