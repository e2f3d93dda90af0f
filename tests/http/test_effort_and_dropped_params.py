"""`reasoning.effort` (any word, as Codex sends `max` and `ultra`) and `text.verbosity` reach the
upstream under Chat Completions' names, and a route's `drop_params` holds back what its upstream
refuses, fallbacks included."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from openai import AsyncOpenAI

from gateway.config.routes import parse_models
from gateway.config.settings import OPTIONS_BY_KEY, Settings, parse_option
from gateway.http.app import create_app
from tests.fakes.upstream import FakeUpstream, text


@pytest.fixture
async def sdk(client: Any) -> AsyncIterator[AsyncOpenAI]:
    async with AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key="unused", max_retries=0) as oai:
        yield oai


@pytest.mark.parametrize("effort", ["max", "ultra", "high"])
async def test_any_reasoning_effort_is_echoed_and_reaches_the_upstream_as_reasoning_effort(
    sdk: AsyncOpenAI, upstream: FakeUpstream, effort: str
) -> None:
    response = await sdk.responses.create(model="m", input="hi", reasoning={"effort": effort})  # type: ignore[typeddict-item]
    assert response.status == "completed"
    assert response.reasoning is not None and response.reasoning.effort == effort
    assert upstream.requests[-1]["reasoning_effort"] == effort


async def test_text_verbosity_reaches_the_upstream_as_verbosity(sdk: AsyncOpenAI, upstream: FakeUpstream) -> None:
    response = await sdk.responses.create(model="m", input="hi", text={"verbosity": "low"})
    assert response.text is not None and response.text.verbosity == "low"
    assert upstream.requests[-1]["verbosity"] == "low"


async def test_without_effort_or_verbosity_neither_is_sent(sdk: AsyncOpenAI, upstream: FakeUpstream) -> None:
    await sdk.responses.create(model="m", input="hi")
    assert "reasoning_effort" not in upstream.requests[-1] and "verbosity" not in upstream.requests[-1]


@pytest.mark.parametrize(("body", "param"), [
    ({"reasoning": {"effort": 3}}, "reasoning.effort"),
    ({"reasoning": {"effort": ""}}, "reasoning.effort"),
    ({"text": {"verbosity": 2}}, "text.verbosity"),
])
async def test_an_effort_or_verbosity_that_is_no_word_is_a_400(client: Any, body: dict[str, Any], param: str) -> None:
    resp = await client.post("/v1/responses", json={"input": "hi", **body})
    assert resp.status == 400
    assert (await resp.json())["error"]["param"] == param


# ---- drop_params on a route ---------------------------------------------------------------------



@pytest.fixture
def routed(aiohttp_client: Any, make_settings: Callable[..., Settings], upstream: FakeUpstream) -> Callable[..., Any]:
    async def make(table: dict[str, Any]) -> Any:
        models = parse_option(OPTIONS_BY_KEY["models"], table, "config.yaml")
        return await aiohttp_client(create_app(make_settings(llm_models=models), tools=[]))
    return make


async def test_a_route_drops_the_fields_its_upstream_refuses(routed: Any, upstream: FakeUpstream) -> None:
    client = await routed({
        "strict": {"model": "fake-model", "base_url": upstream.base_url,
                   "drop_params": ["reasoning_effort", "verbosity"]},
        "open": {"model": "fake-model", "base_url": upstream.base_url},
    })
    body = {"input": "hi", "reasoning": {"effort": "max"}, "text": {"verbosity": "high"}, "temperature": 0.5}
    for model in ("strict", "open"):
        resp = await client.post("/v1/responses", json={**body, "model": model})
        assert resp.status == 200
        assert (await resp.json())["reasoning"]["effort"] == "max"  # echoed either way
    strict, open_ = upstream.requests[-2:]
    assert "reasoning_effort" not in strict and "verbosity" not in strict and strict["temperature"] == 0.5
    assert open_["reasoning_effort"] == "max" and open_["verbosity"] == "high"


async def test_drop_params_also_holds_for_chat_completions(routed: Any, upstream: FakeUpstream) -> None:
    client = await routed({"strict": {"model": "fake-model", "base_url": upstream.base_url,
                                      "drop_params": "reasoning_effort"}})
    resp = await client.post("/v1/chat/completions", json={
        "model": "strict", "messages": [{"role": "user", "content": "hi"}], "reasoning_effort": "high"})
    assert resp.status == 200
    assert "reasoning_effort" not in upstream.requests[-1]


async def test_a_fallback_route_drops_its_own_fields(routed: Any, upstream: FakeUpstream, refused_url: str) -> None:
    upstream.queue(text("From the fallback."))
    client = await routed({
        "main": {"model": "fake-model", "base_url": refused_url, "fallbacks": ["backup"]},
        "backup": {"model": "fake-model", "base_url": upstream.base_url, "drop_params": ["reasoning_effort"]},
    })
    resp = await client.post("/v1/responses", json={"model": "main", "input": "hi", "reasoning": {"effort": "ultra"}})
    body = await resp.json()
    assert resp.status == 200 and body["model"] == "backup"
    assert "reasoning_effort" not in upstream.requests[-1]


def test_drop_params_and_vision_are_read_and_described() -> None:
    routes = parse_models({"q": {"vision": True, "drop_params": "reasoning_effort, verbosity"}}, url=str)
    assert routes is not None
    [route] = routes.routes
    assert route.vision is True and route.drop_params == ("reasoning_effort", "verbosity")
    assert "vision" in route.describe() and "drops reasoning_effort, verbosity" in route.describe()


@pytest.mark.parametrize(("route", "wording"), [
    ({"drop_params": ["messages"]}, "cannot drop 'messages'"),
    ({"drop_params": [1]}, "drop_params is a list"),
    ({"vision": "yes"}, "vision is true or false"),
])
def test_a_bad_drop_params_or_vision_names_the_route(route: dict[str, Any], wording: str) -> None:
    with pytest.raises(ValueError, match=wording) as caught:
        parse_models({"q": route}, url=str)
    assert "route 'q'" in str(caught.value)
