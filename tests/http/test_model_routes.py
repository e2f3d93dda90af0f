"""Model routes (`models:`): each id reaches its own upstream with its model name and key, unknown
ids are a 404 before anything goes upstream, and a route whose upstream fails before the first byte
hands the turn to its fallback."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

import pytest

from gateway.config.settings import OPTIONS_BY_KEY, Settings, parse_option
from gateway.http.app import create_app
from tests.fakes.upstream import FakeUpstream, error, text
from tests.support.helpers import access_lines

KEY_ONE = "sk-route-one-0123456789"
KEY_TWO = "sk-route-two-9876543210"


def models(value: Any) -> Any:
    """The `models` setting as config.yaml would give it."""
    return parse_option(OPTIONS_BY_KEY["models"], value, "config.yaml")


@pytest.fixture
async def second(aiohttp_server: Any) -> FakeUpstream:
    fake = FakeUpstream(models=["llama-x", "mistral-y"])
    fake.default = text("Hello from the second upstream.")
    server = await aiohttp_server(fake.app())
    fake.base_url = str(server.make_url("/v1"))
    return fake



@pytest.fixture
def routed(aiohttp_client: Any, make_settings: Callable[..., Settings], upstream: FakeUpstream,
           second: FakeUpstream) -> Callable[..., Any]:
    """A gateway with routes `one` (the first upstream, model fake-model) and `two` (the second,
    model llama-x), each with its own key; `**route_overrides` changes or adds route fields."""

    async def make(one: dict[str, Any] | None = None, two: dict[str, Any] | None = None,
                   extra: dict[str, Any] | None = None, **overrides: Any) -> Any:
        table = {
            "one": {"model": "fake-model", "base_url": upstream.base_url, "api_key_env": "KEY_ONE", **(one or {})},
            "two": {"model": "llama-x", "base_url": second.base_url, "api_key_env": "KEY_TWO", **(two or {})},
            **(extra or {}),
        }
        settings = make_settings(llm_models=models(table), env={"KEY_ONE": KEY_ONE, "KEY_TWO": KEY_TWO},
                                 **overrides)
        return await aiohttp_client(create_app(settings, tools=[]))

    return make


async def _ask(client: Any, api: str, model: str, stream: bool, **extra: Any) -> tuple[int, Any]:
    """One turn; (status, the reply's `model` and text) or (status, error body)."""
    if api == "chat":
        body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": stream, **extra}
        resp = await client.post("/v1/chat/completions", json=body)
    else:
        body = {"model": model, "input": "hi", "stream": stream, **extra}
        resp = await client.post("/v1/responses", json=body)
    if resp.status != 200:
        return resp.status, await resp.json()
    if not stream:
        data = await resp.json()
        if api == "chat":
            return 200, (data["model"], data["choices"][0]["message"]["content"])
        return 200, (data["model"], data["output"][-1]["content"][0]["text"], data["id"])
    raw = await resp.text()
    payloads = [line[6:] for line in raw.splitlines() if line.startswith("data: ") and line != "data: [DONE]"]
    events = [json.loads(p) for p in payloads]
    if api == "chat":
        errors = [e for e in events if "error" in e]
        if errors:
            return 200, ("error", errors[0]["error"]["message"])
        names = {e["model"] for e in events}
        content = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices"))
        return 200, (names.pop() if len(names) == 1 else names, content)
    final = events[-1]
    if final["type"] != "response.completed":
        return 200, ("error", final["type"])
    names = {e["response"]["model"] for e in events if "response" in e}
    return 200, (names.pop() if len(names) == 1 else names, final["response"]["output"][-1]["content"][0]["text"],
                 final["response"]["id"])


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("stream", [False, True])
async def test_each_route_reaches_its_own_upstream_with_its_model_and_key(routed, upstream, second, api, stream):
    client = await routed()
    status, reply = await _ask(client, api, "two", stream)
    assert status == 200
    assert reply[:2] == ("two", "Hello from the second upstream.")
    assert [r["model"] for r in second.requests] == ["llama-x"]
    assert second.headers[-1]["Authorization"] == f"Bearer {KEY_TWO}"
    assert upstream.requests == []

    status, reply = await _ask(client, api, "one", stream)
    assert reply[:2] == ("one", "Hello from the fake model.")
    assert [r["model"] for r in upstream.requests] == ["fake-model"]
    assert upstream.headers[-1]["Authorization"] == f"Bearer {KEY_ONE}"
    assert len(second.requests) == 1


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_an_unknown_model_is_a_404_model_not_found_and_nothing_goes_upstream(routed, upstream, second, api):
    client = await routed()
    status, body = await _ask(client, api, "gpt-nope", False)
    assert status == 404
    assert body == {"error": {"message": "The model `gpt-nope` does not exist or you do not have access to it.",
                              "type": "invalid_request_error", "param": None, "code": "model_not_found"}}
    resp = await client.get("/v1/models/gpt-nope")
    assert resp.status == 404 and (await resp.json())["error"]["code"] == "model_not_found"
    assert upstream.requests == [] and second.requests == []


async def test_models_lists_every_route_with_its_owner_and_context_window(routed, upstream, second):
    upstream.model_fields["fake-model"] = {"max_model_len": 32768, "owned_by": "vllm"}  # vLLM
    second.model_fields["llama-x"] = {"context_length": 131072}  # OpenRouter
    client = await routed(extra={"three": {"model": "mistral-y", "base_url": second.base_url,
                                           "api_key_env": "KEY_TWO", "context_window": 8192}})
    resp = await client.get("/v1/models")
    data = (await resp.json())["data"]
    by_id = {card["id"]: card for card in data}
    assert [card["id"] for card in data] == ["agent-gateway", "one", "two", "three", "agent-gateway-deep-research",
                                             "one-deep-research", "two-deep-research", "three-deep-research"]
    assert by_id["one"]["owned_by"] == "vllm" and by_id["one"]["context_window"] == 32768
    assert by_id["two"]["owned_by"] == "fake" and by_id["two"]["context_window"] == 131072
    assert by_id["three"]["context_window"] == 8192  # the route's own word wins
    one = await (await client.get("/v1/models/one")).json()
    assert one == by_id["one"]
    # the keys went with each upstream's model list too
    assert second.model_list_headers[-1]["Authorization"] == f"Bearer {KEY_TWO}"


async def test_the_profile_model_name_keeps_meaning_the_default_upstream(routed, upstream, second):
    client = await routed()
    status, reply = await _ask(client, "chat", "agent-gateway", False)
    assert reply == ("agent-gateway", "Hello from the fake model.")
    assert [r["model"] for r in upstream.requests] == ["fake-model"]  # LLM_MODEL on LLM_BASE_URL
    assert second.requests == []


async def test_a_request_without_model_goes_to_the_default_route(routed, upstream, second):
    client = await routed()
    resp = await client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
    assert resp.status == 200 and (await resp.json())["model"] == "agent-gateway"
    assert len(upstream.requests) == 1 and second.requests == []


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("fault", ["refused", "503", "429"])
async def test_a_route_that_fails_before_the_first_byte_hands_the_turn_to_its_fallback(
        routed, upstream, second, api, stream, fault, refused_url):
    one: dict[str, Any] = {"fallbacks": ["two"]}
    if fault == "refused":
        one["base_url"] = refused_url
    else:
        upstream.queue(error(int(fault), "busy"))
    client = await routed(one=one)
    status, reply = await _ask(client, api, "one", stream)
    assert status == 200
    assert reply[:2] == ("two", "Hello from the second upstream.")  # `model` says who answered
    assert [r["model"] for r in second.requests] == ["llama-x"]
    metrics = await (await client.get("/metrics")).text()
    reason = {"refused": "unreachable", "503": "upstream_error", "429": "rate_limited"}[fault]
    assert f'agent_gateway_model_route_fallbacks_total{{reason="{reason}",route="one"}} 1.0' in metrics
    assert 'agent_gateway_model_route_calls_total{outcome="ok",route="two"} 1.0' in metrics


async def test_a_fallback_is_logged_with_its_reason(routed, upstream, second, caplog):
    upstream.queue(error(503, "overloaded"))
    client = await routed(one={"fallbacks": ["two"]})
    with caplog.at_level(logging.INFO):
        status, _ = await _ask(client, "chat", "one", False)
        access = [r.getMessage() for r in await access_lines(caplog, 1)]
    assert status == 200
    assert any("model route one failed (upstream_error" in r.getMessage() and "falling back to two" in r.getMessage()
               for r in caplog.records)
    assert any("POST /v1/chat/completions 200" in line and line.endswith("model=two") for line in access)


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_failure_after_the_first_byte_is_not_retried_elsewhere(routed, upstream, second, api):
    upstream.queue(text("a long answer that is cut off halfway", chunk_size=4, drop_after=3))
    client = await routed(one={"fallbacks": ["two"]})
    status, reply = await _ask(client, api, "one", True)
    assert status == 200 and reply[0] == "error"
    assert second.requests == []  # the client had seen text: no switch


async def test_a_route_that_failed_is_skipped_for_a_while(routed, upstream, second):
    upstream.queue(error(503))
    client = await routed(one={"fallbacks": ["two"]})
    assert (await _ask(client, "chat", "one", False))[1][0] == "two"
    assert (await _ask(client, "chat", "one", False))[1][0] == "two"
    assert len(upstream.requests) == 1  # in back-off: the second turn went straight to two
    assert len(second.requests) == 2


async def test_without_fallbacks_an_upstream_fault_is_the_clear_502_it_always_was(routed, upstream, second):
    upstream.queue(error(503, "busy"))
    client = await routed()
    status, body = await _ask(client, "chat", "one", False)
    assert status == 502 and "HTTP 503" in body["error"]["message"]
    assert second.requests == []


async def test_a_refused_request_is_not_sent_to_the_fallback(routed, upstream, second):
    upstream.queue(error(400, "bad parameter"))
    client = await routed(one={"fallbacks": ["two"]})
    status, _ = await _ask(client, "chat", "one", False)
    assert status == 400 and second.requests == []


async def test_per_route_web_tools_off_and_reasoning_hide(aiohttp_client, make_settings, upstream, lookup_tool):
    upstream.queue(text("plain", reasoning="thinking hard"), text("tooled"))
    settings = make_settings(llm_models=models({
        "relay": {"model": "fake-model", "web_tools": "off", "reasoning": "hide"},
        "agent": {"model": "fake-model"},
    }))
    client = await aiohttp_client(create_app(settings, tools=[lookup_tool]))
    resp = await client.post("/v1/chat/completions", json={"model": "relay", "messages": [
        {"role": "user", "content": "hi"}]})
    message = (await resp.json())["choices"][0]["message"]
    assert message["content"] == "plain" and "reasoning_content" not in message
    assert "tools" not in upstream.requests[0]
    resp = await client.post("/v1/chat/completions", json={"model": "agent", "messages": [
        {"role": "user", "content": "hi"}]})
    assert resp.status == 200 and "tools" in upstream.requests[1]


async def test_previous_response_id_continues_on_the_model_named_now(routed, upstream, second):
    client = await routed()
    status, first = await _ask(client, "responses", "one", False)
    stored = await (await client.get(f"/v1/responses/{first[2]}")).json()
    assert stored["model"] == "one"  # the stored response remembers its route
    status, reply = await _ask(client, "responses", "two", False, previous_response_id=first[2])
    assert reply[:2] == ("two", "Hello from the second upstream.")
    history = [m.get("content") for m in second.requests[0]["messages"] if m["role"] != "system"]
    assert history == ["hi", "Hello from the fake model.", "hi"]


async def test_a_list_of_model_ids_serves_those_on_the_default_upstream(aiohttp_client, make_settings, upstream):
    client = await aiohttp_client(create_app(make_settings(llm_models=models("fake-model,other-model")), tools=[]))
    ids = [card["id"] for card in (await (await client.get("/v1/models")).json())["data"]]
    assert ids == ["agent-gateway", "fake-model", "other-model", "agent-gateway-deep-research",
                   "fake-model-deep-research", "other-model-deep-research"]
    status, reply = await _ask(client, "chat", "other-model", False)
    assert reply[0] == "other-model" and upstream.requests[-1]["model"] == "other-model"
    assert (await _ask(client, "chat", "third-model", False))[0] == 404


async def test_auto_lists_what_the_upstream_lists_and_picks_up_a_model_added_later(
        aiohttp_client, make_settings, upstream):
    upstream.model_fields["other-model"] = {"meta": {"n_ctx_train": 4096}}  # llama.cpp's meta
    client = await aiohttp_client(create_app(make_settings(llm_models=models("auto")), tools=[]))
    data = (await (await client.get("/v1/models")).json())["data"]
    assert [card["id"] for card in data][:3] == ["agent-gateway", "fake-model", "other-model"]
    assert data[2]["context_window"] == 4096 and data[5]["id"] == "other-model-deep-research"
    upstream.models.append("new-model")
    status, reply = await _ask(client, "chat", "new-model", False)  # unknown: one look at the list
    assert status == 200 and reply[0] == "new-model"
    assert upstream.requests[-1]["model"] == "new-model"
    ids = [card["id"] for card in (await (await client.get("/v1/models")).json())["data"]]
    assert "new-model" in ids
    # an id the upstream does not list either: 404, nothing sent
    assert (await _ask(client, "chat", "ghost", False))[0] == 404
    assert len(upstream.requests) == 1


async def test_a_burst_of_unknown_ids_on_an_erroring_upstream_makes_a_few_model_list_calls(
        aiohttp_client, make_settings, upstream):
    """Issue 42 (item 10): discovery backs off while the upstream errors, instead of one `/models`
    call per unknown id; the first look after the errors end finds the new id."""
    client = await aiohttp_client(create_app(make_settings(llm_models=models("auto")), tools=[]))
    upstream.models_status = 500
    started = len(upstream.model_list_headers)
    for index in range(60):
        status, body = await _ask(client, "chat", f"unknown-{index}", False)
        assert status == 404, body
    for _ in range(20):
        assert (await client.get("/v1/models")).status == 200
    assert len(upstream.model_list_headers) - started <= 3, len(upstream.model_list_headers) - started
    assert upstream.requests == []
    upstream.models_status = 200
    upstream.models.append("back-model")
    for _ in range(100):  # the back-off after a few failed looks is a few seconds
        status, reply = await _ask(client, "chat", "back-model", False)
        if status == 200:
            break
        await asyncio.sleep(0.1)
    assert status == 200 and reply[0] == "back-model"


async def test_without_models_the_model_a_client_sends_stays_cosmetic(client, upstream):
    resp = await client.post("/v1/chat/completions", json={"model": "whatever", "messages": [
        {"role": "user", "content": "hi"}]})
    assert resp.status == 200 and (await resp.json())["model"] == "whatever"
    assert upstream.requests[0]["model"] == "fake-model"


async def test_api_server_web_tools_off_is_a_plain_relay(make_client, upstream, lookup_tool):
    client = await make_client(tools=[lookup_tool], web_tools="off")
    resp = await client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
    assert resp.status == 200 and "tools" not in upstream.requests[0]


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_routes_context_window_is_its_turns_budget(routed, upstream, second, api):
    """`context_window` on a route is the truncation budget of its turns: an input over it is a 400
    context_length_exceeded before anything goes upstream; the other route keeps the default."""
    client = await routed(two={"context_window": 1024})
    long_text = "word " * 2400  # ~4,000 tokens by the gateway's estimate (bytes / 3)
    if api == "chat":
        body = {"model": "two", "messages": [{"role": "user", "content": long_text}]}
        refused = await client.post("/v1/chat/completions", json=body)
    else:
        refused = await client.post("/v1/responses", json={"model": "two", "input": long_text})
    assert refused.status == 400
    error_body = await refused.json()
    assert error_body["error"]["code"] == "context_length_exceeded"
    assert "1024 tokens" in error_body["error"]["message"]
    assert second.requests == []
    status, _ = await _ask(client, api, "one", False)
    assert status == 200
    if api == "chat":
        fits = await client.post("/v1/chat/completions", json={"model": "one", "messages": [
            {"role": "user", "content": long_text}]})
    else:
        fits = await client.post("/v1/responses", json={"model": "one", "input": long_text})
    assert fits.status == 200  # route one has no window of its own: the 32768-token default
