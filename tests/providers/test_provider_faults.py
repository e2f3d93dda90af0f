"""Web provider faults: a provider that hangs, raises or answers garbage, and a 50 MB page, each
cost the tool call (an error or a cut page for the model), never the turn."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from gateway.agent.web.tools import build_web_tools
from gateway.http.app import create_app
from plugins.web.fetch.provider import FetchProvider
from providers.registry import ProviderRegistry
from providers.web import WebSearchProvider
from tests.fakes.pages import PageServer, page_server  # noqa: F401
from tests.fakes.upstream import FakeUpstream, text, tool_call
from tests.support.resources import no_leaks


class FaultyProvider(WebSearchProvider):
    """A real provider whose search misbehaves in the way the test asks."""

    name = "faulty"

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.calls = 0

    async def search(self, query: str, limit: int = 5) -> Any:
        self.calls += 1
        if self.mode == "hang":
            await asyncio.sleep(60)
        if self.mode == "raise":
            raise RuntimeError("index shard 7 is on fire")
        if self.mode == "garbage":
            return {"success": True, "data": "<html>not results</html>"}
        if self.mode == "not a dict":
            return ["what", "is", "this"]
        raise AssertionError(self.mode)


def tool_outputs(upstream: FakeUpstream) -> list[dict[str, Any]]:
    return [json.loads(m["content"]) for m in upstream.requests[-1]["messages"] if m["role"] == "tool"]


async def client_with(aiohttp_client: Any, make_settings: Any, *providers: WebSearchProvider, **overrides: Any) -> Any:
    settings = make_settings(**overrides)
    registry = ProviderRegistry()
    for provider in providers:
        registry.add(provider, plugin=provider.name)
    client = await aiohttp_client(create_app(settings, tools=build_web_tools(registry, settings)))
    return client, registry


@pytest.mark.parametrize(("mode", "says"), [("hang", "0.3 s"),
                                            ("raise", "index shard 7 is on fire"),
                                            ("garbage", "malformed"), ("not a dict", "malformed")])
async def test_a_misbehaving_search_provider_is_a_tool_error_and_the_turn_completes(
        aiohttp_client, make_settings, upstream, mode, says):
    provider = FaultyProvider(mode)
    client, registry = await client_with(aiohttp_client, make_settings, provider, tool_timeout=0.3)
    upstream.queue(text("warm"))  # open the pooled connections before counting
    assert (await client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})).ok
    async with no_leaks():
        upstream.queue(tool_call(("web_search", {"query": "otters"})), text("answered anyway"))
        resp = await client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "q"}]})
        assert resp.status == 200
        assert (await resp.json())["choices"][0]["message"]["content"] == "answered anyway"
    [output] = tool_outputs(upstream)
    assert output["success"] is False and says in output["error"], output
    assert provider.calls == 1
    await registry.aclose()


async def test_a_50_mb_page_is_cut_for_the_model_and_the_turn_completes(
        aiohttp_client, make_settings, upstream, page_server: PageServer):  # noqa: F811
    fetch = FetchProvider(allow_private=True)
    client, registry = await client_with(aiohttp_client, make_settings, fetch, allow_private_urls=True,
                                         max_extract_chars=2000)
    url = f"{page_server.url}/huge"
    upstream.queue(tool_call(("web_extract", {"urls": [url]})), text("read it"))
    resp = await client.post("/v1/responses", json={"input": "read the page"})
    assert resp.status == 200
    body = await resp.json()
    assert body["status"] == "completed" and body["output"][-1]["content"][0]["text"] == "read it"
    [output] = tool_outputs(upstream)
    assert output["success"] is True
    [page] = output["data"]
    assert "otters" in page["content"] and len(page["content"]) < 2200  # cut to WEB_MAX_EXTRACT_CHARS
    assert page_server.huge_bytes_sent < 50 * 1024 * 1024  # the reader stopped early, at its byte cap
    await registry.aclose()
