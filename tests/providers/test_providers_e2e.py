"""End to end through the real app with a keyed provider: the fake model calls the web tools,
the registry picks Tavily from the profile env, and the fake Tavily API answers."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from gateway.config.settings import Settings
from gateway.http.app import create_app
from tests.fakes.scripted import Reply
from tests.fakes.tavily import API_KEY, TavilyFake, tavily_fake  # noqa: F401 - fixture
from tests.fakes.upstream import FakeUpstream, text, tool_call

USER = [{"role": "user", "content": "What do otters eat?"}]


@pytest.fixture
async def web_client(
    aiohttp_client: Any,
    make_settings: Callable[..., Settings],
    tavily_fake: TavilyFake,  # noqa: F811
) -> Any:
    env = {"TAVILY_API_KEY": API_KEY, "TAVILY_API_URL": tavily_fake.base_url}
    return await aiohttp_client(create_app(make_settings(env=env)))


def tool_results(upstream: FakeUpstream) -> list[Any]:
    return [json.loads(m["content"]) for m in upstream.requests[-1]["messages"] if m["role"] == "tool"]


async def test_a_configured_tavily_key_makes_tavily_answer_the_models_search(
    web_client: Any,
    upstream: FakeUpstream,
    tavily_fake: TavilyFake,  # noqa: F811
) -> None:
    upstream.queue(tool_call(("web_search", {"query": "otter diet", "limit": 2})), text("Mostly fish."))

    resp = await web_client.post("/v1/chat/completions", json={"messages": USER})

    assert (await resp.json())["choices"][0]["message"]["content"] == "Mostly fish."
    [result] = tool_results(upstream)
    assert [h["url"] for h in result["data"]["web"]] == ["https://example.com/one", "https://example.com/two"]
    assert tavily_fake.requests_to("/search")[0].body["query"] == "otter diet"


async def test_the_models_crawl_request_goes_to_tavily_crawl(
    web_client: Any,
    upstream: FakeUpstream,
    tavily_fake: TavilyFake,  # noqa: F811
) -> None:
    upstream.queue(tool_call(("web_extract", {"urls": ["https://docs.example"], "crawl": True})), text("Read them."))

    await web_client.post("/v1/chat/completions", json={"messages": USER})

    [result] = tool_results(upstream)
    assert [p["url"] for p in result["data"]] == [f"https://docs.example/page{i}" for i in (1, 2, 3)]
    assert tavily_fake.requests_to("/crawl")[0].body["url"] == "https://docs.example"


async def test_a_rate_limited_service_reaches_the_model_as_one_sentence(
    web_client: Any,
    upstream: FakeUpstream,
    tavily_fake: TavilyFake,  # noqa: F811
) -> None:
    limited = Reply(429, {"detail": {"error": "Rate limit exceeded"}}, headers={"Retry-After": "9"})
    tavily_fake.script(limited, route="search")
    upstream.queue(tool_call(("web_search", {"query": "otters"})), text("Try later."))

    await web_client.post("/v1/chat/completions", json={"messages": USER})

    [result] = tool_results(upstream)
    assert result == {
        "success": False,
        "error": "Tavily rate limit reached (429); retry after 9 s: Rate limit exceeded",
    }
