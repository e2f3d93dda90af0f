"""End to end through the real app: the fake model calls the web tools, which reach the fake services."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from gateway.config.settings import Settings
from gateway.http.app import create_app
from tests.fakes.pages import PageServer, page_server  # noqa: F401
from tests.fakes.scripted import Reply
from tests.fakes.searxng import FakeSearxng, searxng_server  # noqa: F401
from tests.fakes.upstream import FakeUpstream, text, tool_call
from tests.support.helpers import chat_chunks, streamed_text

USER = [{"role": "user", "content": "What do otters eat?"}]


@pytest.fixture
async def web_client(aiohttp_client: Any, make_settings: Callable[..., Settings],
                     searxng_server: FakeSearxng) -> Any:  # noqa: F811
    """The app exactly as `serve` builds it: default tools from the provider registry."""
    return await aiohttp_client(create_app(make_settings(env={"SEARXNG_URL": searxng_server.base_url})))


def tool_messages(upstream: FakeUpstream) -> list[dict[str, Any]]:
    return [m for m in upstream.requests[-1]["messages"] if m["role"] == "tool"]


async def test_model_searches_through_searxng_and_the_stream_shows_the_marker(
    web_client, upstream: FakeUpstream, searxng_server: FakeSearxng  # noqa: F811
):
    upstream.queue(tool_call(("web_search", {"query": "otter diet", "limit": 2})), text("Mostly fish."))
    resp = await web_client.post("/v1/chat/completions", json={"messages": USER, "stream": True})

    assert streamed_text(chat_chunks(await resp.text())) == "`🔍 otter diet`\n\nMostly fish."
    assert searxng_server.requests[0].query["q"] == "otter diet"
    [tool_message] = tool_messages(upstream)
    result = json.loads(tool_message["content"])
    assert [hit["url"] for hit in result["data"]["web"]] == ["https://example.org/1", "https://example.org/2"]
    assert [t["function"]["name"] for t in upstream.requests[0]["tools"]] == ["web_search", "web_extract"]


async def test_web_extract_of_a_loopback_url_fetches_nothing_end_to_end(
    web_client, upstream: FakeUpstream, page_server: PageServer  # noqa: F811
):
    upstream.queue(tool_call(("web_extract", {"urls": [page_server.url + "/article"]})), text("Blocked."))
    resp = await web_client.post("/v1/chat/completions", json={"messages": USER})

    assert resp.status == 200
    [tool_message] = tool_messages(upstream)
    [entry] = json.loads(tool_message["content"])["data"]
    assert entry["error"] == "blocked: 127.0.0.1 is a loopback address"
    assert page_server.requests == []


@pytest.mark.parametrize("host", ["127.1", "2130706433", "017700000001", "0177.0.0.1", "0x7f.1", "0"])
async def test_web_extract_of_a_legacy_ipv4_spelling_of_loopback_fetches_nothing_end_to_end(
    web_client, upstream: FakeUpstream, page_server: PageServer, host: str  # noqa: F811
):
    port = page_server.url.rsplit(":", 1)[1]
    upstream.queue(tool_call(("web_extract", {"urls": [f"http://{host}:{port}/article"]})), text("Blocked."))
    resp = await web_client.post("/v1/chat/completions", json={"messages": USER})

    assert resp.status == 200
    [tool_message] = tool_messages(upstream)
    [entry] = json.loads(tool_message["content"])["data"]
    address = "0.0.0.0" if host == "0" else "127.0.0.1"
    problem = "an unspecified address" if host == "0" else "a loopback address"
    assert entry["error"] == f"blocked: {host} is the IPv4 address {address}, {problem}"
    assert page_server.requests == []


async def test_a_lone_surrogate_in_a_search_answer_reaches_the_model_as_a_replacement_character(
    web_client, upstream: FakeUpstream, searxng_server: FakeSearxng  # noqa: F811
):
    # JSON may escape half of a UTF-16 pair ("\ud800"): read as text it cannot be encoded as UTF-8,
    # so the tool message must carry U+FFFD in its place for the second model call to go out.
    hit = {"url": "https://example.org/half", "title": "Otters \ud800 eat fish", "content": "Snippet"}
    searxng_server.script(Reply(text=json.dumps({"results": [hit]}), content_type="application/json"))
    upstream.queue(tool_call(("web_search", {"query": "otter diet"})), text("Mostly fish [1]."))
    resp = await web_client.post("/v1/chat/completions", json={"messages": USER})

    assert resp.status == 200
    assert (await resp.json())["choices"][0]["message"]["content"] == "Mostly fish [1]."
    [tool_message] = tool_messages(upstream)
    [found] = json.loads(tool_message["content"])["data"]["web"]
    assert found["title"] == "Otters \ufffd eat fish"
    assert found["id"] == 1
