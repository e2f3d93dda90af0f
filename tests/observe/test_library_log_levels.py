"""What libraries log stays out of `serve`'s log: httpx writes every request URL at INFO (with a
SearXNG URL's credentials and the user's query in it), aiohttp and asyncpg have their own chatty
loggers. A real `serve` process, text and JSON log formats, a web search through a fake SearXNG
whose URL carries a password."""

from __future__ import annotations

import aiohttp
import pytest

from tests.fakes.searxng import FakeSearxng, searxng_server  # noqa: F401
from tests.fakes.upstream import FakeUpstream, text, tool_call
from tests.support.gateway_process import gateway_env, start_gateway

SEARX_PASSWORD = "SearxPw-5521"
QUERY = "otters-private-question-8812"


@pytest.mark.parametrize("log_format", ["text", "json"])
async def test_no_search_url_credential_or_query_reaches_the_log(
        tmp_path, upstream: FakeUpstream, searxng_server: FakeSearxng, log_format: str) -> None:  # noqa: F811
    searx_url = searxng_server.base_url.replace("http://", f"http://admin:{SEARX_PASSWORD}@") + "/"
    env = gateway_env(tmp_path, {"LLM_BASE_URL": upstream.base_url, "LLM_MODEL": "fake-model",
                                 "API_SERVER_LOG_FORMAT": log_format, "SEARXNG_URL": searx_url,
                                 "WEB_SEARCH_BACKEND": "searxng"})
    upstream.queue(tool_call(("web_search", {"query": QUERY})), text("Fish."))
    gateway = await start_gateway(env=env)
    try:
        async with aiohttp.ClientSession() as session:
            async with session.post(gateway.base_url + "/v1/chat/completions",
                                    json={"messages": [{"role": "user", "content": "What do otters eat?"}]}) as resp:
                assert resp.status == 200, await resp.text()
    finally:
        assert await gateway.stop() == 0
    assert searxng_server.requests and searxng_server.requests[0].query["q"] == QUERY  # the search ran
    assert gateway.proc.stderr is not None and gateway.proc.stdout is not None
    logged = (await gateway.proc.stderr.read()).decode() + (await gateway.proc.stdout.read()).decode()
    assert "/v1/chat/completions" in logged  # the gateway's own access line is there
    assert SEARX_PASSWORD not in logged and QUERY not in logged and "/search?" not in logged, logged[-3000:]
