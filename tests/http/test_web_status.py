"""What the user sees of the fallback chain and the cool-downs: the tool result the model got, the
start-up log, `config check`, the authenticated /v1/web/status route and `agent-gateway tools`."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

import aiohttp

from gateway.cli.web import tools_report
from gateway.http.app import create_app
from tests.fakes.exa import API_KEY as EXA_KEY
from tests.fakes.exa import ExaFake, exa_fake  # noqa: F401 - fixture
from tests.fakes.scripted import Reply
from tests.fakes.tavily import API_KEY as TAVILY_KEY
from tests.fakes.tavily import TavilyFake, tavily_fake  # noqa: F401 - fixture
from tests.fakes.upstream import FakeUpstream, text, tool_call
from tests.support.gateway_process import gateway_env, run_cli

KEY = "sk-status-test-0123456789"
USER = [{"role": "user", "content": "What do otters eat?"}]


def tool_results(upstream: FakeUpstream) -> list[Any]:
    return [json.loads(m["content"]) for m in upstream.requests[-1]["messages"] if m["role"] == "tool"]


def keyed_env(tavily: TavilyFake, exa: ExaFake) -> dict[str, str]:
    return {"TAVILY_API_KEY": TAVILY_KEY, "TAVILY_API_URL": tavily.base_url,
            "EXA_API_KEY": EXA_KEY, "EXA_API_URL": exa.base_url}


async def test_a_chat_turn_falls_back_and_the_model_reads_who_answered(
        aiohttp_client: Any, make_settings: Any, upstream: FakeUpstream,
        tavily_fake: TavilyFake, exa_fake: ExaFake, caplog: Any):  # noqa: F811
    caplog.set_level(logging.INFO, logger="agent_gateway")
    settings = make_settings(env=keyed_env(tavily_fake, exa_fake), web_search_fallback=("exa",))
    client = await aiohttp_client(create_app(settings))
    assert "web search fallback: exa" in caplog.text  # the chain, logged at start

    tavily_fake.script(Reply(503, {"detail": {"error": "maintenance"}}), route="search")
    upstream.queue(tool_call(("web_search", {"query": "otter diet"})), text("Fish."))
    resp = await client.post("/v1/chat/completions", json={"messages": USER})

    assert (await resp.json())["choices"][0]["message"]["content"] == "Fish."
    [result] = tool_results(upstream)
    assert (result["provider"], result["fallback_from"]) == ("exa", "tavily")
    assert exa_fake.requests_to("/search")[0].body["query"] == "otter diet"
    said = ("web search: tavily failed [service error] (Tavily had a server error (503): maintenance); "
            "falling back to exa")
    assert said in caplog.text


async def test_a_cool_down_shows_on_the_status_route_and_in_agent_gateway_tools(
        aiohttp_server: Any, make_settings: Any, upstream: FakeUpstream,
        tavily_fake: TavilyFake, exa_fake: ExaFake):  # noqa: F811
    settings = make_settings(env=keyed_env(tavily_fake, exa_fake), api_key=KEY, web_search_backend="tavily",
                             web_search_fallback=("auto",))
    server = await aiohttp_server(create_app(settings))
    tavily_fake.script(Reply(429, {"detail": {"error": "Rate limit exceeded"}}, headers={"Retry-After": "60"}),
                       route="search")
    upstream.queue(tool_call(("web_search", {"query": "otters"})), text("Later."))
    auth = {"Authorization": f"Bearer {KEY}"}
    async with aiohttp.ClientSession() as session:
        async with session.post(server.make_url("/v1/chat/completions"), json={"messages": USER},
                                headers=auth) as resp:
            assert resp.status == 200
        async with session.get(server.make_url("/v1/web/status")) as resp:
            assert resp.status == 401
        async with session.get(server.make_url("/v1/web/status"), headers=auth) as resp:
            status = await resp.json()

    [tavily] = status["providers"]
    assert tavily["provider"] == "tavily" and tavily["failures"] == 1 and 50 < tavily["cooling_for"] <= 60
    assert "rate limit reached (429)" in tavily["reason"]

    report = await asyncio.to_thread(tools_report, dataclasses.replace(settings, port=server.port))
    assert f"Cool-downs (gateway at http://127.0.0.1:{server.port}):" in report
    line = next(line for line in report.splitlines() if line.startswith("  tavily: skipped for"))
    assert "1 failure(s) in a row: Tavily rate limit reached (429)" in line
    assert "  search fallback: off (a provider you named is not swapped; list fallbacks in web.search_fallback)" \
        in report.splitlines()


def test_tools_says_when_no_gateway_answers(tmp_path: Path):
    from gateway.config.settings import load_settings

    settings = load_settings(tmp_path, environ={"API_SERVER_PORT": "9"})  # discard: nothing listens
    assert "Cool-downs: no gateway answering at http://127.0.0.1:9 (they live in the running server)" \
        in tools_report(settings)


async def test_config_check_shows_each_chain_and_passes_over_unknown_names(tmp_path: Path):
    (tmp_path / ".env").write_text("API_SERVER_PORT=0\nTAVILY_API_KEY=tvly-x\nEXA_API_KEY=exa-x\n"
                                   "WEB_SEARCH_FALLBACK=exa,nosuch,firecrawl\nWEB_EXTRACT_FALLBACK=none\n"
                                   "WEB_CACHE_TTL=120\n")
    code, out, err = await run_cli("config", "check", env=gateway_env(tmp_path, {}))
    assert code == 0, out + err
    assert "web search: tavily" in out
    assert "web search fallback: exa" in out
    assert "web extract fallback: off (web.extract_fallback is none)" in out
    assert "web cache: 120 s, per process; cool-down 60 s after 3 failures in a row" in out
    assert "web.search_fallback: nosuch: not a known web provider (skipped)" in out
    assert "web.search_fallback: firecrawl: set FIRECRAWL_API_KEY" in out
