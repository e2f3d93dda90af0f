"""Per-key access (issue 46 item 3) on one in-process gateway over a real SQLite file, the keys made
by the real CLI: model routes (both APIs and /v1/models, the unknown model's very body), web tools
(neither offered nor run; a request asking for web search is a 400) and configured MCP servers (a
real stdio server: not offered to a key without it; naming it is the unconfigured label's 400)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.config.settings import OPTIONS_BY_KEY, parse_option
from tests.fakes.tools import LookupTool
from tests.fakes.upstream import FakeUpstream, Reply, text, tool_call
from tests.http.test_mcp_configured import TIME_TOOL, time_server
from tests.keys.test_keys_isolation import bearer, make_key
from tests.support.gateway_process import gateway_env, run_cli

HI = [{"role": "user", "content": "hi"}]


def _routes(upstream: FakeUpstream) -> Any:
    table = {name: {"model": "fake-model", "base_url": upstream.base_url} for name in ("one", "two")}
    return parse_option(OPTIONS_BY_KEY["models"], table, "config.yaml")


async def _turn(client: Any, key: str, api: str, model: str, **extra: Any) -> tuple[int, Any]:
    if api == "chat":
        reply = await client.post("/v1/chat/completions", json={"model": model, "messages": HI, **extra},
                                  headers=bearer(key))
    else:
        reply = await client.post("/v1/responses", json={"model": model, "input": "hi", **extra}, headers=bearer(key))
    return reply.status, await reply.json()


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_route_outside_the_keys_list_is_answered_as_an_unknown_model(
        tmp_path: Path, make_client: Callable[..., Any], upstream: FakeUpstream, api: str) -> None:
    only_one = await make_key(tmp_path, "only-one", "--models", "one")
    client = await make_client(tools=[], llm_models=_routes(upstream))
    assert (await _turn(client, only_one, api, "one"))[0] == 200
    refused = await _turn(client, only_one, api, "two")
    unknown = await _turn(client, only_one, api, "nosuch")
    assert refused[0] == unknown[0] == 404
    assert refused[1] == {"error": {**unknown[1]["error"], "message": unknown[1]["error"]["message"].replace(
        "nosuch", "two")}}
    assert refused[1]["error"]["code"] == "model_not_found"
    # background runs are prepared by the same code: refused before anything is stored
    status, body = await _turn(client, only_one, "responses", "two", background=True)
    assert status == 404 and body["error"]["code"] == "model_not_found"
    assert [r["model"] for r in upstream.requests] == ["fake-model"]  # only the allowed turn went upstream


async def test_models_lists_only_the_keys_routes(tmp_path: Path, make_client: Callable[..., Any],
                                                 upstream: FakeUpstream) -> None:
    only_two, every = await make_key(tmp_path, "only-two", "--models", "two"), await make_key(tmp_path, "every")
    client = await make_client(tools=[], llm_models=_routes(upstream))
    async with client.get("/v1/models", headers=bearer(only_two)) as reply:
        # a route's research id comes with it (the key has web tools)
        assert [card["id"] for card in (await reply.json())["data"]] == ["two", "two-deep-research"]
    async with client.get("/v1/models", headers=bearer(every)) as reply:
        assert {card["id"] for card in (await reply.json())["data"]} >= {"one", "two"}
    answers = []
    for model in ("one", "nosuch"):
        async with client.get(f"/v1/models/{model}", headers=bearer(only_two)) as reply:
            answers.append((reply.status, (await reply.text()).replace(model, "<id>")))
    assert answers[0] == answers[1] and answers[0][0] == 404
    async with client.get("/v1/models/two", headers=bearer(only_two)) as reply:
        assert reply.status == 200


async def test_without_routes_the_default_route_is_named_by_the_model_name(
        tmp_path: Path, make_client: Callable[..., Any], upstream: FakeUpstream) -> None:
    default = await make_key(tmp_path, "default-ok", "--models", "agent-gateway")
    other = await make_key(tmp_path, "other-only", "--models", "somewhere-else")
    client = await make_client(tools=[])
    assert (await _turn(client, default, "chat", "any-model-id"))[0] == 200  # any id means the default route
    status, body = await _turn(client, other, "chat", "agent-gateway")
    assert status == 404 and body["error"]["code"] == "model_not_found"
    async with client.get("/v1/models", headers=bearer(other)) as reply:
        assert (await reply.json())["data"] == []
    async with client.get("/v1/models", headers=bearer(default)) as reply:
        listed = [card["id"] for card in (await reply.json())["data"]]
    assert listed == ["agent-gateway", "agent-gateway-deep-research"]


async def test_a_key_without_web_is_offered_no_web_tool_and_none_runs(
        tmp_path: Path, make_client: Callable[..., Any], upstream: FakeUpstream) -> None:
    no_web, web = await make_key(tmp_path, "no-web", "--no-web"), await make_key(tmp_path, "web")
    lookup = LookupTool()
    client = await make_client(tools=[lookup])
    upstream.queue(text("plain answer"))
    assert (await _turn(client, no_web, "chat", "m"))[0] == 200
    assert "tools" not in upstream.requests[-1]
    # a model that calls the web tool anyway (told by the user to) gets no result from it
    upstream.queue(tool_call(("lookup", {"term": "x"})), text("done"))
    assert (await _turn(client, no_web, "responses", "m"))[0] == 200
    assert lookup.calls == []
    assert "unknown tool" in upstream.requests[-1]["messages"][-1]["content"]
    upstream.queue(text("with tools"))
    assert (await _turn(client, web, "chat", "m"))[0] == 200
    assert [t["function"]["name"] for t in upstream.requests[-1]["tools"]] == ["lookup"]


@pytest.mark.parametrize("api, extra, param", [
    ("chat", {"web_search_options": {}}, "web_search_options"),
    ("responses", {"tools": [{"type": "web_search"}]}, "tools"),
])
async def test_a_key_without_web_asking_for_web_search_gets_a_400(
        tmp_path: Path, make_client: Callable[..., Any], upstream: FakeUpstream, api: str, extra: dict[str, Any],
        param: str) -> None:
    no_web = await make_key(tmp_path, "no-web", "--no-web")
    client = await make_client(tools=[LookupTool()])
    status, body = await _turn(client, no_web, api, "m", **extra)
    assert status == 400 and body["error"]["param"] == param and "no-web" in body["error"]["message"]
    assert upstream.requests == []


async def test_a_configured_mcp_server_outside_the_keys_list_is_neither_offered_nor_named(
        tmp_path: Path, make_client: Callable[..., Any], upstream: FakeUpstream) -> None:
    none = await make_key(tmp_path, "no-mcp", "--mcp", "none")
    timed = await make_key(tmp_path, "timed", "--mcp", "time")
    client = await make_client(tools=[], mcp_servers=(time_server(),))
    for key, offered in ((none, False), (timed, True)):
        upstream.queue(text("ok"))
        assert (await _turn(client, key, "responses", "m"))[0] == 200
        names = [t["function"]["name"] for t in upstream.requests[-1].get("tools", [])]
        assert (TIME_TOOL in names) is offered, names
    named = {"tools": [{"type": "mcp", "server_label": "time"}]}
    refused = await _turn(client, none, "responses", "m", **named)
    unknown = await _turn(client, none, "responses", "m", tools=[{"type": "mcp", "server_label": "nosuch"}])
    assert refused[0] == unknown[0] == 400
    assert refused[1]["error"]["message"].replace("'time'", "'nosuch'") == unknown[1]["error"]["message"]
    assert refused[1]["error"]["param"] == unknown[1]["error"]["param"]
    # the allowed key's MCP calls are counted in its usage by day
    upstream.queue(tool_call((TIME_TOOL, {"timezone": "UTC"})), text("It is late."))
    status, body = await _turn(client, timed, "responses", "m")
    assert status == 200 and [item["type"] for item in body["output"]] == ["mcp_list_tools", "mcp_call", "message"]
    deadline, out = time.monotonic() + 8, ""
    while time.monotonic() < deadline:  # the ring writes every 2 s
        code, out, err = await run_cli("keys", "usage", "timed", "--days", "1", env=gateway_env(tmp_path))
        assert code == 0, err
        if len(out.splitlines()) == 2 and out.splitlines()[1].split()[8] == "1":
            break
        await asyncio.sleep(0.3)
    header, row = out.splitlines()
    assert header.split()[-4:] == ["MCP", "CALLS", "STORED", "BYTES"] and row.split()[8] == "1", out


async def test_a_queued_background_run_starts_under_its_keys_access_as_it_is_then(
        tmp_path: Path, make_client: Callable[..., Any], upstream: FakeUpstream) -> None:
    worker = await make_key(tmp_path, "worker")
    client = await make_client(tools=[], max_concurrent_runs=1)
    upstream.queue(Reply(text="slow", endless=True, chunk_delay=0.05))
    created = []
    for _ in range(2):
        async with client.post("/v1/responses", json={"model": "m", "input": "x", "background": True},
                               headers=bearer(worker)) as reply:
            created.append(await reply.json())
    busy, queued = created
    assert queued["status"] == "queued"
    code, _, err = await run_cli("keys", "update", "worker", "--models", "elsewhere", env=gateway_env(tmp_path))
    assert code == 0, err
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # the ring's refresh brings the change
        async with client.get("/v1/models", headers=bearer(worker)) as reply:
            if (await reply.json())["data"] == []:
                break
        await asyncio.sleep(0.1)
    async with client.post(f"/v1/responses/{busy['id']}/cancel", headers=bearer(worker)) as reply:
        assert reply.status == 200
    for _ in range(500):
        async with client.get(f"/v1/responses/{queued['id']}", headers=bearer(worker)) as reply:
            ended = await reply.json()
        if ended["status"] not in ("queued", "in_progress"):
            break
        await asyncio.sleep(0.02)
    assert ended["status"] == "failed" and ended["error"]["code"] == "model_not_found", ended
    assert len(upstream.requests) == 1  # the queued run never reached the model


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_key_without_web_has_no_research_model_and_one_with_web_does(
        tmp_path: Path, make_client: Callable[..., Any], upstream: FakeUpstream, api: str) -> None:
    no_web = await make_key(tmp_path, "no-web", "--no-web")
    only_two = await make_key(tmp_path, "two", "--models", "two")
    client = await make_client(tools=[], llm_models=_routes(upstream))
    async with client.get("/v1/models", headers=bearer(no_web)) as reply:
        listed = [card["id"] for card in (await reply.json())["data"]]
    assert {"one", "two"} <= set(listed) and not [i for i in listed if i.endswith("-deep-research")]
    for key, model in ((no_web, "one-deep-research"), (only_two, "one-deep-research")):
        status, body = await _turn(client, key, api, model)
        assert status == 404 and body["error"]["code"] == "model_not_found"
        async with client.get(f"/v1/models/{model}", headers=bearer(key)) as reply:
            assert reply.status == 404
    async with client.get("/v1/models/two-deep-research", headers=bearer(only_two)) as reply:
        assert reply.status == 200
    assert upstream.requests == []  # refused before any model call
